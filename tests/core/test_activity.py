"""Machine activity: the arithmetic of a window, real readings of this machine's counters, the bounded wait."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dlperf.meters import activity
from dlperf.meters.activity import Monitor, Snapshot, wait_idle, window

TICKS = activity._TICKS_PER_S


def _snap(wall: float, busy: int, steal: int, total: int, own: int) -> Snapshot:
    return Snapshot(wall_s=wall, busy_ticks=busy, steal_ticks=steal, total_ticks=total, own_ticks=own,
                    procs_running=3, load1=1.5)


def test_window_takes_this_process_out_of_the_machine_busy_time() -> None:
    a = _snap(10.0, 0, 0, 0, 0)
    # 2 s on 2 cores: 4 s of CPU in all, 3 s busy of which 1 s is ours; 0.2 s stolen.
    b = _snap(12.0, 3 * TICKS, int(0.2 * TICKS), 4 * TICKS, 1 * TICKS)
    rec = window(a, b)
    assert rec["others_cores"] == pytest.approx(1.0)
    assert rec["own_cores"] == pytest.approx(0.5)
    assert rec["steal_frac"] == pytest.approx(0.05)
    assert rec["procs_running"] == 3 and rec["load1"] == 1.5


def test_own_time_beyond_the_watched_cpus_falls_back_to_the_machine() -> None:
    """The watched set is 1 CPU, yet the case's own threads used 1.5 cores (something narrowed the affinity this
    process read, e.g. an OpenMP runtime binding threads): only the machine-wide line holds their CPU, so the
    window counts it, and says so, rather than 0 cores of others from a CPU the case overran."""
    a = Snapshot(wall_s=10.0, busy_ticks=0, steal_ticks=0, total_ticks=0, own_ticks=0, procs_running=3, load1=1.0,
                 machine=(0, 0, 0))
    # 2 s: the one watched CPU fully busy (200 ticks), the machine's 2 CPUs 350 of 400 ticks busy, 300 of them ours
    b = Snapshot(wall_s=12.0, busy_ticks=2 * TICKS, steal_ticks=0, total_ticks=2 * TICKS, own_ticks=3 * TICKS,
                 procs_running=3, load1=1.0, machine=(int(3.5 * TICKS), int(0.2 * TICKS), 4 * TICKS))
    rec = window(a, b)
    assert rec["others_cores"] == pytest.approx(0.25) and rec["own_cores"] == pytest.approx(1.5)
    assert rec["steal_frac"] == pytest.approx(0.05) and rec["scope"].startswith("machine")
    within = Snapshot(wall_s=12.0, busy_ticks=2 * TICKS, steal_ticks=0, total_ticks=2 * TICKS, own_ticks=1 * TICKS,
                      procs_running=3, load1=1.0, machine=(int(3.5 * TICKS), 0, 4 * TICKS))
    kept = window(a, within)  # within its CPUs: those alone, as the case's contention is
    assert kept["others_cores"] == pytest.approx(0.5) and "scope" not in kept


def test_unreadable_counters_give_a_reason_not_a_number() -> None:
    assert "error" in window(None, None)
    assert "error" in window(_snap(1.0, 0, 0, 0, 0), _snap(1.0, 0, 0, 0, 0))


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc only")
def test_a_busy_child_shows_as_other_cores_and_is_named() -> None:
    """The hog is named among the top others unless TOP_OTHERS processes each used at least as much CPU as it did
    in the window: on a busy machine (other test processes, other tenants' multi-threaded work) a one-thread
    busy loop gets one fair share and can rank fourth; the list is then full of heavier processes, which this
    checks with the hog's CPU time read inside the monitor's window (so at most what the monitor saw of it)."""
    import psutil

    hog = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<20: pass"])
    try:
        time.sleep(0.3)
        mon = Monitor()
        mon.start("probe", top=True)
        hog_cpu = psutil.Process(hog.pid).cpu_times()
        time.sleep(0.6)
        hog_cpu_after = psutil.Process(hog.pid).cpu_times()
        rec = mon.stop("probe")
    finally:
        hog.kill()
        hog.wait()
    assert rec["others_cores"] >= 0.5, rec
    hog_at_least = (hog_cpu_after.user + hog_cpu_after.system - hog_cpu.user - hog_cpu.system) / rec["wall_s"]
    listed = {p["pid"]: p["cores"] for p in rec["top_others"]}
    assert hog.pid in listed or (len(listed) == activity.TOP_OTHERS
                                 and min(listed.values()) >= hog_at_least - 0.01), (hog_at_least, rec)
    assert mon.record()["windows"]["probe"] is rec and mon.record()["cores"] == len(os.sched_getaffinity(0))


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc only")
def test_wait_idle_is_bounded_and_says_what_it_saw() -> None:
    hog = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<20: pass"])
    try:
        time.sleep(0.3)
        t0 = time.perf_counter()
        rec = wait_idle(1.0, step_s=0.3)
        spent = time.perf_counter() - t0
    finally:
        hog.kill()
        hog.wait()
    assert rec["quiet"] is False and rec["others_cores"] >= 0.25
    assert spent < 1.0 + 2 * 0.3 + 0.5  # the bound, plus at most one window and slack


#: /proc/stat of a 4-CPU machine (recorded shape; figures chosen so that each line sums differently).
STAT_4_CPUS = """cpu  1000 10 300 8000 50 5 15 20 0 0
cpu0 400 0 100 1500 10 1 4 5 0 0
cpu1 300 5 100 1600 10 1 3 5 0 0
cpu2 200 5 50 2400 20 2 4 5 0 0
cpu3 100 0 50 2500 10 1 4 5 0 0
intr 12345
procs_running 2
"""


def test_cpu_ticks_count_only_the_cpus_the_process_may_run_on() -> None:
    """A cpuset of 2 of 4 CPUs sums those CPUs' lines; all of them (or an unknown affinity) reads the
    machine-wide line, which is the same sum; a CPU /proc/stat does not list falls back to the machine's."""
    # cpu2 + cpu3: busy = user+nice+system+irq+softirq, total adds idle, iowait and steal.
    busy_23 = (200 + 5 + 50 + 2 + 4) + (100 + 0 + 50 + 1 + 4)
    total_23 = busy_23 + (2400 + 20 + 5) + (2500 + 10 + 5)
    assert activity.cpu_ticks(STAT_4_CPUS, frozenset({2, 3})) == (busy_23, 10, total_23)
    machine = (1000 + 10 + 300 + 5 + 15, 20, 1000 + 10 + 300 + 8000 + 50 + 5 + 15 + 20)
    assert activity.cpu_ticks(STAT_4_CPUS, frozenset({0, 1, 2, 3})) == machine
    assert activity.cpu_ticks(STAT_4_CPUS, None) == machine
    assert activity.cpu_ticks(STAT_4_CPUS, frozenset({2, 7})) == machine
    assert activity.cpu_ticks("intr 1\n", frozenset({0})) is None


ONE_CPU_WINDOW = """
import json, os, time
cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})  # as `taskset -c N` starts it: before dlperf is imported
from dlperf.meters.activity import Monitor, snapshot
mon = Monitor()
a = snapshot()
mon.start("w")
time.sleep(0.5)
mon.stop("w")
b = snapshot()
print(json.dumps({"cpu": cpu, "record": mon.record(),
                  "cpus_per_s": (b.total_ticks - a.total_ticks) / %d / (b.wall_s - a.wall_s)}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/stat") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux /proc and at least 2 CPUs to restrict a process to one")
def test_a_process_pinned_to_one_cpu_watches_that_cpu_alone() -> None:
    """Restricted to one CPU (as `taskset -c N` or a cpuset would), the counters cover that CPU alone: its
    ticks advance at one CPU per wall second (two or more for the machine-wide line), the record's core count
    is 1 and names the CPU, and others' cores cannot exceed that one CPU, however busy the rest is."""
    import json

    out = subprocess.run([sys.executable, "-c", ONE_CPU_WINDOW % TICKS], capture_output=True, text=True,
                         check=True, timeout=60)
    got = json.loads(out.stdout)
    assert 0.8 <= got["cpus_per_s"] <= 1.2, got
    assert got["record"]["cores"] == 1 and got["record"]["cpus"] == [got["cpu"]], got
    assert got["record"]["windows"]["w"]["others_cores"] <= 1.1, got
