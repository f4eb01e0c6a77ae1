"""A case's validity (valid, noisy, contended, invalid) and the reason, from its samples and the machine's activity.

Decided from raw data only: the measurement's per-sample wall and CPU times, and the activity windows
that `dlperf.meters.activity` recorded before, during and after the case. The worker decides it when the
case ends and `CaseResult.from_row` decides it again on load, so a changed rule re-judges old results.

Why these signals: on a shared machine the IQR does not reveal contention (an OpenMP op waiting for a
descheduled sibling sat on an 8 ms plateau with an IQR under 2%). What does: other processes' CPU use
over the case's own window, CPU stolen by the hypervisor, and samples in which this process got much
less CPU per wall second than in its other samples (descheduled).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from dlperf.core.status import Validity
from dlperf.timing.measurement import NOISE_IQR_REL, Measurement
from dlperf.timing.stats import quantile
from dlperf.units import format_time


class OtherProcess(TypedDict):
    """One of the heaviest other processes over a window: its pid, name and the cores it used."""

    pid: int
    name: str
    cores: float


class ActivityWindow(TypedDict, total=False):
    """The machine over one named window around a case (`meters.activity.window`): its length (s), the cores
    other processes and this one used, the hypervisor's steal fraction, the run queue and load; the heaviest
    other processes where asked for; only `error` (and maybe `wall_s`) where the kernel's counters were not
    readable."""

    wall_s: float
    others_cores: float
    own_cores: float
    steal_frac: float
    procs_running: int | None
    load1: float | None
    top_others: list[OtherProcess]
    scope: str
    error: str


class IdleWait(TypedDict, total=False):
    """A wait for a quiet machine before a case (`meters.activity.wait_idle`): seconds waited, whether it became
    quiet (None: not known), the last reading of others' cores, the longest wait allowed, and the heaviest
    others where it stayed busy (or why nothing was readable)."""

    waited_s: float
    quiet: bool | None
    others_cores: float | None
    max_wait_s: float
    top_others: list[OtherProcess]
    error: str


class Activity(TypedDict, total=False):
    """What the machine was doing around a case (`meters.activity.Monitor.record`, stored as
    `metrics["activity"]`): the cores its figures are out of (the CPUs the case may run on), those CPUs where
    they are fewer than the machine's, and each named window ("before", "during", "after"); with `--wait-idle`,
    the wait before it."""

    cores: int | None
    cpus: list[int]
    windows: dict[str, ActivityWindow]
    wait: IdleWait

#: Other processes using this many cores while the case ran make it `contended`, whatever its threads.
OTHERS_CONTENDED_CORES = 0.5
#: ... and this many, when they and the case's threads together ask for more cores than the machine has.
OTHERS_OVERSUBSCRIBED_CORES = 0.25
#: Stolen CPU time (hypervisor) above this fraction of the window makes it `contended`.
STEAL_CONTENDED_FRAC = 0.05
#: A sample is "descheduled" when it is this much slower than the fastest quarter of the samples ...
DESCHEDULED_SLOWER = 1.5
#: ... and got under this fraction of their CPU per wall second (the median over the fastest quarter);
DESCHEDULED_REL = 0.6
#: ... and this fraction of such samples makes the case `contended`.
DESCHEDULED_FRAC = 0.2
#: Fewer samples than this cannot give a median worth storing: `invalid`.
MIN_VALID_SAMPLES = 3
#: The timer's own cost above this fraction of a sample makes the case `invalid`.
MAX_OVERHEAD_FRAC = 0.01
#: Around the case (before/after) others using this many cores are noted in the reason.
NOTE_OTHERS_CORES = 0.5


def cpu_ratios(m: Measurement) -> list[float] | None:
    """CPU seconds per wall second of each sample (None where CPU time was not recorded)."""
    if m.sample_cpu_s is None:
        return None
    return [c / w for c, w in zip(m.sample_cpu_s, m.sample_times_s, strict=True) if w > 0]


def descheduled_fraction(m: Measurement) -> float | None:
    """The fraction of samples that were both slow and starved of CPU: descheduled, not just slow.

    CPU per wall second alone is no sign: OpenMP threads spin or sleep between calls, so a quiet
    multi-threaded op's ratio varies from sample to sample. A descheduled sample is slower than the
    fastest quarter *and* got much less CPU per second than they did. None without CPU times.
    """
    ratios = cpu_ratios(m)
    if ratios is None or len(ratios) < MIN_VALID_SAMPLES or len(ratios) != m.n_samples:
        return None
    times = m.times_s
    order = sorted(range(len(times)), key=lambda i: times[i])
    fastest = order[: max(1, len(order) // 4)]
    ref_time = quantile(sorted(times[i] for i in fastest), 0.5)
    ref_cpu = quantile(sorted(ratios[i] for i in fastest), 0.5)
    if ref_time <= 0 or ref_cpu <= 0:
        return None
    slow_starved = sum(t > DESCHEDULED_SLOWER * ref_time and r < DESCHEDULED_REL * ref_cpu
                       for t, r in zip(times, ratios, strict=True))
    return slow_starved / len(times)


def _others(rec: ActivityWindow) -> str:
    top = rec.get("top_others") or []
    named = ", ".join(f"{p['name']} pid {p['pid']}: {p['cores']:.1f}" for p in top)
    return f" ({named})" if named else ""


def assess(m: Measurement | None, activity: Activity | None, *, threads: int | None, device: str,
           shape: Sequence[str] | None = None) -> tuple[Validity, str | None]:
    """(validity, reason) of a case: invalid > contended > noisy > valid; every finding is in the reason.

    `shape`: the sample-shape findings (bimodal, drifting); None takes the measurement's own
    (`Measurement.shape_flags`, from `dlperf.timing.shape`).
    """
    invalid: list[str] = []
    noisy: list[str] = []
    if m is None or m.n_samples == 0:
        return "invalid", "no samples"
    if m.n_samples < MIN_VALID_SAMPLES:
        invalid.append(f"only {m.n_samples} samples")
    if any(t <= 0 for t in m.sample_times_s):
        invalid.append("a sample took no time: the clock is too coarse or the work was skipped")
    sample_s = m.median_s * m.block_size
    if sample_s > 0 and m.timer_overhead_s > MAX_OVERHEAD_FRAC * sample_s:
        invalid.append(f"timer overhead {format_time(m.timer_overhead_s)} is over "
                       f"{MAX_OVERHEAD_FRAC:.0%} of a {format_time(sample_s)} sample")

    util = m.cpu_util if device == "cpu" else None
    if threads is not None and util is not None:
        # The cores the case kept busy: its threads, or fewer where its CPU time says so (NumPy's ufuncs
        # run on one thread whatever the setting); a few kernel workers then do not tip it over.
        threads = max(1, min(threads, round(util)))
    contended, notes = _machine_findings(activity, threads)
    low = descheduled_fraction(m) if device == "cpu" else None
    if low is not None and low >= DESCHEDULED_FRAC:
        contended.append(f"{low:.0%} of samples were over {DESCHEDULED_SLOWER:g}x slower than the fastest quarter "
                         f"with under {DESCHEDULED_REL:.0%} of their CPU time per second (descheduled)")

    if m.n_samples > 1 and m.iqr_rel > NOISE_IQR_REL:
        noisy.append(f"IQR {m.iqr_rel:.0%} of the median")
    noisy.extend(m.shape_flags if shape is None else shape)

    for validity, found in (("invalid", invalid), ("contended", contended), ("noisy", noisy)):
        if found:
            rest = [x for group in (invalid, contended, noisy, notes) if group is not found for x in group]
            return validity, "; ".join(found + rest)  # type: ignore[return-value]
    return "valid", "; ".join(notes) or None


def _machine_findings(activity: Activity | None, threads: int | None) -> tuple[list[str], list[str]]:
    """(contention findings, notes) from the machine's activity around a case that kept `threads` cores busy."""
    contended: list[str] = []
    notes: list[str] = []
    windows = (activity or {}).get("windows") or {}
    cores = (activity or {}).get("cores")
    during = windows.get("during") or {}
    others = during.get("others_cores")
    if others is not None:
        over = threads is not None and cores is not None and threads + others > cores
        if others >= OTHERS_CONTENDED_CORES or (over and others >= OTHERS_OVERSUBSCRIBED_CORES):
            own = f", with {threads} thread{'s' if threads != 1 else ''} of its own on {cores} cores" if over else ""
            contended.append(f"other processes used {others:.2f} cores while it ran{_others(during)}{own}")
    steal = during.get("steal_frac")
    if steal is not None and steal >= STEAL_CONTENDED_FRAC:
        contended.append(f"the hypervisor stole {steal:.0%} of CPU time while it ran")
    for name in ("before", "after"):
        busy = (windows.get(name) or {}).get("others_cores")
        if busy is not None and busy >= NOTE_OTHERS_CORES:
            notes.append(f"other processes used {busy:.2f} cores {name} it{_others(windows[name])}")
    wait = (activity or {}).get("wait")
    if wait and wait.get("quiet") is False:
        notes.append(f"waited {wait.get('waited_s')} s for a quiet machine; it stayed busy")
    return contended, notes


def assess_activity(activity: Activity | None, *, threads: int | None,
                    device: str) -> tuple[Validity, str | None]:
    """(validity, reason) of a case that measured itself (serving under LoadGen: no timer samples, so the
    sample rules do not apply): `contended` when the machine was busy while it ran (as `assess` judges it),
    else `valid`; "no activity record" is said where there is none. LoadGen's own verdict is stored apart.

    As `assess` does with the samples' CPU use, `threads` shrinks to the cores the case kept busy, here its own
    CPU over the during window (`own_cores`): a serving case that slept between queries is not oversubscribed
    by a quarter core of other load."""
    if not activity:
        return "valid", "no activity record: the machine's load while it ran is unknown"
    own = ((activity.get("windows") or {}).get("during") or {}).get("own_cores")
    if threads is not None and device == "cpu" and isinstance(own, int | float):
        threads = max(1, min(threads, round(own)))
    contended, notes = _machine_findings(activity, threads)
    if contended:
        return "contended", "; ".join(contended + notes)
    return "valid", "; ".join(notes) or None


def short_reason(reason: str | None, limit: int = 90) -> str:
    """The first finding of a validity reason, cut to `limit` characters (the whole is in `export`)."""
    first = (reason or "").split("; ")[0].split(" (")[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def validity_words(validity: str | None, reason: str | None) -> str:
    """A case's validity and its first finding, as the run's progress line prints them and every report that
    declines to judge the case repeats them ("contended: other processes used 1.0 cores"): one source, so the
    two never disagree."""
    first = short_reason(reason)
    return f"{validity}: {first}" if first else str(validity)
