"""A torch source exported to ONNX for the runtimes, with its reference outputs, in a child process that has torch.

What one case of ONNX Runtime or OpenVINO needs: `model.onnx` (the eval-mode module at the case's input shapes,
static; torch's dynamo exporter, else the TorchScript one), the seeded inputs by graph input name, the eager fp32
reference outputs, whether the reference agreed with itself (`gate.self_check`), its FLOPs per call and parameter
count. Written by `python -m dlperf.workloads.model.export PARAMS_JSON SEED` into
`$DLPERF_CACHE_DIR/onnx/model-<key>` (the key hashes the parameters, the seed, the source file's bytes where it
is a file, the versions of torch, onnx, onnxscript and transformers, and this package's code), made under a
temporary name and renamed into place by one process at a time (`onnx_export.entry_lock`: runs that share a cache
wait for each other's export; the temporary folders a killed export left are removed under it), and read back
with `np.load(allow_pickle=False)`: nothing is unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from dlperf.frameworks.base import UnsupportedError
from dlperf.models.onnx_export import cache_dir, entry_lock
from dlperf.workloads.model import ModelParams
from dlperf.workloads.model.records import RuntimeMeta

FILES = ("model.onnx", "arrays.npz", "meta.json")
_HERE = Path(__file__).resolve().parent


def key(p: ModelParams, seed: int) -> str:
    h = hashlib.sha256(json.dumps({"params": p.model_dump(), "seed": seed}, sort_keys=True).encode())
    for name in ("torch", "onnx", "onnxscript", "transformers"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            h.update(f"{name}={metadata.version(name)}".encode())
    for ref in (p.source, p.inputs_fn or ""):
        where = ref.rpartition(":")[0]
        if where.endswith(".py") and Path(where).is_file():
            h.update(Path(where).read_bytes())
    for f in sorted(_HERE.glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:24]


def complete(entry: Path) -> bool:
    """True when the export `entry` holds all its files (they are renamed into place together)."""
    return all((entry / f).is_file() for f in FILES)


def prepared(p: ModelParams, seed: int) -> tuple[Path, dict[str, np.ndarray], Callable[[], list[np.ndarray]],
                                                 RuntimeMeta]:
    """(model.onnx, feeds by input name, the reference outputs when called, meta) of the case, exported first if
    not cached. The reference outputs are read from the cache when the gate asks, after the timing (not in the
    case's memory)."""
    entry = cache_dir() / f"model-{key(p, seed)}"
    if not complete(entry):
        with entry_lock(entry):  # a second process asking for the same export waits, then reads this one's
            if not complete(entry):
                done = subprocess.run([sys.executable, "-m", "dlperf.workloads.model.export", p.model_dump_json(),
                                       str(seed)], capture_output=True, text=True, timeout=1800, env=os.environ.copy())
                if done.returncode != 0:
                    lines = done.stderr.strip().splitlines()
                    raise UnsupportedError(f"exporting {p.source} to ONNX failed: "
                                           f"{lines[-1] if lines else done.returncode}")
    meta: RuntimeMeta = json.loads((entry / "meta.json").read_text())
    arrays = entry / "arrays.npz"
    with np.load(arrays, allow_pickle=False) as z:
        feeds = {name: z[f"in_{i}"] for i, name in enumerate(meta["inputs"])}

    def refs() -> list[np.ndarray]:
        with np.load(arrays, allow_pickle=False) as z:
            return [z[f"ref_{i}"] for i in range(meta["n_outputs"])]

    return entry / "model.onnx", feeds, refs, meta


def _export(p: ModelParams, seed: int) -> None:
    import torch

    from dlperf.workloads.model import gate
    from dlperf.workloads.model import prepare as prep

    pr = prep.prepare(torch, p, seed)
    net = pr.module.eval()
    args = tuple(a for a in pr.args)
    kwargs = {k: v for k, v in pr.kwargs.items()}

    def forward() -> Any:
        with torch.inference_mode():
            return net(*args, **kwargs)

    first, second = prep.as_numpy(torch, forward()), prep.as_numpy(torch, forward())
    meta: RuntimeMeta = {"self_check": gate.self_check(first, second), "n_outputs": len(first),
                            "flops_per_call": prep.count_flops(torch, forward),
                            "param_count": prep.param_count(net), "model_info": pr.loaded.info}
    entry = cache_dir() / f"model-{key(p, seed)}"
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        path = tmp / "model.onnx"
        try:
            with contextlib.redirect_stdout(sys.stderr):
                torch.onnx.export(net, args, str(path), kwargs=kwargs, dynamo=True, verbose=False)
            meta["exporter"] = "dynamo"
        except Exception as exc:
            meta["dynamo_failure"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            torch.onnx.export(net, args, str(path), kwargs=kwargs, dynamo=False, opset_version=17)
            meta["exporter"] = "torchscript"
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
        names = [i.name for i in graph.input]
        tensors = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        positional = [a for a in args if isinstance(a, torch.Tensor)]
        values = [tensors[n] if n in tensors else positional.pop(0) for n in names]
        meta["inputs"] = names
        arrays = {f"in_{i}": v.detach().cpu().numpy() for i, v in enumerate(values)}
        arrays |= {f"ref_{i}": r for i, r in enumerate(first)}
        np.savez(tmp / "arrays.npz", **arrays)
        (tmp / "meta.json").write_text(json.dumps(meta, default=str))
        tmp.chmod(0o755)
        if entry.exists():
            shutil.rmtree(entry)
        os.replace(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        _export(ModelParams.model_validate_json(sys.argv[1]), int(sys.argv[2]))
    except Exception as exc:
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        sys.exit(1)
