"""Benchmarks: each script runs the project and a baseline side by side in one run and prints ratios."""
