"""The store reads behind the hardware analyses (`hardware.roofline`, `hardware.measured`), which take
rows, never a store: each run's environment as its reports see it, the `peaks` runs of a host."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dlperf.hardware.roofline import PeaksRuns, same_host
from dlperf.store import Store


def peaks_runs(store: Store, hosts: Iterable[dict[str, Any]]) -> PeaksRuns:
    """The `peaks` runs of any of these environments' hosts, newest first, each as (the environment it
    ran in, its result rows) for `hardware.roofline.measured_peaks`."""
    hosts = list(hosts)
    if not hosts:
        return []
    out = []
    for run in store.runs_of_study("peaks"):  # newest first
        env = store.run_environment(run["id"])
        if any(same_host(env, host) for host in hosts):
            out.append((env, store.results(run["id"])))
    return out


def cnn_inputs(store: Store, run_ids: list[str] | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], PeaksRuns]:
    """What `hardware.measured.cnn_rows` takes: every stored ok `cnn` result (of these runs, or all),
    oldest first; the environment of each of their runs, by run id; the `peaks` runs of their hosts."""
    results = store.results_of_workload("cnn", run_ids)
    envs = {run_id: store.run_environment(run_id) for run_id in dict.fromkeys(r["run_id"] for r in results)}
    return results, envs, peaks_runs(store, envs.values())
