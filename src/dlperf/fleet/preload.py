"""Loaded into a Dask worker by `dlperf fleet worker` (`dask worker --preload dlperf.fleet.preload`): gives the
worker the fleet's caches (`tasks.FleetState`: store connections, this machine's environment ids)."""

from __future__ import annotations

from typing import Any

from dlperf.fleet.tasks import PLUGIN_NAME, FleetState


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: attach a FleetState to `worker` (its plugins are torn down when it closes)."""
    worker.plugins[PLUGIN_NAME] = FleetState()
