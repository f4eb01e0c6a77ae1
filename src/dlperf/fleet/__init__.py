"""A fleet: a study's cases sent to Dask workers on several machines that share one store.

`executor.DaskExecutor` is what `dlperf run --executor dask` passes to `runner.sweep.run_study`; `tasks` is what
runs on a worker (one case, stored there with that machine's environment); `workers` starts a Dask worker or
scheduler for dlperf (`dlperf fleet worker|scheduler`). Dask (`distributed`) is imported only inside functions.
"""
