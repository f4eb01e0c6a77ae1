"""Tests that run over every registered framework adapter and the workload x framework matrix."""
