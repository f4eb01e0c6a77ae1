"""Cache sizes from a fake sysfs tree and from lscpu's JSON, their capacity for a thread count, and the
memory level a working set is charged to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlperf.hardware.caches import (
    DRAM,
    CacheInfo,
    from_lscpu_json,
    from_sysfs,
    level_for,
    memory_levels,
    parse_cpu_list,
    parse_size,
)

KIB, MIB = 2**10, 2**20


def _fake_sysfs(root: Path, n_cpus: int, llc_groups: list[str]) -> Path:
    """n_cpus CPUs, each with a private 48K L1d, 32K L1i and 1M L2, and an L3 of 32M shared by each
    group of `llc_groups` (shared_cpu_list strings)."""
    for cpu in range(n_cpus):
        group = next(g for g in llc_groups if cpu in parse_cpu_list(g))
        entries = [(1, "Data", "48K", str(cpu)), (1, "Instruction", "32K", str(cpu)),
                   (2, "Unified", "1024K", str(cpu)), (3, "Unified", "32768K", group)]
        for i, (level, ctype, size, shared) in enumerate(entries):
            d = root / f"cpu{cpu}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            for name, value in (("level", level), ("type", ctype), ("size", size), ("shared_cpu_list", shared)):
                (d / name).write_text(f"{value}\n")
    return root


def test_parse_sizes_and_cpu_lists():
    assert parse_size("48K") == 48 * KIB and parse_size("32768K") == 32 * MIB and parse_size("1M") == MIB
    assert parse_size("49152") == 49152
    with pytest.raises(ValueError):
        parse_size("lots")
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}


def test_sysfs_tree_gives_per_level_size_and_instances(tmp_path):
    root = _fake_sysfs(tmp_path, 4, ["0-1", "2-3"])  # two L3 instances, each shared by two CPUs
    info = from_sysfs(root, cpus=frozenset(range(4)))
    assert info is not None and [c.level for c in info.levels] == [1, 2, 3]  # no instruction cache
    l1, l2, l3 = info.levels
    assert (l1.type, l1.size_bytes, l1.instances, l1.cpus_per_instance) == ("Data", 48 * KIB, 4, 1)
    assert (l2.size_bytes, l2.instances) == (MIB, 4)
    assert (l3.size_bytes, l3.instances, l3.cpus_per_instance) == (32 * MIB, 2, 2)
    # only the CPUs this process may use count: CPUs 0 and 1 see one L3 instance and two L2s
    mine = from_sysfs(root, cpus=frozenset({0, 1}))
    assert mine is not None and [c.instances for c in mine.levels] == [2, 2, 1]
    assert CacheInfo.from_dict(info.to_dict()) == info  # stored with the run and read back
    assert from_sysfs(tmp_path / "nothing", cpus=frozenset({0})) is None


def test_capacity_for_threads_and_level_names(tmp_path):
    info = from_sysfs(_fake_sysfs(tmp_path, 4, ["0-1", "2-3"]), cpus=frozenset(range(4)))
    assert memory_levels(info, 1) == [("L1", 48 * KIB), ("L2", MIB), ("LLC", 32 * MIB), (DRAM, None)]
    # two threads can use two private caches each; more threads than instances use them all
    assert memory_levels(info, 2)[:3] == [("L1", 96 * KIB), ("L2", 2 * MIB), ("LLC", 64 * MIB)]
    assert memory_levels(info, 16)[2] == ("LLC", 64 * MIB)
    assert memory_levels(CacheInfo((), "none"), 4) == [(DRAM, None)]


def test_level_for_working_sets():
    levels = [("L1", 96 * KIB), ("L2", 2 * MIB), ("LLC", 32 * MIB), (DRAM, None)]
    assert level_for(64 * KIB, levels) == "L1"
    assert level_for(2 * MIB, levels) == "L2"  # fits exactly
    assert level_for(2 * MIB + 1, levels) == "LLC"
    assert level_for(33 * MIB, levels) == DRAM
    assert level_for(1, [(DRAM, None)]) == DRAM


def test_lscpu_json_fallback():
    text = json.dumps({"caches": [
        {"name": "L1d", "one-size": "49152", "all-size": "98304", "type": "Data", "level": 1},
        {"name": "L1i", "one-size": "32768", "all-size": "65536", "type": "Instruction", "level": 1},
        {"name": "L2", "one-size": "1048576", "all-size": "2097152", "type": "Unified", "level": 2},
        {"name": "L3", "one-size": "33554432", "all-size": "33554432", "type": "Unified", "level": 3}]})
    info = from_lscpu_json(text, n_cpus=2)
    assert info is not None and info.source.startswith("lscpu")
    assert [(c.level, c.size_bytes, c.instances, c.cpus_per_instance) for c in info.levels] == [
        (1, 48 * KIB, 2, 1), (2, MIB, 2, 1), (3, 32 * MIB, 1, 2)]
    assert from_lscpu_json("not json", 2) is None


def test_the_bandwidth_sweep_runs_from_inside_l1_to_well_past_the_last_level(tmp_path):
    from dlperf.hardware.bwcurve import SWEEP_FACTOR, SWEEP_START_BYTES, sweep_sizes
    from dlperf.runner.ceilings import DRAM_LLC_FACTOR, DRAM_UNKNOWN_BYTES, dram_bytes

    info = from_sysfs(_fake_sysfs(tmp_path, 2, ["0-1"]), cpus=frozenset({0, 1}))
    last = dram_bytes(info, threads=2)
    assert last == DRAM_LLC_FACTOR * 32 * MIB
    sizes = sweep_sizes(last)
    assert sizes[0] == SWEEP_START_BYTES < 48 * KIB and sizes[-1] == last
    assert all(b / a == pytest.approx(SWEEP_FACTOR) for a, b in zip(sizes, sizes[1:-1], strict=False))
    assert dram_bytes(CacheInfo((), "none"), 2) == DRAM_UNKNOWN_BYTES
