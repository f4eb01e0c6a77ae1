"""`dlperf doctor`'s noise section read from recorded /proc and /sys trees: a tuned bare-metal machine, where every
setting is read and set for repeatable timings (and `perf` may count), and a cloud VM, where most files are absent
and read "unknown" (never a guessed value), each noisy setting with what to change."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.doctor import NOISE, Check, canary_check, noise_checks, profiler_checks
from dlperf.hardware.noise import NoiseItem, perf_paranoid, read_noise

CPU = "sys/devices/system/cpu"
#: A tuned bare-metal Intel server (8 CPUs, intel_pstate): performance governor, turbo off, ASLR off, CPUs 4-7
#: isolated from the scheduler and the tick, SMT off, perf open to users, no hypervisor; dlperf runs under
#: `taskset -c 4-7` in a systemd session (cgroup v2) with no CPU quota.
TUNED = {
    "proc/self/status": "Name:\tdlperf\nCpus_allowed:\tf0\nCpus_allowed_list:\t4-7\n",
    "proc/self/cgroup": "0::/user.slice/user-1000.slice/session-2.scope\n",
    "proc/self/mountinfo": "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
                           "rw,nsdelegate,memory_recursiveprot\n",
    "sys/fs/cgroup/user.slice/cpu.max": "max 100000\n",
    f"{CPU}/online": "0-7\n",
    **{f"{CPU}/cpu{i}/cpufreq/scaling_governor": "performance\n" for i in range(8)},
    f"{CPU}/cpu0/cpufreq/scaling_driver": "intel_pstate\n",
    f"{CPU}/intel_pstate/no_turbo": "1\n",
    "proc/sys/kernel/randomize_va_space": "0\n",
    f"{CPU}/isolated": "4-7\n",
    f"{CPU}/nohz_full": "4-7\n",
    "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=domain,managed_irq,4-7 nohz_full=4-7 rcu_nocbs=4-7\n",
    f"{CPU}/smt/control": "off\n",
    f"{CPU}/smt/active": "0\n",
    "proc/sys/kernel/perf_event_paranoid": "1\n",
    "proc/stat": "cpu  4705 356 584 3699176 23060 0 277 0 0 0\ncpu0 1393 280 262 462318 3083 0 57 0 0 0\n",
    "proc/cpuinfo": "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n"
                    "flags\t\t: fpu vme de pse tsc msr pae avx avx2 avx512f\n",
    "sys/class/dmi/id/sys_vendor": "Dell Inc.\n",
    "sys/class/dmi/id/product_name": "PowerEdge R740\n",
}
#: A 2-core cloud VM (this project's development VM, read on 2026-11-24): no cpufreq, no turbo control, no DMI,
#: no nohz_full; ASLR full, nothing isolated, SMT not supported, perf for user space only, the hypervisor flag set.
CLOUD_VM = {
    "proc/sys/kernel/randomize_va_space": "2\n",
    f"{CPU}/isolated": "\n",
    "proc/cmdline": "console=ttyS0 quiet reboot=k panic=1\n",
    f"{CPU}/smt/control": "notsupported\n",
    f"{CPU}/smt/active": "0\n",
    "proc/sys/kernel/perf_event_paranoid": "2\n",
    "proc/stat": "cpu  102164 0 18017 208497 812 0 192 70 0 0\ncpu0 51082 0 9008 104248 406 0 96 35 0 0\n",
    "proc/cpuinfo": "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu vme de pse tsc msr avx2 hypervisor\n",
}


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def by_name(items: list[NoiseItem]) -> dict[str, NoiseItem]:
    return {i.name: i for i in items}


def test_a_tuned_bare_metal_machine_reads_quiet_everywhere(tmp_path):
    items = by_name(read_noise(tree(tmp_path, TUNED)))
    assert [i.quiet for i in items.values()] == [True] * 7, items
    assert items["CPU frequency governor"].state == "performance (driver intel_pstate)"
    assert items["turbo / boost"].state == "off (intel_pstate no_turbo = 1)"
    assert items["ASLR"].state == "off (randomize_va_space = 0)"
    assert items["isolated CPUs"].state == "4-7; nohz_full 4-7; rcu_nocbs 4-7"
    assert "taskset -c 4-7" in items["isolated CPUs"].hint  # how to use them
    assert items["SMT"].state.startswith("off")
    assert items["CPU quota and affinity"].state == "affinity 4 of 8 logical CPUs; cgroup CPU quota none"
    assert items["virtual machine"].state == ("no: bare metal (Dell Inc. PowerEdge R740); 0.00% of CPU time stolen "
                                              "since boot")
    assert perf_paranoid(tmp_path).state.startswith("1: ") and perf_paranoid(tmp_path).quiet is True


def test_a_cloud_vm_reads_unknown_where_files_are_absent_and_says_what_to_change(tmp_path):
    items = by_name(read_noise(tree(tmp_path, CLOUD_VM)))
    assert items["CPU frequency governor"].quiet is None and items["CPU frequency governor"].state.startswith(
        "unknown: no cpufreq")
    assert items["turbo / boost"].quiet is None and items["turbo / boost"].state.startswith("unknown")
    assert not items["CPU frequency governor"].hint and not items["turbo / boost"].hint  # nothing invented
    aslr = items["ASLR"]
    assert aslr.quiet is False and aslr.state == "on (full: also the heap) (randomize_va_space = 2)"
    assert "kernel.randomize_va_space=0" in aslr.hint
    assert items["isolated CPUs"].quiet is False and items["isolated CPUs"].state == "none"
    assert "isolcpus=" in items["isolated CPUs"].hint
    assert items["SMT"].quiet is True and items["SMT"].state.startswith("not supported")
    vm = items["virtual machine"]
    assert vm.quiet is False and vm.state == ("yes (the CPU's hypervisor flag); 0.02% of CPU time stolen since "
                                              "boot")  # 70 of 329,752 ticks
    assert "dedicated host" in vm.hint
    perf = perf_paranoid(tmp_path)
    assert perf.quiet is False and perf.state.startswith("2: ") and "perf_event_paranoid=1" in perf.hint


def test_an_empty_tree_is_unknown_everywhere(tmp_path):
    items = [*read_noise(tmp_path), perf_paranoid(tmp_path)]
    assert all(i.quiet is None and i.state.startswith("unknown") and not i.hint for i in items), items


@pytest.mark.parametrize(("files", "state", "quiet"), [
    ({f"{CPU}/cpufreq/boost": "1\n"}, "on (cpufreq boost = 1)", False),
    ({f"{CPU}/cpufreq/boost": "0\n"}, "off (cpufreq boost = 0)", True),
    ({f"{CPU}/intel_pstate/no_turbo": "0\n"}, "on (intel_pstate no_turbo = 0)", False),
    ({f"{CPU}/intel_pstate/no_turbo": "garbage\n"}, "unknown: neither intel_pstate/no_turbo nor cpufreq/boost in /sys",
     None),
])
def test_boost_is_read_from_either_driver(tmp_path, files, state, quiet):
    item = by_name(read_noise(tree(tmp_path, files)))["turbo / boost"]
    assert (item.state, item.quiet) == (state, quiet)


def test_turbo_where_sys_says_nothing_is_the_probes_measured_ratio(tmp_path):
    """A VM's /sys has no boost file: the clock probe's one core alone over each of all busy decides (1.00x: none
    seen, quiet; 1.25x, as a bare-metal core turbos: noise, with what to do); where /sys does say, the ratio is
    shown beside it and /sys decides."""
    def item(files, speedup):
        root = tmp_path / str(len(list(tmp_path.iterdir())))  # a tree of its own per call
        return by_name(read_noise(tree(root, files), speedup, 1.03))["turbo / boost"]

    vm = item({}, 1.004)
    assert vm.quiet is True and vm.state == ("not in /sys; measured: one core alone ran the FMA loop at 1.00x the "
                                             "all-core rate (no turbo seen)")
    turbo = item({}, 1.25)
    assert turbo.quiet is False and "1.25x" in turbo.state and "clock rises as fewer cores are busy" in turbo.state
    assert "firmware" in turbo.hint
    on = item({f"{CPU}/cpufreq/boost": "1\n"}, 1.25)
    assert on.quiet is False and on.state.startswith("on (cpufreq boost = 1); measured: ") and "sudo tee" in on.hint
    assert item({}, None).state.startswith("unknown: neither")  # no probe: /sys's answer alone


def test_mixed_governors_are_all_named(tmp_path):
    files = {f"{CPU}/cpu0/cpufreq/scaling_governor": "performance\n", f"{CPU}/cpu1/cpufreq/scaling_governor":
             "powersave\n", f"{CPU}/cpu0/cpufreq/scaling_driver": "amd-pstate-epp\n"}
    item = by_name(read_noise(tree(tmp_path, files)))["CPU frequency governor"]
    assert item.state == "performance, powersave (driver amd-pstate-epp)" and item.quiet is False
    assert "cpupower frequency-set -g performance" in item.hint


def test_doctor_shows_them_as_its_noise_section_with_the_canary_hook(tmp_path):
    root = tree(tmp_path, CLOUD_VM)
    checks = noise_checks(root)
    assert [c.section for c in checks] == [NOISE] * 7
    aslr = next(c for c in checks if c.name == "ASLR")
    assert aslr.ok is False and aslr.detail.startswith("on (full") and "; each worker process" in aslr.detail
    assert next(c for c in checks if c.name == "turbo / boost").ok is None
    canary = Check(NOISE, "canary", True, "spread 0.4% over 20 runs")  # what a canary kernel's hook would give
    assert noise_checks(root, canary=lambda: canary) == [*checks, canary]
    # perf's access is no noise: it is shown with the profilers
    perf = profiler_checks(root)[-1]
    assert (perf.section, perf.name, perf.ok) == ("profilers", "perf_event_paranoid", False)


class _Ticks:
    """A fake clock whose every timed interval lasts the next of `durations_s` (seconds)."""

    def __init__(self, durations_s):
        self.durations, self.t, self.started = iter(durations_s), 0.0, False

    def __call__(self):
        if self.started:
            self.t += next(self.durations)
        self.started = not self.started
        return self.t


@pytest.mark.parametrize("slow_factor, ok", [(1.0, True), (1.5, False)])
def test_doctor_runs_the_sweeps_canary_and_judges_its_spread(slow_factor, ok):
    from dlperf.runner.canary import REPEATS, Canary

    # 4 canary times; each is 2 parts x REPEATS timings of 1 ms; the last time's parts take `slow_factor` longer
    per_time = 2 * REPEATS
    durations = [1e-3] * (3 * per_time) + [1e-3 * slow_factor] * per_time
    check = canary_check(times=4, pause_s=0.0, canary=Canary(clock=_Ticks(durations)))
    assert (check.section, check.name, check.ok) == (NOISE, "canary", ok)
    spread = (slow_factor - 1.0) * 2e-3 / 2e-3  # (max - min) / median of 2, 2, 2, 2 x slow_factor ms
    assert check.detail.startswith("4 times over ") and f"spread {spread:.1%} (max-min)" in check.detail
    assert ("--precision" in check.detail) is (not ok)
