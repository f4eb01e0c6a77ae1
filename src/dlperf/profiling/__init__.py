"""Kernel-level measurement: hardware counters through Nsight Compute (more profilers in later issues)."""
