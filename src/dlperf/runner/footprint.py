"""What a worker needs just to import a framework, measured in a worker-like process, so that a memory cap
below it (`--mem-limit 1`) is refused up front instead of every case of the run failing at its import.

The cap (`worker._limit_memory`) is RLIMIT_DATA, which counts a process's data memory (heap and private
writable mappings: Linux's VmData), not its resident set. Importing NumPy with OpenBLAS's per-thread buffers
takes about 89 MB of data memory for 25 MB resident (2 threads), and fails under a cap between the two. So
the figure compared with the cap is VmData after the import, in a process that first imports what a worker
imports, with the run's thread count in the environment (BLAS pools size their buffers by it); the peak RSS
is measured beside it. It costs one short process per framework (about a second for torch), only when a
cap is set. Run as `python -m dlperf.runner.footprint FRAMEWORK`, it prints the measurement as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import DlperfError, exception_line
from dlperf.units import MIB_BYTES

#: Longest an import may take before its footprint is given up as not measurable (TensorFlow: ~10 s).
TIMEOUT_S = 120.0


class FootprintUnknown(Exception):
    """The footprint could not be measured here; the message says why."""


@dataclass(frozen=True)
class Footprint:
    """Memory of a worker-like process right after importing `framework` with `threads` threads."""

    framework: str
    version: str | None
    data_bytes: int  # VmData: what RLIMIT_DATA counts
    peak_rss_bytes: int  # VmHWM
    threads: int


def measure(framework: str, threads: int, timeout_s: float = TIMEOUT_S) -> Footprint:
    """The import footprint of `framework`, from a fresh process; FootprintUnknown where it cannot be had."""
    from dlperf.hardware.probe import env_threads_vars

    env = os.environ | env_threads_vars(threads)
    try:
        proc = subprocess.run([sys.executable, "-m", "dlperf.runner.footprint", framework], env=env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise FootprintUnknown(f"importing it took over {timeout_s:g} s") from None
    except OSError as exc:
        raise FootprintUnknown(f"cannot start {sys.executable}: {exc.strerror}") from None
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise FootprintUnknown(f"the measuring process gave no result ({tail})") from None
    if "error" in out:
        raise FootprintUnknown(out["error"])
    return Footprint(framework, out.get("version"), int(out["data_bytes"]), int(out["peak_rss_bytes"]), threads)


def refuse_caps_below_imports(frameworks: list[str], limit_mb: int, threads: int, *, source: str,
                              warn: Callable[[str], None]) -> list[Footprint]:
    """Raise DlperfError (one line, exit 2) when the cap `limit_mb` is below what a worker needs to import one
    of `frameworks` with `threads` threads; `source` names where the cap came from (`--mem-limit 1 MiB`).
    A framework that is not installed is skipped (its cases end `unsupported`); one whose footprint cannot be
    measured gets one `warn` line. Returns the footprints measured."""
    from dlperf.frameworks import get_framework

    measured = []
    for name in sorted(set(frameworks)):
        if not get_framework(name).available():
            continue
        try:
            fp = measure(name, threads)
        except FootprintUnknown as exc:
            warn(f"cannot measure what importing {name} needs ({exc}); {source} is not checked against it")
            continue
        measured.append(fp)
        if fp.data_bytes > limit_mb * MIB_BYTES:
            need_mb = -(-fp.data_bytes // MIB_BYTES)
            version = f" {fp.version}" if fp.version else ""
            plural = "s" if threads != 1 else ""
            raise DlperfError(
                f"{source} is below what a worker needs just to import {name}{version}: {need_mb} MiB of data "
                f"memory with {threads} thread{plural} (measured now; the cap counts data memory, RLIMIT_DATA, "
                f"of which {fp.peak_rss_bytes / MIB_BYTES:.0f} MiB was resident); give more than {need_mb} MiB "
                f"plus what the cases allocate, or no cap")
    return measured


def check_run_cap(study: Any, frameworks: list[str], devices: list[str], mem_limit_mb: int | None,
                  threads: int | None, *, warn: Callable[[str], None]) -> None:
    """`dlperf run`'s check: the cap (the option's, else the study's) against the footprint of every framework
    the run's cases use, at the run's thread count where it is set, else 1 (the fewest a run uses, so a refusal
    is certain). Nothing is measured without a cap."""
    from dlperf.runner.sweep import filter_cases

    limit = mem_limit_mb or study.settings.mem_limit_mb
    if not limit:
        return
    source = f"--mem-limit {limit} MiB" if mem_limit_mb else f"the study's mem_limit_mb: {limit}"
    used = [c.framework for c in filter_cases(study, frameworks, devices)]
    refuse_caps_below_imports(used, limit, threads or study.settings.threads or 1, source=source, warn=warn)


def _vm_status(path: Path = Path("/proc/self/status")) -> dict[str, int]:
    """VmData and VmHWM of this process, in bytes (Linux)."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmData", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024  # kB
    return out


def main(argv: list[str]) -> int:
    """Import what a worker imports (`worker.run_case`, before its framework), then the framework; print
    the memory it holds as JSON (or {"error": why})."""
    import dlperf.core.validity  # the worker's own imports count towards its cap too
    import dlperf.meters.activity
    import dlperf.runner.derive
    import dlperf.runner.worker
    import dlperf.timing
    import dlperf.workloads  # noqa: F401
    from dlperf.frameworks import get_framework

    fw = get_framework(argv[1])
    try:
        fw.import_module()
        vm = _vm_status()
    except Exception as exc:
        print(json.dumps({"error": exception_line(exc)}))
        return 0
    if "VmData" not in vm or "VmHWM" not in vm:
        print(json.dumps({"error": "this system has no VmData/VmHWM in /proc/self/status"}))
        return 0
    print(json.dumps({"version": fw.version, "data_bytes": vm["VmData"], "peak_rss_bytes": vm["VmHWM"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
