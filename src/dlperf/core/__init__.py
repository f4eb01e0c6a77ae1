"""Typed core data that crosses layers: run settings, worker jobs, case results and their metrics.

The lowest layer beside `timing`: it imports nothing of dlperf above it, so every other layer may use it.
"""
