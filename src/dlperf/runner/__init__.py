"""Runs cases in isolated worker processes and stores each result as it finishes."""
