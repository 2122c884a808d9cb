"""Helpers of the connector's tests: options and readers for the local servers, simulations against the quota
model, the query apps run as their own processes, and stored fixtures (data/)."""
