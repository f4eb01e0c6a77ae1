"""Serving under MLPerf's LoadGen: a system under test around a step's `predict(n)`, LoadGen's four scenarios,
LoadGen's own verdict parsed from its logs, and the Server max-rate search.

`settings` turns a `workloads.serve.ServeParams` into LoadGen's `TestSettings` (MLPerf's rule values kept as data
in one place); `sut` is the system under test (queue + worker thread, batches of at most `max_batch`); `run`
does one LoadGen run and parses its detail log; `search` finds the highest valid Server rate; `driver.drive` is
what `Serve.drive` calls. `mlperf_loadgen` is imported only inside functions.
"""
