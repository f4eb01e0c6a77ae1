"""What the machine was doing while a case ran: other processes' CPU use, steal, load, runnable tasks.

A timer cannot tell a slow operation from a descheduled one: with another process on the cores, an
OpenMP element-wise op sat on an ~8 ms plateau with an IQR under 2%. The kernel can tell: /proc/stat
counts every core's busy and stolen time, /proc/self/stat this process's own, so the difference is
the CPU that *other* processes used over the same window. Linux only; elsewhere every figure is None
with the reason stored.

Figures are in cores (CPU-seconds per wall second): `others_cores` = 1.0 means another process kept
one whole core busy. The kernel counts in ticks (USER_HZ, 100 per second), so a window of 0.1 s on
2 cores resolves about 0.05 cores.

Only the CPUs this process may run on are counted (its affinity: `taskset`, a container's or a CI
runner's cpuset on a larger host; a CPU quota leaves every CPU in it), from /proc/stat's per-CPU lines.
A host's other tenants on CPUs the case cannot use do not take its cores (they may still share its
caches and memory bandwidth, which the run's canary sees): counting them, as the machine-wide line
does, would call every case in a 2-CPU cpuset of a busy 64-CPU host `contended`. The core count the
figures are out of is then the affinity's, not the host's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from dlperf.core.validity import Activity, ActivityWindow, OtherProcess  # the shapes the records have

#: Clock ticks per second of /proc/stat and /proc/PID/stat.
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: How many other processes the record names (the heaviest CPU users over the window).
TOP_OTHERS = 3
#: Own CPU time over this share of the watched CPUs' time (plus two ticks): the watched set left out CPUs the
#: case ran on, and a window counts the machine's.
OWN_OVER_WATCHED = 1.05


class IdleWait(TypedDict):
    """What `wait_idle` did: seconds waited, whether the machine became quiet, the last reading."""

    waited_s: float
    quiet: bool | None
    others_cores: float | None
    top_others: NotRequired[list[OtherProcess]]
    max_wait_s: float
    error: NotRequired[str]


@dataclass(frozen=True)
class Snapshot:
    """Counters read at one instant: busy/steal/total ticks of the watched CPUs, this process's ticks; `machine`:
    the machine-wide (busy, steal, total) where the watched CPUs are fewer (`window` falls back to it)."""

    wall_s: float
    busy_ticks: int
    steal_ticks: int
    total_ticks: int
    own_ticks: int
    procs_running: int | None
    load1: float | None
    machine: tuple[int, int, int] | None = None


def _own_ticks(pids: tuple[int, ...], with_children: bool = False) -> int:
    """utime + stime of these processes (all their threads), in ticks; 0 for one that is gone. With
    `with_children`, also the CPU of their children that have ended and been waited for (cutime + cstime: a
    launcher's job, e.g. torchrun's ranks, once the launcher is reaped)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
            if with_children:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime (fields 16, 17)
        except (OSError, ValueError, IndexError):
            continue
    return total


def _affinity_now() -> frozenset[int] | None:
    """This thread's CPU affinity now, or None where it is not readable."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


#: The CPUs this process could run on when this module was first imported: in a case's worker that is before its
#: framework, whose OpenMP runtime may then bind each thread, this one included, to one CPU (`OMP_PROC_BIND`,
#: `OMP_PLACES`), after which `sched_getaffinity` reads that thread's one CPU, not the process's.
_PROCESS_CPUS = _affinity_now()


def watched_cpus() -> frozenset[int] | None:
    """The logical CPUs this process may run on (its affinity as this module was imported), or None where that
    is not readable."""
    return _PROCESS_CPUS


def cpu_ticks(stat_text: str, cpus: frozenset[int] | None) -> tuple[int, int, int] | None:
    """(busy, steal, total) ticks from /proc/stat's text: summed over the per-CPU lines of `cpus` where they are a
    proper subset of the CPUs listed, else the machine-wide line (`cpus` None or all of them: the same sum; CPUs it
    does not list, as where lxcfs renumbers a container's: the machine's). None where the text has no readable cpu
    line."""
    per_cpu: dict[int, list[int]] = {}
    total_line: list[int] | None = None
    for line in stat_text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *fields = line.split()
        try:
            vals = ([int(x) for x in fields[:8]] + [0] * 8)[:8]  # user nice system idle iowait irq softirq steal
        except ValueError:
            continue
        if name == "cpu":
            total_line = vals
        elif name[3:].isdigit():
            per_cpu[int(name[3:])] = vals
    if cpus is not None and per_cpu and cpus < frozenset(per_cpu):
        rows = [per_cpu[c] for c in sorted(cpus)]
    elif total_line is not None:
        rows = [total_line]
    else:
        return None
    busy = steal = total = 0
    for user, nice, system, idle, iowait, irq, softirq, stolen in rows:
        busy += user + nice + system + irq + softirq
        steal += stolen
        total += user + nice + system + idle + iowait + irq + softirq + stolen
    return busy, steal, total


def snapshot(own_pids: tuple[int, ...] | None = None, with_children: bool = False) -> Snapshot | None:
    """The counters now, over the CPUs this process may run on (`cpu_ticks`), or None where /proc/stat
    cannot be read (not Linux). `with_children`: the own processes' waited-for children count as their own
    (`_own_ticks`)."""
    pids = own_pids if own_pids is not None else (os.getpid(),)
    try:
        text = Path("/proc/stat").read_text()
    except OSError:
        return None
    ticks = cpu_ticks(text, watched_cpus())
    if ticks is None:
        return None
    busy, steal, total = ticks
    machine = cpu_ticks(text, None)
    lines = text.splitlines()
    running = next((int(line.split()[1]) for line in lines if line.startswith("procs_running")), None)
    try:
        load1: float | None = float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        load1 = None
    return Snapshot(
        wall_s=time.perf_counter(),
        busy_ticks=busy,
        steal_ticks=steal,
        total_ticks=total,
        own_ticks=_own_ticks(pids, with_children),
        procs_running=running,
        load1=load1,
        machine=machine if machine != ticks else None,
    )


def _cpu_times(exclude: set[int]) -> dict[int, tuple[str, float]]:
    """(name, user+system CPU seconds) of every other process psutil can read; where this process may run on
    fewer CPUs than the machine has, only of those that may run on one of them, and a name marked "(on any CPU)"
    where its CPU time may have been spent on others too."""
    import psutil

    ours = watched_cpus()
    subset = ours is not None and len(ours) < (os.cpu_count() or 0)
    out: dict[int, tuple[str, float]] = {}
    for proc in psutil.process_iter(["name", "cpu_times", "cpu_affinity"] if subset else ["name", "cpu_times"]):
        if proc.pid in exclude or proc.info.get("cpu_times") is None:
            continue
        name = str(proc.info.get("name") or "?")
        theirs = proc.info.get("cpu_affinity")
        if subset and ours is not None and theirs is not None:
            if ours.isdisjoint(theirs):
                continue
            if not ours.issuperset(theirs):
                name += " (on any CPU)"
        t = proc.info["cpu_times"]
        out[proc.pid] = (name, float(t.user + t.system))
    return out


def window(a: Snapshot | None, b: Snapshot | None) -> ActivityWindow:
    """Activity between two snapshots: others' busy cores, steal fraction, this process's cores."""
    if a is None or b is None:
        return {"error": "/proc/stat is not readable here: machine activity not recorded"}
    wall = b.wall_s - a.wall_s
    total = b.total_ticks - a.total_ticks
    if wall <= 0 or total <= 0:
        return {"wall_s": max(wall, 0.0), "error": "window too short to read the kernel's counters"}
    busy_t, steal_t = b.busy_ticks - a.busy_ticks, b.steal_ticks - a.steal_ticks
    own = (b.own_ticks - a.own_ticks) / _TICKS_PER_S
    scope = None
    if a.machine and b.machine and own > (total / _TICKS_PER_S) * OWN_OVER_WATCHED + 2 / _TICKS_PER_S:
        # the own threads ran on CPUs the watched ones leave out (a set read after something narrowed this
        # thread's affinity): only the machine-wide line holds their CPU, and so others' beside it
        busy_t, steal_t, total = (b.machine[0] - a.machine[0], b.machine[1] - a.machine[1],
                                  b.machine[2] - a.machine[2])
        scope = "machine: the case's own CPU time exceeded its watched CPUs', so every CPU is counted"
    busy = busy_t / _TICKS_PER_S
    rec: ActivityWindow = {
        "wall_s": wall,
        "others_cores": max(0.0, busy - own) / wall,
        "own_cores": own / wall,
        "steal_frac": steal_t / total if total > 0 else 0.0,
        "procs_running": b.procs_running,
        "load1": b.load1,
    }
    if scope:
        rec["scope"] = scope
    return rec


class Monitor:
    """Records activity over named windows (e.g. before, during, after a case) and the top other processes.

    `own_pids` are the processes whose CPU is the case's own (the worker; the sweep's parent when it
    waits); everything else is "others". `with_children`: the CPU of their children counts as their own once
    they have ended and been waited for (a case that runs its work in child processes, e.g. a torchrun job,
    measured over a window in which those children start and end).
    """

    def __init__(self, own_pids: tuple[int, ...] | None = None, *, with_children: bool = False) -> None:
        self.own_pids = own_pids if own_pids is not None else (os.getpid(),)
        self.with_children = with_children
        self.windows: dict[str, ActivityWindow] = {}
        self._open: dict[str, tuple[Snapshot | None, dict[int, tuple[str, float]] | None]] = {}

    def start(self, name: str, *, top: bool = False) -> None:
        procs = _safe_cpu_times(set(self.own_pids)) if top else None
        self._open[name] = (snapshot(self.own_pids, self.with_children), procs)

    def stop(self, name: str) -> ActivityWindow:
        first, procs = self._open.pop(name)
        last = snapshot(self.own_pids, self.with_children)
        rec = window(first, last)
        if procs is not None and "error" not in rec:
            rec["top_others"] = _top(procs, _safe_cpu_times(set(self.own_pids)), rec["wall_s"])
        self.windows[name] = rec
        return rec

    def idle_window(self, name: str, seconds: float) -> ActivityWindow:
        """A window of `seconds` in which this process does nothing (what others do meanwhile)."""
        self.start(name, top=True)
        time.sleep(seconds)
        return self.stop(name)

    def record(self) -> Activity:
        """Every window so far, plus the core count others_cores is out of: the CPUs this process may run on
        (`cpus` lists them where they are fewer than the machine's), else the machine's (also where a window fell
        back to the machine-wide line: its `scope`)."""
        cpus = watched_cpus()
        whole = not cpus or any("scope" in w for w in self.windows.values())
        rec: Activity = {"cores": os.cpu_count() if whole else len(cpus or ()), "windows": dict(self.windows)}
        if not whole and cpus and len(cpus) < (os.cpu_count() or 0):
            rec["cpus"] = sorted(cpus)
        return rec


def _safe_cpu_times(exclude: set[int]) -> dict[int, tuple[str, float]] | None:
    try:
        return _cpu_times(exclude)
    except Exception:  # psutil missing or /proc racing: the machine-wide figures still stand
        return None


def _top(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]] | None,
         wall_s: float) -> list[OtherProcess]:
    """The heaviest other processes over the window, by CPU cores used."""
    if after is None or wall_s <= 0:
        return []
    used: list[OtherProcess] = []
    for pid, (name, cpu_s) in after.items():
        if pid in before:
            cores = (cpu_s - before[pid][1]) / wall_s
            if cores >= 0.05:
                used.append({"pid": pid, "name": name, "cores": round(cores, 2)})
    return sorted(used, key=lambda d: -d["cores"])[:TOP_OTHERS]


def busy_cores_now(seconds: float = 0.3) -> float | None:
    """Cores other processes keep busy, over `seconds` from now (None where not readable)."""
    rec = Monitor().idle_window("probe", seconds)
    return rec.get("others_cores")


def wait_idle(max_wait_s: float, *, quiet_cores: float = 0.25, step_s: float = 0.5) -> IdleWait:
    """Wait until other processes use under `quiet_cores` cores (over `step_s`), for at most `max_wait_s`.

    Returns what happened: seconds waited, whether the machine became quiet, the last reading.
    """
    t0 = time.perf_counter()
    while True:
        rec = Monitor().idle_window("wait", step_s)
        others = rec.get("others_cores")
        waited = time.perf_counter() - t0
        if others is None or others < quiet_cores:  # quiet None: not known (no /proc here), never "busy"
            out: IdleWait = {"waited_s": round(waited, 2), "quiet": True if others is not None else None,
                             "others_cores": others, "max_wait_s": max_wait_s}
            if "error" in rec:
                out["error"] = rec["error"]
            return out
        if waited >= max_wait_s:
            return {"waited_s": round(waited, 2), "quiet": False, "others_cores": others,
                    "top_others": rec.get("top_others", []), "max_wait_s": max_wait_s}
