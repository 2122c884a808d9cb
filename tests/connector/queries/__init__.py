"""Tests across modules: Spark queries (the ``spark`` fixture, a query app in its own process) and the source or
sink driven as Spark drives them against the local servers. Each module's own tests mirror connector/."""
