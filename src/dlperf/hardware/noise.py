"""What on this machine makes timings noisy, read from /proc and /sys, each with what a user can change.

The settings pyperf's `system show` reports: the CPU frequency governor, turbo/boost, address-space layout
randomisation (ASLR: each worker process gets another layout, one source of process-to-process spread),
isolated CPUs (isolcpus, nohz_full), SMT, whether this is a virtual machine (and the CPU time its hypervisor
stole); and this process's CPU affinity and cgroup CPU quota (`cpu_limits`), and perf_event_paranoid, which
decides what `perf` may count (not noise: `dlperf doctor` shows it with the profilers). Every file is read
under `root` (a recorded tree in the tests); a file that is absent or unreadable reads "unknown", never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dlperf.hardware import cpu_limits

CPU_SYS = Path("sys/devices/system/cpu")


@dataclass(frozen=True)
class NoiseItem:
    """One setting: `state` as read (or "unknown: ..."); `quiet` True where it is set for repeatable timings,
    False where it is a source of noise, None where unknown or not about noise; `hint`: what to change."""

    name: str
    state: str
    quiet: bool | None
    hint: str = ""


def _read(root: Path, rel: str | Path) -> str | None:
    """The file's text under `root`, stripped; None where it is absent or cannot be read."""
    return cpu_limits.read_file(root / rel)


def governor(root: Path) -> NoiseItem:
    """The cpufreq governor of every CPU (the set of them where they differ)."""
    found = sorted({g for p in sorted((root / CPU_SYS).glob("cpu[0-9]*/cpufreq/scaling_governor"))
                    if (g := _read(root, p.relative_to(root)))})
    if not found:
        return NoiseItem("CPU frequency governor", "unknown: no cpufreq in /sys (a VM, or the firmware sets the "
                         "clock)", None)
    driver = _read(root, CPU_SYS / "cpu0/cpufreq/scaling_driver")
    state = ", ".join(found) + (f" (driver {driver})" if driver else "")
    if found == ["performance"]:
        return NoiseItem("CPU frequency governor", state, True)
    return NoiseItem("CPU frequency governor", state, False,
                     "the clock follows the load: `sudo cpupower frequency-set -g performance` while measuring")


def boost(root: Path, one_core_speedup: float | None = None, seen_from: float = 1.03) -> NoiseItem:
    """Turbo (intel_pstate's no_turbo) or boost (cpufreq's boost, acpi-cpufreq and amd-pstate), with the clock
    probe's measured ratio of one core alone to each of all busy where it is given (`one_core_speedup`; `seen_from`
    or more: the clock rose with fewer cores busy). Where /sys says nothing (a VM), that ratio decides."""
    item = _boost_sysfs(root)
    if one_core_speedup is None:
        return item
    seen = one_core_speedup >= seen_from
    why = ("faster alone: its clock rises as fewer cores are busy (turbo), or the host shares its cores" if seen
           else "no turbo seen")
    measured = f"measured: one core alone ran the FMA loop at {one_core_speedup:.2f}x the all-core rate ({why})"
    if item.quiet is not None:
        return NoiseItem(item.name, f"{item.state}; {measured}", item.quiet, item.hint)
    if not seen:
        return NoiseItem(item.name, f"not in /sys; {measured}", True)
    return NoiseItem(item.name, f"not in /sys; {measured}", False,
                     "a case on fewer threads runs each core faster than on all of them, and how much follows the "
                     "other cores' load and temperature: turn turbo off in the firmware or the host where you can "
                     "(dlperf's roofline counts each of fewer cores at the measured rate)")


def _boost_sysfs(root: Path) -> NoiseItem:
    """Turbo or boost as /sys reads it (unknown where neither file is there)."""
    no_turbo = _read(root, CPU_SYS / "intel_pstate/no_turbo")
    if no_turbo in ("0", "1"):
        if no_turbo == "1":
            return NoiseItem("turbo / boost", "off (intel_pstate no_turbo = 1)", True)
        return NoiseItem("turbo / boost", "on (intel_pstate no_turbo = 0)", False,
                         "turbo's clock follows temperature and the other cores' load: `echo 1 | sudo tee "
                         "/sys/devices/system/cpu/intel_pstate/no_turbo` (timings then repeat, below the best)")
    flag = _read(root, CPU_SYS / "cpufreq/boost")
    if flag in ("0", "1"):
        if flag == "0":
            return NoiseItem("turbo / boost", "off (cpufreq boost = 0)", True)
        return NoiseItem("turbo / boost", "on (cpufreq boost = 1)", False,
                         "boost's clock follows temperature and the other cores' load: `echo 0 | sudo tee "
                         "/sys/devices/system/cpu/cpufreq/boost` (timings then repeat, below the best)")
    return NoiseItem("turbo / boost", "unknown: neither intel_pstate/no_turbo nor cpufreq/boost in /sys", None)


ASLR_STATES = {"0": "off", "1": "on (stack, mmap, vdso)", "2": "on (full: also the heap)"}


def aslr(root: Path) -> NoiseItem:
    """kernel.randomize_va_space: 0 off, 1 partial, 2 full."""
    value = _read(root, "proc/sys/kernel/randomize_va_space")
    if value not in ASLR_STATES:
        return NoiseItem("ASLR", "unknown: /proc/sys/kernel/randomize_va_space not readable", None)
    if value == "0":
        return NoiseItem("ASLR", "off (randomize_va_space = 0)", True)
    return NoiseItem("ASLR", f"{ASLR_STATES[value]} (randomize_va_space = {value})", False,
                     "each worker process gets another memory layout, one source of spread between processes: "
                     "`sudo sysctl -w kernel.randomize_va_space=0` while measuring (less secure: set it back to 2)")


def _cmdline_cpus(cmdline: str, key: str) -> str | None:
    """The CPU list a boot option gives (`isolcpus=domain,2-3` -> `2-3`), None where it is absent."""
    match = re.search(rf"(?:^|\s){key}=(\S+)", cmdline)
    if match is None:
        return None
    parts = [p for p in match.group(1).split(",") if p and p[0].isdigit()]
    return ",".join(parts) or match.group(1)


def isolated(root: Path) -> NoiseItem:
    """CPUs kept from the scheduler (isolcpus) and from the timer tick (nohz_full)."""
    iso = _read(root, CPU_SYS / "isolated")
    nohz = _read(root, CPU_SYS / "nohz_full")
    cmdline = _read(root, "proc/cmdline") or ""
    if iso is None:
        return NoiseItem("isolated CPUs", "unknown: /sys/devices/system/cpu/isolated not readable", None)
    nohz_text = "" if nohz in (None, "", "(null)") else f"; nohz_full {nohz}"
    rcu = _cmdline_cpus(cmdline, "rcu_nocbs")
    rcu_text = f"; rcu_nocbs {rcu}" if rcu else ""
    if iso:
        return NoiseItem("isolated CPUs", f"{iso}{nohz_text}{rcu_text}", True,
                         f"run dlperf on them: `taskset -c {iso} dlperf run ...`, with --threads at most their count")
    return NoiseItem("isolated CPUs", f"none{nohz_text}{rcu_text}", False,
                     "the scheduler puts any task beside a case: boot with `isolcpus=N-M nohz_full=N-M "
                     "rcu_nocbs=N-M`, then `taskset -c N-M dlperf run ...`")


def smt(root: Path) -> NoiseItem:
    """Simultaneous multithreading (hyper-threading): siblings share a core's units and caches."""
    control = _read(root, CPU_SYS / "smt/control")
    active = _read(root, CPU_SYS / "smt/active")
    if control == "notsupported":
        return NoiseItem("SMT", "not supported (one thread per core, as this kernel sees it)", True)
    if control in ("off", "forceoff") or (control is None and active == "0"):
        return NoiseItem("SMT", f"off (control {control or 'not readable'}, active {active or '?'})", True)
    if active == "1" or control == "on":
        return NoiseItem("SMT", f"on (control {control or 'not readable'}, active {active or '?'})", False,
                         "sibling threads share a core's units and caches: keep --threads at most the physical "
                         "cores (dlperf's default), or `echo off | sudo tee /sys/devices/system/cpu/smt/control`")
    return NoiseItem("SMT", "unknown: /sys/devices/system/cpu/smt not readable", None)


def _steal_frac(root: Path) -> float | None:
    """The CPU time the hypervisor stole since boot, as a fraction of all CPU time (/proc/stat's first line)."""
    text = _read(root, "proc/stat")
    if not text:
        return None
    fields = text.splitlines()[0].split()
    try:
        ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except ValueError:
        return None
    if fields[0] != "cpu" or len(ticks) < 8 or sum(ticks) <= 0:
        return None
    return ticks[7] / sum(ticks)


def virtualization(root: Path) -> NoiseItem:
    """A virtual machine (the CPU's `hypervisor` flag, /sys/hypervisor, the DMI vendor), and its steal time."""
    cpuinfo = _read(root, "proc/cpuinfo")
    flags = next((line.split(":", 1)[1].split() for line in (cpuinfo or "").splitlines()
                  if line.startswith(("flags", "Features")) and ":" in line), None)
    hyper = _read(root, "sys/hypervisor/type")
    vendor = " ".join(v for v in (_read(root, "sys/class/dmi/id/sys_vendor"),
                                  _read(root, "sys/class/dmi/id/product_name")) if v)
    steal = _steal_frac(root)
    steal_text = "steal not readable" if steal is None else f"{steal:.2%} of CPU time stolen since boot"
    if flags is None and hyper is None:
        return NoiseItem("virtual machine", f"unknown: no CPU flags in /proc/cpuinfo; {steal_text}", None)
    is_vm = hyper is not None or "hypervisor" in (flags or [])
    if not is_vm:
        return NoiseItem("virtual machine", f"no: bare metal ({vendor or 'vendor not readable'}); {steal_text}", True)
    how = f"hypervisor {hyper}" if hyper else "the CPU's hypervisor flag"
    return NoiseItem("virtual machine", f"yes ({how}{'; ' + vendor if vendor else ''}); {steal_text}", False,
                     "other guests on the host slow it without showing here (steal counts only the CPU taken "
                     "from this guest): compare runs interleaved or back to back, or use a dedicated host")


def perf_paranoid(root: Path) -> NoiseItem:
    """kernel.perf_event_paranoid: what `perf` may count as this user (not a source of noise)."""
    value = _read(root, "proc/sys/kernel/perf_event_paranoid")
    try:
        level = int(value) if value is not None else None
    except ValueError:
        level = None
    if level is None:
        return NoiseItem("perf_event_paranoid", "unknown: /proc/sys/kernel/perf_event_paranoid not readable", None)
    if level <= 1:
        return NoiseItem("perf_event_paranoid", f"{level}: `perf` counts user and kernel time of your processes",
                         True)
    what = "user-space time of your own processes only" if level == 2 else "nothing for a user"
    return NoiseItem("perf_event_paranoid", f"{level}: `perf` counts {what}", False,
                     "for `perf stat` of kernel time too: `sudo sysctl -w kernel.perf_event_paranoid=1`")


def cpu_share(root: Path) -> NoiseItem:
    """This process's CPU affinity and its cgroup's CPU quota (`cpu_limits`): a quota is CPU time that every
    process of the group shares, per period; threads beyond it stop until the next one."""
    name = "CPU quota and affinity"
    if _read(root, "proc/self/cgroup") is None and _read(root, "proc/self/status") is None:
        return NoiseItem(name, "unknown: /proc/self/cgroup and /proc/self/status not readable", None)
    limits = cpu_limits.read_limits(root)
    state = cpu_limits.describe(limits, cpu_limits.online_cpus(root) or 0)
    if limits.quota_cpus is None:
        return NoiseItem(name, state, True)
    return NoiseItem(name, state, False,
                     "every process of this cgroup shares that CPU time per period, and threads beyond it stop "
                     "until the next period (dlperf's default threads stay within its whole CPUs; --threads above "
                     "them stalls): where you can, give the container whole CPUs with a cpuset (`docker "
                     "--cpuset-cpus 0-3`) instead of a quota (`--cpus`)")


def read_noise(root: Path = Path("/"), one_core_speedup: float | None = None,
               seen_from: float = 1.03) -> list[NoiseItem]:
    """Every setting, in the order `dlperf doctor` shows them (`one_core_speedup`: `boost`'s measured ratio)."""
    return [governor(root), boost(root, one_core_speedup, seen_from), aslr(root), isolated(root), smt(root),
            cpu_share(root), virtualization(root)]


__all__ = ["NoiseItem", "perf_paranoid", "read_noise"]
