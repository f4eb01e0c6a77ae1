"""The CPUs this process may use, which can be fewer than the machine's: its CPU affinity (taskset, a
container's cpuset) and its cgroup's CPU quota (`docker --cpus`, a Kubernetes CPU limit, a CI runner's share).

A quota is CPU time per period, not CPUs: a process with more busy threads than the quota allows runs them all,
then all of them stop until the next period. Threads that wait on each other (an OpenMP team at its barrier,
oneDNN's and PyTorch's intra-op pools) then stall for the rest of each period, and their spin-waits burn the
quota. Seen here, in a cgroup capped at 1.07 CPUs on the 2-core VM: `dlperf run smoke --quick --framework
torch` with 2 threads measured the 12 MB add and the 3 MB dot with an IQR of 110-317% of the median, against
3-13% with 1 thread. So a run's default thread count is at most the whole CPUs the quota allows
(`usable_cores`), as Go's automaxprocs and the JVM's container support size their pools, and `dlperf doctor`
and the run's thread line say which limit applied.

The quota is read from the cgroup files of this process (`/proc/self/cgroup`, under the cgroup mounts that
`/proc/self/mountinfo` lists): cgroup v2's `cpu.max` ("max PERIOD" or "QUOTA PERIOD") and v1's
`cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1: none), at the process's own group and every parent up to the
mount (a parent's quota binds its children): the smallest one applies. Every file is read under `root` (a
recorded tree in the tests); a file that is absent or unreadable is no limit known, never a guess.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class CpuLimits:
    """`allowed_cpus`: logical CPUs in this process's affinity (None: not readable); `quota_cpus`: the smallest
    cgroup CPU quota over this process's groups, in CPUs (None: no quota, or none readable); `quota_file`: the
    file it was read from."""

    allowed_cpus: int | None = None
    quota_cpus: float | None = None
    quota_file: str | None = None


def read_file(path: Path) -> str | None:
    """The file's text, stripped; None where it is absent or cannot be read (a /proc or /sys file)."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _mounts(root: Path) -> list[tuple[str, str, str, set[str]]]:
    """The cgroup mounts of /proc/self/mountinfo: (fstype, the mount's root in the hierarchy, its mount point,
    its super options)."""
    out = []
    for line in (read_file(root / "proc/self/mountinfo") or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((tail[0], fields[3], fields[4], set(tail[2].split(","))))
    return out


def _groups(root: Path) -> tuple[str | None, str | None]:
    """(the v1 path of the group holding the `cpu` controller, the v2 path) of /proc/self/cgroup."""
    v1 = v2 = None
    for line in (read_file(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v1, v2


def _folders(root: Path, mount_root: str, mount_point: str, group: str) -> list[Path]:
    """The group's folder and its parents' under the mount, innermost first ([] where the group is not in
    this mount: another namespace's)."""
    try:
        rel = PurePosixPath(group).relative_to(PurePosixPath(mount_root))
    except ValueError:
        return []
    base = root / mount_point.lstrip("/")
    parts = [p for p in rel.parts if p not in ("/", ".")]
    return [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _v2_quota(folder: Path) -> tuple[float, str] | None:
    text = read_file(folder / "cpu.max")
    if not text:
        return None
    fields = text.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return (quota / period, str(folder / "cpu.max")) if quota > 0 and period > 0 else None


def _v1_quota(folder: Path) -> tuple[float, str] | None:
    quota_text, period_text = read_file(folder / "cpu.cfs_quota_us"), read_file(folder / "cpu.cfs_period_us")
    try:
        quota, period = int(quota_text or ""), int(period_text or "")
    except ValueError:
        return None
    return (quota / period, str(folder / "cpu.cfs_quota_us")) if quota > 0 and period > 0 else None


def quota(root: Path = Path("/")) -> tuple[float, str] | None:
    """(CPUs, file) of the smallest cgroup CPU quota over this process's groups; None where none is set."""
    v1, v2 = _groups(root)
    found: list[tuple[float, str]] = []
    for fstype, mount_root, mount_point, options in _mounts(root):
        if fstype == "cgroup2" and v2 is not None:
            folders, read = _folders(root, mount_root, mount_point, v2), _v2_quota
        elif fstype == "cgroup" and v1 is not None and "cpu" in options:
            folders, read = _folders(root, mount_root, mount_point, v1), _v1_quota
        else:
            continue
        found += [q for q in map(read, folders) if q is not None]
    return min(found, default=None)


def parse_cpu_list(text: str) -> frozenset[int]:
    """A kernel CPU list as its CPUs: '0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}; ValueError where it is not one."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def cpu_list_count(text: str) -> int | None:
    """How many CPUs a kernel CPU list names ("0-3,8,10-11": 7); None where it is not one, or names none."""
    try:
        return len(parse_cpu_list(text)) or None
    except ValueError:
        return None


def allowed_cpus(root: Path = Path("/")) -> int | None:
    """Logical CPUs in this process's affinity (`Cpus_allowed_list` of /proc/self/status, else the OS's
    answer where `root` is this machine's); None where neither says."""
    for line in (read_file(root / "proc/self/status") or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return cpu_list_count(line.split(":", 1)[1])
    if root != Path("/"):
        return None
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def online_cpus(root: Path = Path("/")) -> int | None:
    """Logical CPUs online on the machine (/sys/devices/system/cpu/online)."""
    text = read_file(root / "sys/devices/system/cpu/online")
    return cpu_list_count(text) if text else None


def read_limits(root: Path = Path("/")) -> CpuLimits:
    """This process's affinity and quota, read under `root`."""
    q = quota(root)
    return CpuLimits(allowed_cpus(root), q[0] if q else None, q[1] if q else None)


def usable_cores(physical: int, logical: int, limits: CpuLimits) -> int:
    """The threads a run should use by default: the physical cores, fewer where the affinity allows fewer
    (counted as physical cores at the machine's threads per core), and at most the whole CPUs of the quota
    (at least one)."""
    cores = max(1, physical)
    if limits.allowed_cpus is not None and logical > 0:
        per_core = max(1, round(logical / cores))
        cores = min(cores, max(1, limits.allowed_cpus // per_core))
    if limits.quota_cpus is not None:
        cores = min(cores, max(1, math.floor(limits.quota_cpus + 1e-9)))
    return cores


def limit_reason(physical: int, logical: int, limits: CpuLimits) -> str | None:
    """Which limit makes `usable_cores` fewer than the physical cores, in words; None where none does."""
    usable = usable_cores(physical, logical, limits)
    if usable >= physical:
        return None
    if limits.quota_cpus is not None and usable == max(1, math.floor(limits.quota_cpus + 1e-9)):
        return f"its cgroup CPU quota is {limits.quota_cpus:.2f} CPUs ({limits.quota_file})"
    return f"its CPU affinity allows {limits.allowed_cpus} of the {logical} logical CPUs"


def describe(limits: CpuLimits, logical: int) -> str:
    """One line: the affinity and the quota, as `dlperf doctor` prints them (`logical` 0: not known)."""
    affinity = ("not readable" if limits.allowed_cpus is None else
                f"{limits.allowed_cpus} logical CPUs" if logical <= 0 else
                f"all {logical} logical CPUs" if limits.allowed_cpus >= logical else
                f"{limits.allowed_cpus} of {logical} logical CPUs")
    quota_text = ("none" if limits.quota_cpus is None else
                  f"{limits.quota_cpus:.2f} CPUs ({limits.quota_file})")
    return f"affinity {affinity}; cgroup CPU quota {quota_text}"


__all__ = ["CpuLimits", "allowed_cpus", "cpu_list_count", "describe", "limit_reason", "online_cpus",
           "parse_cpu_list", "quota", "read_file", "read_limits", "usable_cores"]
