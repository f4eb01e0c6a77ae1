"""The canary: a short kernel of fixed work, run by the sweep between cases, whose times show how the machine's
speed moved during a run (and from one run to the next).

Noise from outside the guest (a cloud VM's neighbours, a shared last-level cache, a host that throttles) is seen
neither by contention (other processes of this machine) nor by steal time. A fixed piece of work timed again and
again is: where it takes 20% longer at minute 3 than at minute 1, every case around minute 3 ran on a slower
machine. The canary is two tiny parts, each a median of a few repeats, in the sweep's own process (never inside a
case's timed region; the worker has exited when it runs):

- memory: `c = a + b` over three 8 MiB float32 arrays (24 MiB touched: past most cores' share of the last-level
  cache, so it feels a neighbour's bandwidth and cache pressure);
- compute: `sin` over a 64 KiB float32 array, in cache (it feels the core's clock and a sibling thread).

NumPy's element-wise ufuncs run on one thread, so the canary never competes with itself for cores. Its work is the
same on every machine and run (`KIND` names it): canary times of two runs are comparable only where their `KIND`
matches. It costs about 20-40 ms each time (more on a loaded machine). Each case's stored row holds the canary
just before and just after its worker (`metrics.canary`), so the run's series is the union of its rows' (a
resumed run keeps its own).

On a fleet (`fleet.tasks`) each Dask worker times the canary around its own cases, on its own machine, and names
that machine (`host`). Machines differ in speed, so a fleet run's spread and drift are taken with each canary time
divided by its machine's median (`normalized`): what is left is each machine's movement, not their difference.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

#: What the canary computes; stored with each time so that two definitions are never compared.
KIND = "numpy add 3x8MiB x4 + sin 64KiB x200, median of 9 each, v1"
MEMORY_ELEMENTS = 8 * 1024 * 1024 // 4  # float32 per array
COMPUTE_ELEMENTS = 64 * 1024 // 4
REPEATS = 9
MEMORY_PASSES = 4  # adds over the large arrays per repeat (about 1-3 ms)
COMPUTE_PASSES = 200  # sin over the small array per repeat (about 1-3 ms)
#: A run's canary spread ((max - min) / median) above this: the machine's speed changed during the run.
UNSTABLE_SPREAD = 0.10


class CanaryRecord(TypedDict):
    """A canary time as a row stores it (`CanaryTime.as_dict`): seconds, `at` an ISO timestamp; `host` only where
    known."""

    at: str
    time_s: float
    memory_s: float
    compute_s: float
    kind: str
    host: NotRequired[str]


@dataclass(frozen=True)
class CanaryTime:
    """One canary: when it ran (UTC, ISO 8601), its two parts' medians and their sum, seconds, and on a fleet the
    machine it ran on (None: the sweep's own machine)."""

    at: str
    memory_s: float
    compute_s: float
    kind: str = KIND
    host: str | None = None

    @property
    def time_s(self) -> float:
        return self.memory_s + self.compute_s

    def as_dict(self) -> CanaryRecord:
        out: CanaryRecord = {"at": self.at, "time_s": self.time_s, "memory_s": self.memory_s,
                             "compute_s": self.compute_s, "kind": self.kind}
        if self.host is not None:
            out["host"] = self.host
        return out

    @classmethod
    def from_dict(cls, d: CanaryRecord) -> CanaryTime:
        host = d.get("host")
        return cls(str(d["at"]), float(d["memory_s"]), float(d["compute_s"]), str(d.get("kind", KIND)),
                   str(host) if host is not None else None)


class Canary:
    """The canary kernel with its buffers, allocated once per sweep. `clock` (seconds) is injectable, so a test
    checks the arithmetic with a fake one; `now` gives the timestamp."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        import numpy as np

        self._clock, self._now = clock, now
        self._a = np.ones(MEMORY_ELEMENTS, dtype=np.float32)
        self._b = np.ones(MEMORY_ELEMENTS, dtype=np.float32)
        self._c = np.empty(MEMORY_ELEMENTS, dtype=np.float32)
        self._x = np.linspace(0.0, 1.0, COMPUTE_ELEMENTS, dtype=np.float32)
        self._y = np.empty(COMPUTE_ELEMENTS, dtype=np.float32)
        self._memory()  # first touch of every page, outside any timing
        self._compute()

    def _memory(self) -> None:
        import numpy as np

        for _ in range(MEMORY_PASSES):
            np.add(self._a, self._b, out=self._c)

    def _compute(self) -> None:
        import numpy as np

        for _ in range(COMPUTE_PASSES):
            np.sin(self._x, out=self._y)

    def _median_s(self, part: Callable[[], None]) -> float:
        times = []
        for _ in range(REPEATS):
            start = self._clock()
            part()
            times.append(self._clock() - start)
        return float(statistics.median(times))

    def measure(self, host: str | None = None) -> CanaryTime:
        """Run the canary once; its time (the two parts' medians), naming `host` where a fleet worker ran it."""
        at = self._now().isoformat()
        return CanaryTime(at, self._median_s(self._memory), self._median_s(self._compute), host=host)


@dataclass(frozen=True)
class CanaryStats:
    """A run's canary series: how much the machine's speed moved during it."""

    n: int
    median_s: float
    #: (max - min) / median of the canary times: the widest swing of the machine's speed in the run.
    spread_rel: float
    #: median of the last third / median of the first third - 1 (> 0: the machine got slower); 0 below 3 times.
    drift_rel: float
    duration_s: float  # first to last canary
    machines: int = 1  # more than one (a fleet): spread and drift are of times over each machine's own median

    @property
    def unstable(self) -> bool:
        return self.spread_rel > UNSTABLE_SPREAD

    def line(self) -> str:
        """One line for the run's summary."""
        if self.machines > 1:
            return (f"canary: {self.n} times on {self.machines} machines over {self.duration_s:.0f} s, each against "
                    f"its machine's median: spread {self.spread_rel:.1%} (max-min), drift {self.drift_rel:+.1%} (last "
                    "third vs first): " + ("a machine's speed changed during the run" if self.unstable else
                                           "the machines were steady"))
        return (f"canary: {self.n} times over {self.duration_s:.0f} s, median {self.median_s * 1e3:.1f} ms, spread "
                f"{self.spread_rel:.1%} (max-min), drift {self.drift_rel:+.1%} (last third vs first): "
                + ("the machine's speed changed during the run" if self.unstable else "the machine was steady"))


def run_series(rows: Iterable[Any]) -> list[CanaryTime]:
    """The canary times of a run, from its rows' `metrics.canary` (before/after each case), each once, in time
    order; [] for a run stored before the canary existed."""
    seen: dict[tuple[str, str], CanaryTime] = {}
    for r in rows:
        c = r.m.get("canary") if getattr(r, "metrics", None) is not None else None
        if not isinstance(c, dict):
            continue
        for side in ("before", "after"):
            if isinstance(c.get(side), dict):
                t = CanaryTime.from_dict(c[side])
                seen.setdefault((t.at, t.host or ""), t)
    return [seen[k] for k in sorted(seen)]


def normalized(series: Sequence[CanaryTime], medians: dict[str | None, float] | None = None) -> list[float]:
    """Each canary time over its machine's median (`medians`, by host; default: the series' own), so that canaries
    of machines of different speeds can be pooled: 1.0 is a machine at its usual speed."""
    if medians is None:
        medians = {h: statistics.median(c.time_s for c in series if c.host == h) for h in {c.host for c in series}}
    return [c.time_s / medians[c.host] for c in series]


def stats(series: Sequence[CanaryTime]) -> CanaryStats | None:
    """The spread and drift of a canary series (None below 2 times); on several machines, of the times over each
    machine's median."""
    if len(series) < 2:
        return None
    machines = len({c.host for c in series})
    times = normalized(series) if machines > 1 else [c.time_s for c in series]
    mid = statistics.median(times)
    third = len(times) // 3
    drift = statistics.median(times[-third:]) / statistics.median(times[:third]) - 1 if third else 0.0
    first = datetime.fromisoformat(series[0].at)
    last = datetime.fromisoformat(series[-1].at)
    return CanaryStats(len(times), mid, (max(times) - min(times)) / mid if mid > 0 else math.inf, drift,
                       (last - first).total_seconds(), machines)


def local_times(rows: Iterable[Any]) -> list[float]:
    """The canary times bracketing these rows' processes (each row's before and after), for a case's local
    machine speed; [] where the rows hold none."""
    out: list[float] = []
    for r in rows:
        c = r.m.get("canary")
        if isinstance(c, dict):
            out += [CanaryTime.from_dict(c[s]).time_s for s in ("before", "after") if isinstance(c.get(s), dict)]
    return out


__all__ = ["KIND", "UNSTABLE_SPREAD", "Canary", "CanaryStats", "CanaryTime", "local_times", "normalized", "run_series",
           "stats"]
