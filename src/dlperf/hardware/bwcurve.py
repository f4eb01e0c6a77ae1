"""Bandwidth as a curve over working-set sizes, its plateaus, and the ceiling it sets at any size.

As the Empirical Roofline Toolkit does, a run's bandwidth ceilings are a sweep: copy/add at working sets
log-spaced from inside L1 to well past the last-level cache (`sweep_sizes`), each point the best rate
over kernels and frameworks with its spread (IQR/median of its samples). The memory levels are then
read off the data (`find_plateaus`: PELT segmentation of log bandwidth, via `ruptures`), each with where
it actually starts and ends, instead of assuming that half a reported cache is resident (on a VM whose
last-level cache is shared with other tenants, half of it already spills).

A case is judged against the curve at its own working set (`BandwidthCurve.at`). Bandwidth does not rise
with the working set once per-call overhead is paid, so the ceiling at a size is at least what any larger
size reached: the curve is read through its non-increasing envelope (a point that ran while disturbed
is covered by the larger ones). Between two measured sizes the figure shown is the log-log interpolation;
the line a case must cross to be called "above" is the envelope at the measured size just below it (the
most the level can give there), plus its spread and a stated tolerance.

Nothing here measures: `runner.ceilings` does, and stores `to_dict()` with the run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from dlperf.units import format_size

#: The sweep starts here: inside any L1 data cache (32 KiB or more on the CPUs dlperf knows).
SWEEP_START_BYTES = 16 * 2**10
#: Successive working sets differ by this factor (one point per octave).
SWEEP_FACTOR = 2.0
#: A segment whose points span more than this (max/min - 1 of the best rates) is a transition, not a plateau.
PLATEAU_MAX_RANGE_REL = 0.35
#: PELT's penalty on the l2 cost of log bandwidth (a step of about 25% over a few points is kept).
PLATEAU_PENALTY = 0.08


@dataclass(frozen=True)
class CurvePoint:
    """One working set of the sweep: its best rate (bytes / fastest sample's time) and spread."""

    working_set_bytes: int
    bytes_per_s: float
    #: IQR/median of the samples behind the figure (the spread over repeats).
    spread_rel: float
    kernel: str = ""
    framework: str = ""


@dataclass(frozen=True)
class Plateau:
    """A stretch of the curve where bandwidth stays level: a memory level as the data shows it."""

    name: str
    start_bytes: int
    end_bytes: int
    #: The median of its points' best rates.
    bytes_per_s: float
    #: The largest spread of its points.
    spread_rel: float
    n_points: int


@dataclass(frozen=True)
class CurveAt:
    """The curve at one working set."""

    #: Log-log interpolation of the envelope between the measured sizes around it.
    bytes_per_s: float
    #: The envelope at the measured size at or below it: the most the curve allows there.
    upper_bytes_per_s: float
    #: The spread of the point that sets `upper_bytes_per_s`.
    spread_rel: float
    #: The point that sets it ("numpy copy at 8 MiB").
    source: str


def sweep_sizes(dram_bytes: int) -> list[int]:
    """Working sets from SWEEP_START_BYTES by SWEEP_FACTOR up to `dram_bytes` (itself the last point)."""
    out, size = [], float(SWEEP_START_BYTES)
    while size < dram_bytes:
        out.append(int(size))
        size *= SWEEP_FACTOR
    return [*out, int(dram_bytes)]


def envelope(points: list[CurvePoint]) -> list[tuple[float, CurvePoint]]:
    """(value, the point that sets it) per point, sorted by size: the best rate at this size or any larger."""
    pts = sorted(points, key=lambda p: p.working_set_bytes)
    out: list[tuple[float, CurvePoint]] = []
    best: CurvePoint | None = None
    for p in reversed(pts):
        if best is None or p.bytes_per_s > best.bytes_per_s:
            best = p
        out.append((best.bytes_per_s, best))
    return out[::-1]


def _describe(p: CurvePoint) -> str:
    return f"{p.framework} {p.kernel} at {format_size(p.working_set_bytes)}".strip()


@dataclass(frozen=True)
class BandwidthCurve:
    points: tuple[CurvePoint, ...]
    plateaus: tuple[Plateau, ...] = ()

    def at(self, working_set_bytes: float) -> CurveAt | None:
        """The curve at `working_set_bytes` (below the first size: the first point's envelope, the
        fastest anywhere; beyond the last: the last point); None with no point."""
        pts = sorted(self.points, key=lambda q: q.working_set_bytes)
        if not pts:
            return None
        env = envelope(pts)
        sizes = [p.working_set_bytes for p in pts]
        i = max((k for k, s in enumerate(sizes) if s <= working_set_bytes), default=0)
        value, setter = env[i]
        shown = value
        if sizes[i] < working_set_bytes and i + 1 < len(env):
            nxt = env[i + 1][0]
            t = math.log(working_set_bytes / sizes[i]) / math.log(sizes[i + 1] / sizes[i])
            shown = math.exp(math.log(value) + t * (math.log(nxt) - math.log(value)))
        return CurveAt(shown, value, setter.spread_rel, _describe(setter))

    def lines(self, reported: tuple[tuple[str, int | None], ...] = ()) -> list[str]:
        """The curve as a report prints it, indented: each working set's best rate and spread, the cache
        sizes the machine reported (`reported`: (level, capacity)), and a line where no plateau stood out."""
        pts = sorted(self.points, key=lambda q: q.working_set_bytes)
        out = ["  curve (GB/s at each working set, IQR): " + ", ".join(
            f"{format_size(q.working_set_bytes)} {q.bytes_per_s / 1e9:.1f} ({100 * q.spread_rel:.0f}%)" for q in pts)]
        caps = [f"{name} {format_size(cap)}" for name, cap in reported if cap is not None]
        if caps:
            out.append(f"  cache sizes reported (for the run's threads): {', '.join(caps)}")
        if not self.plateaus:
            out.append(f"  no plateau found: every stretch of the curve varies by more than "
                       f"{100 * PLATEAU_MAX_RANGE_REL:.0f}%; cases are judged against the curve itself")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"points": [asdict(p) for p in self.points], "plateaus": [asdict(p) for p in self.plateaus]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BandwidthCurve:
        def pick(kind: type, row: dict[str, Any]) -> Any:  # stored rows carry more (their figures)
            return kind(**{k: row[k] for k in kind.__dataclass_fields__ if k in row})

        return cls(tuple(pick(CurvePoint, p) for p in data.get("points") or []),
                   tuple(pick(Plateau, p) for p in data.get("plateaus") or []))


def _segments(logs: list[float]) -> list[tuple[int, int]]:
    """[start, end) index ranges of PELT's segmentation of `logs` (one segment when it is too short)."""
    if len(logs) < 4:
        return [(0, len(logs))]
    import numpy as np
    import ruptures

    ends = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(np.asarray(logs).reshape(-1, 1)).predict(
        pen=PLATEAU_PENALTY)
    starts = [0, *ends[:-1]]
    return list(zip(starts, ends, strict=True))


def level_name(size_bytes: float, levels: list[tuple[str, int | None]]) -> str:
    """The reported level (`caches.memory_levels`) whose capacity holds `size_bytes`."""
    for name, capacity in levels:
        if capacity is None or size_bytes <= capacity:
            return name
    return levels[-1][0] if levels else "DRAM"


def find_plateaus(points: list[CurvePoint], levels: list[tuple[str, int | None]]) -> list[Plateau]:
    """The level stretches of the curve, from the data: PELT on log bandwidth, segments whose rates
    stay within PLATEAU_MAX_RANGE_REL kept as plateaus, each named after the reported level that holds
    its middle (geometric) working set; a second plateau of one name gets " (2)". Per-call overhead at
    the smallest sizes, and the slopes between levels, are transitions and left out."""
    pts = sorted(points, key=lambda p: p.working_set_bytes)
    logs = [math.log(p.bytes_per_s) for p in pts]
    out: list[Plateau] = []
    seen: dict[str, int] = {}
    for a, b in _segments(logs):
        seg = pts[a:b]
        rates = sorted(p.bytes_per_s for p in seg)
        if rates[-1] / rates[0] - 1 > PLATEAU_MAX_RANGE_REL and len(seg) > 1:
            continue
        mid = math.sqrt(seg[0].working_set_bytes * seg[-1].working_set_bytes)
        name = level_name(mid, levels)
        seen[name] = seen.get(name, 0) + 1
        name = name if seen[name] == 1 else f"{name} ({seen[name]})"
        median = rates[len(rates) // 2] if len(rates) % 2 else math.sqrt(rates[len(rates) // 2 - 1] *
                                                                         rates[len(rates) // 2])
        out.append(Plateau(name, seg[0].working_set_bytes, seg[-1].working_set_bytes, median,
                           max(p.spread_rel for p in seg), len(seg)))
    # a stretch below a later one is bound by each call's overhead, not by its cache: said in its name
    return [p if p.bytes_per_s >= max((q.bytes_per_s for q in out[i + 1:]), default=0.0)
            else Plateau(f"{p.name} (overhead-bound)", p.start_bytes, p.end_bytes, p.bytes_per_s, p.spread_rel,
                         p.n_points) for i, p in enumerate(out)]
