"""The CPU caches this machine reports, and the memory level a working set fits in.

Read from Linux sysfs (/sys/devices/system/cpu/cpuN/cache/indexM/{level,type,size,shared_cpu_list}),
else from `lscpu -J -B -C`, else none (every working set is then "DRAM"). Instruction caches are left
out. Per level: the size of one instance and how many instances the visible CPUs use (two cores with
their own L2 use two; cores sharing one L3 use one).

The capacity a level offers a run of `threads` threads is the size of one instance x the number of
instances those threads can spread over (at most one thread per CPU): the most the level can hold for
them. A working set is charged to the smallest level whose capacity holds it (`level_for`), so a
case is never charged to a slower level than the one it can live in. The last level is named "LLC".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dlperf.hardware.cpu_limits import parse_cpu_list

SYSFS_CPU = Path("/sys/devices/system/cpu")
DRAM = "DRAM"


@dataclass(frozen=True)
class CacheLevel:
    """One cache level (data or unified) as the visible CPUs see it."""

    level: int
    type: str
    #: Size of one instance, bytes.
    size_bytes: int
    #: Instances the visible CPUs use.
    instances: int
    #: Visible CPUs per instance (the CPUs that share one).
    cpus_per_instance: int

    def capacity_bytes(self, threads: int) -> int:
        """What this level can hold for `threads` threads: one instance per thread, at most all instances."""
        return self.size_bytes * max(1, min(threads, self.instances))


@dataclass(frozen=True)
class CacheInfo:
    """The cache levels, fastest first, and where they were read."""

    levels: tuple[CacheLevel, ...]
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "levels": [asdict(c) for c in self.levels]}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CacheInfo:
        data = data or {}
        return cls(tuple(CacheLevel(**c) for c in data.get("levels") or []), data.get("source", "not recorded"))


def level_names(info: CacheInfo) -> list[str]:
    """L1, L2, ..., with the last cache level named LLC (a lone level is L1)."""
    n = len(info.levels)
    return [("LLC" if i == n - 1 and n > 1 else f"L{c.level}") for i, c in enumerate(info.levels)]


def memory_levels(info: CacheInfo, threads: int) -> list[tuple[str, int | None]]:
    """(name, capacity in bytes for `threads` threads) per level, fastest first, then (DRAM, None)."""
    names = level_names(info)
    return [(name, c.capacity_bytes(threads)) for name, c in zip(names, info.levels, strict=True)] + [(DRAM, None)]


def level_for(working_set_bytes: float, levels: list[tuple[str, int | None]]) -> str:
    """The smallest level whose capacity holds the working set; DRAM where none does."""
    for name, capacity in levels:
        if capacity is not None and working_set_bytes <= capacity:
            return name
    return DRAM


def parse_size(text: str) -> int:
    """'48K', '1024K', '32M', '49152' -> bytes (sysfs and lscpu write K as KiB)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cache size {text!r} is not understood")
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2).upper()]


def visible_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its affinity), else all CPUs."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))


def from_sysfs(root: Path = SYSFS_CPU, cpus: frozenset[int] | None = None) -> CacheInfo | None:
    """The data and unified caches of the visible CPUs from sysfs; None where sysfs has none."""
    cpus = visible_cpus() if cpus is None else cpus
    found: dict[tuple[int, str], dict[frozenset[int], int]] = {}
    for cpu in sorted(cpus):
        for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                ctype = (index / "type").read_text().strip()
                if ctype == "Instruction":
                    continue
                level = int((index / "level").read_text())
                size = parse_size((index / "size").read_text())
                shared = parse_cpu_list((index / "shared_cpu_list").read_text())
            except (OSError, ValueError):
                continue
            found.setdefault((level, ctype), {})[shared or frozenset({cpu})] = size
    if not found:
        return None
    levels = []
    for (level, ctype), instances in sorted(found.items()):
        sizes = sorted(instances.values())
        levels.append(CacheLevel(level=level, type=ctype, size_bytes=sizes[0], instances=len(instances),
                                 cpus_per_instance=max(len(s & cpus) or 1 for s in instances)))
    return CacheInfo(tuple(_one_per_level(levels)), f"sysfs {root}")


def _one_per_level(levels: list[CacheLevel]) -> list[CacheLevel]:
    """One entry per level number: data before unified (L1d, not L1i, is what holds the arrays)."""
    out: dict[int, CacheLevel] = {}
    for c in levels:
        if c.level not in out or (c.type == "Data" and out[c.level].type != "Data"):
            out[c.level] = c
    return [out[k] for k in sorted(out)]


def from_lscpu_json(text: str, n_cpus: int) -> CacheInfo | None:
    """The caches of `lscpu -J -B -C` output (which CPUs share an instance is not given: spread evenly)."""
    try:
        rows = json.loads(text).get("caches") or []
    except (ValueError, AttributeError):
        return None
    levels = []
    for r in rows:
        if r.get("type") == "Instruction":
            continue
        try:
            one, total = int(r["one-size"]), int(r["all-size"])
            level = int(r["level"])
        except (KeyError, TypeError, ValueError):
            continue
        instances = max(1, total // one) if one else 1
        levels.append(CacheLevel(level=level, type=str(r.get("type", "Unified")), size_bytes=one,
                                 instances=instances, cpus_per_instance=max(1, n_cpus // instances)))
    return CacheInfo(tuple(_one_per_level(levels)), "lscpu -J -B -C") if levels else None


def cache_info(root: Path = SYSFS_CPU) -> CacheInfo:
    """This machine's caches: sysfs, else lscpu, else none (said in `source`)."""
    found = from_sysfs(root)
    if found is not None:
        return found
    lscpu = shutil.which("lscpu")
    if lscpu:
        try:
            out = subprocess.run([lscpu, "-J", "-B", "-C"], capture_output=True, text=True, timeout=10, check=False)
            found = from_lscpu_json(out.stdout, len(visible_cpus()))
        except (OSError, subprocess.SubprocessError):
            found = None
        if found is not None:
            return found
    return CacheInfo((), "no cache sizes readable (no sysfs cache entries, no lscpu): every working set is DRAM")
