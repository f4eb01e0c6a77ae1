"""The environment fingerprint: what machine and software a result was measured on.

Two results are comparable only when they share a fingerprint, or when the
comparison says how their fingerprints differ. Nothing here is a measurement of
speed; it is identity. The framework part imports frameworks, so the runner
collects it in a worker process, never in the CLI process.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import psutil

from dlperf import __version__
from dlperf.hardware.detect import catalog_peaks
from dlperf.hardware.peaks import cpu_theoretical, gpu_theoretical

#: CPU flags worth recording because they decide which kernels a framework can use.
_CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "neon", "asimd")


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (Linux), else platform's best guess."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                present = set(line.split(":", 1)[1].split())
                return [f for f in _CPU_FLAGS if f in present]
    except OSError:
        pass
    return []


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def default_threads() -> int:
    """Threads used when a study does not say: the physical cores of this machine."""
    return physical_cores()


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


def nvidia_gpus() -> tuple[list[dict[str, Any]], str]:
    """GPUs as NVML sees them: (list, how it was read). Empty list with the reason when none."""
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
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = _s(pynvml.nvmlDeviceGetName(h))
            gpus.append(
                {
                    "index": i,
                    "name": name,
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                    "driver": driver,
                    "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
                    "peaks_theoretical": catalog_peaks(_nvml_peaks(pynvml, h), name, kind="gpu"),
                }
            )
        return gpus, "nvml"
    finally:
        pynvml.nvmlShutdown()


def _nvml_peaks(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Theoretical peaks of one GPU from NVML's clocks, bus width, SM count and compute capability."""
    def read(fn: Any, *args: Any) -> Any:
        try:
            return fn(handle, *args)
        except Exception:  # NVML_ERROR_NOT_SUPPORTED on some boards: that figure stays unknown
            return None

    cc = read(pynvml.nvmlDeviceGetCudaComputeCapability)
    attrs = read(pynvml.nvmlDeviceGetAttributes_v2) if hasattr(pynvml, "nvmlDeviceGetAttributes_v2") else None
    if cc is None or attrs is None:
        return {"fp32_flops_per_s": None, "assumptions": "NVML did not report compute capability or SM count"}
    return gpu_theoretical(
        major=int(cc[0]), minor=int(cc[1]), sm_count=int(attrs.multiprocessorCount),
        sm_clock_mhz=read(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
        mem_clock_mhz=read(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM),
        bus_width_bits=read(pynvml.nvmlDeviceGetMemoryBusWidth),
    )


def _gpus_from_smi() -> tuple[list[dict[str, Any]], str]:
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
    gpus = []
    for line in out.stdout.strip().splitlines():
        idx, name, mem_mib, driver = (x.strip() for x in line.split(","))
        gpus.append({"index": int(idx), "name": name, "memory_bytes": int(float(mem_mib)) * 2**20, "driver": driver})
    return gpus, "nvidia-smi"


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def host_fingerprint(threads: int | None = None) -> dict[str, Any]:
    """Everything about the host that does not need a framework import."""
    gpus, gpu_source = nvidia_gpus()
    uname = platform.uname()
    return {
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cpu_physical_cores": physical_cores(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "threads": threads or default_threads(),
        "ram_bytes": psutil.virtual_memory().total,
        "os": f"{uname.system} {_os_release()}".strip(),
        "kernel": uname.release,
        "machine": uname.machine,
        "python": platform.python_version(),
        "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "gpus": gpus,
        "gpu_source": gpu_source,
        "cpu_peaks_theoretical": catalog_peaks(cpu_theoretical(physical_cores(), cpu_flags()), cpu_model(),
                                               kind="cpu", visible_cores=physical_cores()),
        "dlperf_version": __version__,
        "dlperf_git_commit": git_commit(),
    }


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return ""


def framework_fingerprint(names: list[str]) -> dict[str, Any]:
    """Version and underlying libraries of each named framework (imports them)."""
    from dlperf.frameworks import get_framework

    out: dict[str, Any] = {}
    for name in sorted(set(names)):
        fw = get_framework(name)
        if not fw.available():
            out[name] = {"version": None, "missing": fw.install_hint}
            continue
        try:
            out[name] = fw.info()
        except Exception as exc:  # a broken install is recorded, not fatal
            out[name] = {"version": fw.version, "error": f"{type(exc).__name__}: {exc}"}
    return out


def fingerprint(framework_names: list[str], threads: int | None = None) -> dict[str, Any]:
    """The full fingerprint: host plus the frameworks a run uses."""
    fp = host_fingerprint(threads)
    fp["frameworks"] = framework_fingerprint(framework_names)
    return fp


def fingerprint_hash(fp: dict[str, Any]) -> str:
    """Stable identity of a fingerprint (canonical JSON, SHA-256)."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:20]


def diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Fields that differ between two fingerprints, as (dotted key, a, b)."""
    out: list[tuple[str, Any, Any]] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append((f"{prefix}{key}", va, vb))
    return out


def env_threads_vars(threads: int) -> dict[str, str]:
    """Environment variables that cap BLAS/OpenMP pools before a framework is imported."""
    n = str(threads)
    return {k: n for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")} | {
        "TF_NUM_INTRAOP_THREADS": n
    }


__all__ = [
    "cpu_model",
    "default_threads",
    "diff",
    "env_threads_vars",
    "fingerprint",
    "fingerprint_hash",
    "host_fingerprint",
    "nvidia_gpus",
]
