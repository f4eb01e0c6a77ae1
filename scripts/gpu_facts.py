"""The facts `make gpu-check` writes first in every invocation (what the machine and its software are), and where
ncu is, found before dlperf is importable. Standard library only (scripts/ is not a package: found on sys.path).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from gpu_runner import Check

#: Frameworks the GPU tests name: where one is absent, its tests are deselected by name (`-k "not NAME"`) and
#: the studies record its cases as unsupported. The others must be there: a missing one fails its tests.
FRAMEWORKS = ("torch", "jax", "cupy", "onnxruntime", "tensorflow", "openvino")
SKIPPED_WHEN_ABSENT = ("tensorflow", "openvino")

def find_ncu() -> str | None:
    """ncu as dlperf.profiling.ncu.find_ncu finds it ($DLPERF_NCU, PATH, the CUDA default), before dlperf imports."""
    override = os.environ.get("DLPERF_NCU")
    if override:
        return None if override.lower() == "none" or not Path(override).exists() else override
    found = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    return found if Path(found).exists() else None


def facts(check: Check, ncu: str | None, nvidia_smi: str, timeouts_s: dict[str, float]) -> list[str]:
    """What the machine and the software are: nvidia-smi -q, which frameworks import, the fingerprint dlperf
    stores, dlperf doctor, pip's list, ncu's version. Returns the absent frameworks skipped by name."""
    out, t = check.out, timeouts_s
    check.step("facts:nvidia-smi", [nvidia_smi, "-q"], t["facts:nvidia-smi"], out / "logs" / "nvidia-smi.log",
               stdout=out / "nvidia-smi-q.txt")
    code = ("import importlib.util as u, json; print(json.dumps({n: u.find_spec(n) is not None for n in "
            f"{list(FRAMEWORKS)!r}}}))")
    o = check.step("facts:frameworks", [check.python, "-c", code], t["facts:frameworks"],
                   out / "logs" / "frameworks.log", stdout=out / "frameworks.json")
    try:
        found = json.loads((out / "frameworks.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = {}
    absent = [n for n in SKIPPED_WHEN_ABSENT if found and not found.get(n)]
    if absent:
        o.details = [f"not installed, so skipped by name (GPU tests deselected, cases unsupported): "
                     f"{', '.join(absent)}"]
    code = ("import json; from dlperf.frameworks import REGISTRY; from dlperf.hardware.identity import fingerprint; "
            "print(json.dumps(fingerprint(sorted(REGISTRY)), indent=2, default=str))")
    check.step("facts:fingerprint", [check.python, "-c", code], t["facts:fingerprint"],
               out / "logs" / "fingerprint.log", stdout=out / "fingerprint.json")
    check.step("facts:doctor", check.dlperf("doctor"), t["facts:doctor"], out / "logs" / "doctor.log",
               stdout=out / "doctor.txt")
    check.step("facts:pip", [check.python, "-m", "pip", "list", "--format=freeze"], t["facts:pip"],
               out / "logs" / "pip.log", stdout=out / "pip-list.txt")
    if ncu:
        check.step("facts:ncu", [ncu, "--version"], t["facts:ncu"], out / "logs" / "ncu.log",
                   stdout=out / "ncu-version.txt")
    return absent


__all__ = ["FRAMEWORKS", "SKIPPED_WHEN_ABSENT", "facts", "find_ncu"]
