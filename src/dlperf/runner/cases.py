"""Which cases a run runs: the --framework / --device filters, checked and applied, and counted without
building the cases (`dlperf run` checks its case limit with that, `dlperf plan` prints it).

A device is checked against this machine only when the user names it (`--device cuda:7`), through NVML
(`hardware.probe.nvidia_gpus`): no framework is imported.
"""

from __future__ import annotations

import os

from dlperf.errors import StudyError
from dlperf.frameworks import get_framework
from dlperf.hardware import probe
from dlperf.studies import Case, Study
from dlperf.studies.loader import CaseCount
from dlperf.studies.schema import is_device_name


def check_filters(study: Study, frameworks: list[str], devices: list[str]) -> None:
    """A framework dlperf does not know, a device it does not run on, or a CUDA device this machine lacks:
    one line each (`StudyError`)."""
    for name in frameworks:
        try:
            get_framework(name)
        except KeyError as exc:
            raise StudyError(f"--framework: {exc.args[0]}") from None
    check_devices(devices)


def check_devices(devices: list[str]) -> None:
    """A device dlperf does not run on, or a CUDA device this machine lacks: one line (`StudyError`)."""
    for dev in devices:
        if not is_device_name(dev):
            raise StudyError(f"--device {dev}: unknown device (dlperf runs on cpu, cuda and cuda:N)")
    named = [dev for dev in devices if dev.startswith("cuda")]
    if named:
        n, why = cuda_devices_here()
        for dev in named:
            index = int(dev.partition(":")[2] or 0)
            if index >= n:
                have = (f"it has no CUDA device ({why})" if n == 0 else
                        f"it has {n} CUDA device{'s' if n > 1 else ''} "
                        f"({', '.join(f'cuda:{i}' for i in range(n))})")
                raise StudyError(f"--device {dev}: {dev} is not on this machine: {have}")


def cuda_devices_here() -> tuple[int, str]:
    """(number of CUDA devices a framework here sees, how that was read): NVML's GPUs, as many of them as
    CUDA_VISIBLE_DEVICES leaves (CUDA stops at its first entry that is not a device)."""
    gpus, how = probe.nvidia_gpus()
    n = len(gpus)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",")]
        usable = 0
        for entry in entries:
            if not entry or entry.startswith("-"):
                break
            usable += 1
        n = min(n, usable)
        how = f"{how}; CUDA_VISIBLE_DEVICES={visible!r}"
    return n, how


def count_run_cases(study: Study, frameworks: list[str], devices: list[str], *,
                    stop_after: int | None = None) -> CaseCount:
    """The case-repetitions of `study` on these filters (checked), counted without building them."""
    check_filters(study, frameworks, devices)
    count = study.count_cases(frameworks, devices, stop_after=stop_after)
    if count.n == 0:
        raise no_case_matches(study, frameworks, devices)
    return count


def filter_cases(study: Study, frameworks: list[str], devices: list[str]) -> list[Case]:
    """Cases restricted to the given frameworks / devices (empty filter = all)."""
    check_filters(study, frameworks, devices)
    cases = list(study.iter_cases(frameworks, devices))
    if not cases:
        raise no_case_matches(study, frameworks, devices)
    return cases


def no_case_matches(study: Study, frameworks: list[str], devices: list[str]) -> StudyError:
    """The filters leave nothing of a study that has cases (an empty study is refused when it is loaded)."""
    return StudyError(
        f"{study.name}: no case matches --framework {','.join(frameworks) or '*'} "
        f"--device {','.join(devices) or '*'} (the study has frameworks "
        f"{', '.join(study.settings.frameworks)} and devices {', '.join(study.settings.devices)})"
    )
