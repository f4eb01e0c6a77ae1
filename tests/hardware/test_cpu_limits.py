"""The CPUs a process may use (`hardware.cpu_limits`): recorded /proc and cgroup trees of the usual setups (a
Docker container on cgroup v1, a systemd slice and a Kubernetes pod on cgroup v2, a taskset), and a real
quota on this machine: a child process in a cgroup of its own, capped at 1.07 CPUs, whose default thread count
and `dlperf doctor`'s noise line must follow the cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dlperf.hardware import cpu_limits
from dlperf.hardware.cpu_limits import CpuLimits, limit_reason, read_limits, usable_cores
from dlperf.hardware.noise import cpu_share

V2_MOUNT = "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


#: `docker run --cpus 1.5` on a cgroup v1 host without a cgroup namespace: the container's cpu group is the root
#: of the cpu mount it sees (mountinfo's root field), so its own folder is the mount point.
DOCKER_V1 = {
    "proc/self/cgroup": "12:cpuset:/docker/4f2a\n5:cpu,cpuacct:/docker/4f2a\n1:name=systemd:/docker/4f2a\n",
    "proc/self/mountinfo": (
        "700 690 0:25 /docker/4f2a /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "701 690 0:26 /docker/4f2a /sys/fs/cgroup/cpuset ro,nosuid - cgroup cgroup rw,cpuset\n"),
    "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "150000\n",
    "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    "proc/self/status": "Name:\tpython\nCpus_allowed_list:\t0-15\n",
    "sys/devices/system/cpu/online": "0-15\n",
}


def test_a_docker_v1_quota_of_1_5_cpus_allows_one_thread(tmp_path):
    limits = read_limits(tree(tmp_path, DOCKER_V1))
    assert limits == CpuLimits(16, 1.5, str(tmp_path / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"))
    assert usable_cores(8, 16, limits) == 1  # whole CPUs only: a second thread would stall each period
    assert limit_reason(8, 16, limits) == f"its cgroup CPU quota is 1.50 CPUs ({limits.quota_file})"
    item = cpu_share(tmp_path)
    assert item.quiet is False and item.state == f"affinity all 16 logical CPUs; cgroup CPU quota 1.50 CPUs " \
                                                 f"({limits.quota_file})"
    assert "--cpuset-cpus" in item.hint


def test_a_v1_group_without_a_quota_has_none(tmp_path):
    files = DOCKER_V1 | {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n"}
    limits = read_limits(tree(tmp_path, files))
    assert limits.quota_cpus is None and usable_cores(8, 16, limits) == 8 and limit_reason(8, 16, limits) is None
    assert cpu_share(tmp_path).quiet is True


def test_a_parents_v2_quota_binds_its_children_and_the_smallest_applies(tmp_path):
    """A systemd session under a slice capped at 2 CPUs (CPUQuota=200%), its own group unlimited: 2; a pod
    whose container is capped tighter than its pod: the container's."""
    files = {"proc/self/cgroup": "0::/user.slice/user-1000.slice/session-2.scope\n", "proc/self/mountinfo": V2_MOUNT,
             "sys/fs/cgroup/user.slice/cpu.max": "200000 100000\n",
             "sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/cpu.max": "max 100000\n"}
    limits = read_limits(tree(tmp_path / "slice", files))
    assert limits.quota_cpus == 2.0 and limits.quota_file.endswith("user.slice/cpu.max")
    assert usable_cores(4, 8, limits) == 2 and usable_cores(1, 1, limits) == 1
    pod = {"proc/self/cgroup": "0::/kubepods/burstable/pod7/c0ffee\n", "proc/self/mountinfo": V2_MOUNT,
           "sys/fs/cgroup/kubepods/burstable/pod7/cpu.max": "400000 100000\n",
           "sys/fs/cgroup/kubepods/burstable/pod7/c0ffee/cpu.max": "50000 100000\n"}
    limits = read_limits(tree(tmp_path / "pod", pod))
    assert limits.quota_cpus == 0.5 and usable_cores(4, 8, limits) == 1  # at least one thread


def test_a_group_outside_the_mount_and_odd_files_are_no_limit(tmp_path):
    files = {"proc/self/cgroup": "0::/elsewhere\n",
             "proc/self/mountinfo": "35 24 0:30 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
             "sys/fs/cgroup/cpu.max": "100000 100000\n"}
    assert read_limits(tree(tmp_path / "a", files)).quota_cpus is None  # another namespace's group: not read
    for text in ("max 100000\n", "garbage\n", "0 100000\n", "100000 0\n", ""):
        files = {"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": V2_MOUNT, "sys/fs/cgroup/cpu.max": text}
        assert read_limits(tree(tmp_path / str(abs(hash(text))), files)).quota_cpus is None, text


def test_an_affinity_of_fewer_cpus_counts_physical_cores_at_the_threads_per_core():
    assert usable_cores(8, 16, CpuLimits(allowed_cpus=5)) == 2  # taskset -c 0-3,8 on 2 threads per core
    assert usable_cores(8, 8, CpuLimits(allowed_cpus=5)) == 5
    assert usable_cores(8, 16, CpuLimits(allowed_cpus=1)) == 1
    assert usable_cores(2, 2, CpuLimits(allowed_cpus=2)) == 2
    assert limit_reason(8, 8, CpuLimits(allowed_cpus=5)) == "its CPU affinity allows 5 of the 8 logical CPUs"
    assert [cpu_limits.cpu_list_count(t) for t in ("0-3,8,10-11", "7", "", "x-1")] == [7, 1, None, None]


def test_an_empty_tree_is_no_limit_known(tmp_path):
    assert read_limits(tmp_path) == CpuLimits()
    assert usable_cores(4, 8, CpuLimits()) == 4
    item = cpu_share(tmp_path)
    assert item.quiet is None and item.state.startswith("unknown") and not item.hint


def test_this_machines_affinity_is_the_oss():
    assert read_limits().allowed_cpus == len(os.sched_getaffinity(0))


CHILD = """
import json
from dlperf.doctor import noise_checks
from dlperf.hardware import cpu_limits, probe
limits = cpu_limits.read_limits()
shown = next(c.detail for c in noise_checks() if c.name == "CPU quota and affinity")
default, reason = probe.thread_budget()
print(json.dumps({"quota": limits.quota_cpus, "file": limits.quota_file, "default": default,
                  "reason": reason, "doctor": shown, "default_threads": probe.default_threads()}))
"""


def _writable_cpu_hierarchy() -> tuple[str, Path] | None:
    """("v1" or "v2", the mount) of a cgroup hierarchy with the cpu controller where this process can make a group
    (root); None where there is none."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or fields[3] != "/" or not os.access(fields[4], os.W_OK):
            continue
        mount = Path(fields[4])
        if tail[0] == "cgroup" and "cpu" in tail[2].split(","):
            return "v1", mount
        control = mount / "cgroup.subtree_control"
        if tail[0] == "cgroup2" and control.is_file() and "cpu" in control.read_text().split():
            return "v2", mount
    return None


@pytest.mark.skipif(sys.platform != "linux", reason="cgroups are Linux's")
def test_a_real_quota_sets_the_default_threads_and_doctor_shows_it(tmp_path):
    """A child process in a cgroup of its own capped at 1.07 CPUs: the kernel's /proc/self/cgroup places it
    there, and dlperf must read the quota this test wrote, default to one thread and say why."""
    found = _writable_cpu_hierarchy()
    if found is None:
        pytest.skip("no cgroup hierarchy with the cpu controller that this user may write (needs root): the "
                    "recorded trees above cover the reading")
    version, mount = found
    group = mount / f"dlperf-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text("10000")
            (group / "cpu.cfs_quota_us").write_text("10700")
            quota_file, procs = group / "cpu.cfs_quota_us", group / "tasks"
        else:
            (group / "cpu.max").write_text("10700 10000")
            quota_file, procs = group / "cpu.max", group / "cgroup.procs"
        enter = f"open({str(procs)!r}, 'w').write(str(__import__('os').getpid()))\n"
        done = subprocess.run([sys.executable, "-c", enter + CHILD], capture_output=True, text=True, timeout=120)
    finally:
        group.rmdir()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["quota"] == pytest.approx(1.07) and seen["file"] == str(quota_file)
    assert seen["default"] == seen["default_threads"] == 1
    assert seen["reason"] == f"its cgroup CPU quota is 1.07 CPUs ({seen['file']})"
    assert f"; cgroup CPU quota 1.07 CPUs ({quota_file})" in seen["doctor"], seen["doctor"]
