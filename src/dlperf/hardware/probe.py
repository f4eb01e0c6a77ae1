"""Probing this host: raw facts read from the OS, psutil, git and NVML, with no interpretation.

The lowest module of `hardware/`: it imports nothing of dlperf. /proc/cpuinfo is read once per
process (`cpuinfo_lines` is cached; a test that fakes it calls `cpuinfo_lines.cache_clear()`).
Everything derived from these facts (peaks) lives in `hardware.peaks`; what identifies an
environment, in `hardware.identity`.
"""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import psutil

from dlperf.hardware import cpu_limits

#: CPU flags worth recording because they decide which kernels a framework can use.
_CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "neon", "asimd")
CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpuinfo_lines() -> tuple[str, ...]:
    """The lines of /proc/cpuinfo, read once per process; () where it cannot be read (not Linux)."""
    try:
        return tuple(CPUINFO.read_text().splitlines())
    except OSError:
        return ()


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (Linux), else platform's best guess."""
    for line in cpuinfo_lines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The flags of `_CPU_FLAGS` this CPU has, in that order."""
    for line in cpuinfo_lines():
        if line.startswith(("flags", "Features")):
            present = set(line.split(":", 1)[1].split())
            return [f for f in _CPU_FLAGS if f in present]
    return []


def cpu_flag_set() -> frozenset[str]:
    """Every flag of the first CPU in /proc/cpuinfo (x86 `flags`, Arm `Features`): what the clock probe and
    the per-dtype peaks read (`cpu_flags` keeps the short list that identifies an environment)."""
    for line in cpuinfo_lines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_id() -> tuple[str | None, int | None, int | None]:
    """(vendor_id, cpu family, model) of the first CPU in /proc/cpuinfo; None for each one not found (Arm, not
    Linux). What the clock probe keys its FMA latency on."""
    found: dict[str, str] = {}
    for line in cpuinfo_lines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in ("vendor_id", "cpu family", "model") and key not in found:
            found[key] = value.strip()
        if not line.strip() and found:
            break

    def number(key: str) -> int | None:
        try:
            return int(found[key])
        except (KeyError, ValueError):
            return None

    return found.get("vendor_id"), number("cpu family"), number("model")


def cpu_mhz() -> list[float]:
    """Every core's 'cpu MHz' line of /proc/cpuinfo (often the base clock in a VM); [] where none."""
    out = []
    for line in cpuinfo_lines():
        if line.startswith("cpu MHz"):
            try:
                out.append(float(line.split(":")[1]))
            except (IndexError, ValueError):
                return []
    return out


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def thread_budget() -> tuple[int, str | None]:
    """(the threads used when a study does not say, why they are fewer than the physical cores or None): the
    physical cores this process may use, which its affinity and its cgroup's CPU quota can make fewer than the
    machine's (`cpu_limits`). One read of the limits for both."""
    physical, logical, limits = physical_cores(), psutil.cpu_count() or 0, cpu_limits.read_limits()
    return cpu_limits.usable_cores(physical, logical, limits), cpu_limits.limit_reason(physical, logical, limits)


def default_threads() -> int:
    """Threads used when a study does not say (`thread_budget`'s count)."""
    return thread_budget()[0]


def env_threads_vars(threads: int) -> dict[str, str]:
    """Environment variables that cap BLAS/OpenMP pools before a framework is imported."""
    n = str(threads)
    return {k: n for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")} | {
        "TF_NUM_INTRAOP_THREADS": n
    }


def os_release() -> str:
    """PRETTY_NAME of /etc/os-release ('' where there is none)."""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return ""


def git_commit() -> str | None:
    """dlperf's own commit when run from a git checkout; None for an installed release."""
    src = Path(__file__).resolve().parents[3]
    if not (src / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
    )
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


class GpuProperties(TypedDict):
    """What NVML reports of a GPU for its peaks (`_nvml_properties`); None where it does not say."""

    compute_capability: list[int] | None  # [major, minor]
    sm_count: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    bus_width_bits: int | None


class GpuRecord(TypedDict):
    """One GPU as `nvidia_gpus` reads it; nvidia-smi gives the first four keys only."""

    index: int
    name: str
    memory_bytes: int
    driver: str
    cuda_driver: NotRequired[str]
    properties: NotRequired[GpuProperties]


def nvidia_gpus() -> tuple[list[GpuRecord], str]:
    """GPUs as NVML sees them: (list, how it was read). Empty list with the reason when none.

    Each GPU: index, name, memory_bytes, driver, cuda_driver and, read through NVML, `properties`
    (compute capability, SMs, max clocks, bus width: what `hardware.peaks.gpu_peaks` needs).
    Through nvidia-smi: index, name, memory_bytes and driver only.
    """
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        if shutil.which("nvidia-smi") is None:
            return [], "no NVIDIA driver (nvidia-smi absent) and nvidia-ml-py not installed"
        return _gpus_from_smi()
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return [], f"NVML unavailable: {exc}"
    try:
        driver = _s(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus: list[GpuRecord] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                {
                    "index": i,
                    "name": _s(pynvml.nvmlDeviceGetName(h)),
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                    "driver": driver,
                    "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
                    "properties": _nvml_properties(pynvml, h),
                }
            )
        return gpus, "nvml"
    finally:
        pynvml.nvmlShutdown()


def _nvml_properties(pynvml: Any, handle: Any) -> GpuProperties:
    """Compute capability, SM count, max SM and memory clocks (MHz) and bus width (bits); None where
    NVML does not say."""
    def read(fn: Any, *args: Any) -> Any:
        try:
            return fn(handle, *args)
        except Exception:  # NVML_ERROR_NOT_SUPPORTED on some boards: that figure stays unknown
            return None

    cc = read(pynvml.nvmlDeviceGetCudaComputeCapability)
    attrs = read(pynvml.nvmlDeviceGetAttributes_v2) if hasattr(pynvml, "nvmlDeviceGetAttributes_v2") else None
    return {
        "compute_capability": [int(cc[0]), int(cc[1])] if cc is not None else None,
        "sm_count": int(attrs.multiprocessorCount) if attrs is not None else None,
        "sm_clock_mhz": read(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": read(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM),
        "bus_width_bits": read(pynvml.nvmlDeviceGetMemoryBusWidth),
    }


def _gpus_from_smi() -> tuple[list[GpuRecord], str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi failed: {exc}"
    if out.returncode != 0:
        return [], f"nvidia-smi failed: {out.stderr.strip().splitlines()[:1]}"
    gpus: list[GpuRecord] = []
    for line in out.stdout.strip().splitlines():
        idx, name, mem_mib, driver = (x.strip() for x in line.split(","))
        gpus.append({"index": int(idx), "name": name, "memory_bytes": int(float(mem_mib)) * 2**20, "driver": driver})
    return gpus, "nvidia-smi"


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
