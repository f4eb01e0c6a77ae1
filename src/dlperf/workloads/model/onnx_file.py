"""A `FILE.onnx` source on the runtimes: its inputs from the graph's declared inputs, and its reference.

There is no torch module, so no torch reference: the reference is ONNX Runtime on the CPU at fp32 with every
graph optimisation off (the graph's operators as written), run twice first (`gate.self_check`); where
onnxruntime is not installed, each path is `not checked` with that reason.

Inputs: each declared input's element type and shape; a fixed dimension is kept, a symbolic or unknown one is
bound by `--batch` when it is an input's first axis and by `--seq` otherwise (`--seq` required then). Values are
seeded (`seed`): floating inputs standard normal, integer inputs 0 or 1 (valid ids and indices for any
vocabulary), booleans true or false. FLOPs are not counted (FlopCounterMode needs the torch module); the
parameter count is the number of elements of the graph's initializers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dlperf.sources import SourceError
from dlperf.workloads.model import ModelParams, gate
from dlperf.workloads.model.records import RuntimeMeta

REFERENCE = "onnxruntime on the CPU at fp32 with graph optimisations off"
NO_ONNXRUNTIME = "onnxruntime is not installed: an ONNX file has no other reference"


def input_shapes(graph: Any, batch: int, seq: int | None) -> dict[str, tuple[list[int], np.dtype]]:
    """Each declared input (initializers excluded): (its shape with symbolic dimensions bound, its dtype)."""
    import onnx

    inits = {i.name for i in graph.initializer}
    out: dict[str, tuple[list[int], np.dtype]] = {}
    for value in graph.input:
        if value.name in inits:
            continue
        tt = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise SourceError(f"input {value.name!r} is not a tensor: dlperf feeds tensors only")
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except Exception:
            raise SourceError(f"input {value.name!r} has element type {tt.elem_type}, which NumPy has no "
                              "type for") from None
        dims = []
        for axis, dim in enumerate(tt.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                dims.append(int(dim.dim_value))
            elif axis == 0:
                dims.append(batch)
            elif seq is None:
                name = dim.dim_param or "?"
                raise SourceError(f"input {value.name!r} axis {axis} is symbolic ({name}): give --seq to bind it")
            else:
                dims.append(seq)
        out[value.name] = (dims, dtype)
    return out


def make_feeds(shapes: dict[str, tuple[list[int], np.dtype]], seed: int) -> dict[str, np.ndarray]:
    """Seeded arrays of the declared shapes and types (see the module's rules)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (dims, dtype) in shapes.items():
        if dtype in (np.float32, np.float64):  # drawn in its own type: no float64 copy beside a float32 input
            feeds[name] = rng.standard_normal(dims, dtype=dtype)
        elif np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(dims, dtype=np.float32).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.random(dims) < 0.5
        else:
            feeds[name] = rng.integers(0, 2, size=dims).astype(dtype)
    return feeds


def reference(path: Path, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray] | None, gate.Verdict | None,
                                                                  str | None]:
    """(outputs, self-check verdict, why there is none) of the reference: ONNX Runtime, CPU, fp32, no graph
    optimisation, run twice. A reference that cannot run (a runtime error, no memory left under a cap) leaves
    the path `not checked`, with the error."""
    try:
        import onnxruntime as ort
    except ModuleNotFoundError:
        return None, None, NO_ONNXRUNTIME
    except Exception as exc:  # under a memory cap an import can fail on allocation (runner.alloc_failure)
        return None, None, f"the reference run failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    try:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        runs = [[np.asarray(o, dtype=np.float64) for o in sess.run(None, feeds)] for _ in range(2)]
    except Exception as exc:  # MemoryError included: the reference runs after the timing, which stands
        return None, None, f"the reference run failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return runs[0], gate.self_check(runs[0], runs[1]), None


def prepared(p: ModelParams, seed: int) -> tuple[Path, dict[str, np.ndarray], Callable[[], list[np.ndarray] | None],
                                                 RuntimeMeta]:
    """(model path, feeds by input name, the reference's outputs when called, meta) of a case of a FILE.onnx
    source. The reference runs only when the gate asks for it, after the timing: its session and its float64
    copies are not in the case's memory (`dlperf maxbatch FILE.onnx` searches the path alone). Calling it sets
    meta's `self_check` and `not_checked`."""
    import onnx

    path = Path(p.source)
    if p.input or p.inputs_fn:
        raise SourceError(f"{p.source}: an ONNX file's inputs are its graph's declared inputs (no --input or "
                          "--inputs)")
    model = onnx.load(str(path), load_external_data=False)
    try:
        feeds = make_feeds(input_shapes(model.graph, p.batch, p.seq), seed)
    except SourceError as exc:
        raise SourceError(f"{p.source}: {exc}") from None
    params = int(sum(int(np.prod(t.dims)) for t in model.graph.initializer))
    meta: RuntimeMeta = {"self_check": None, "not_checked": None, "flops_per_call": None,
                            "param_count": params, "exporter": None, "reference": REFERENCE,
                            "model_info": {"inputs": {n: list(a.shape) for n, a in feeds.items()}}}

    def refs() -> list[np.ndarray] | None:
        outputs, meta["self_check"], meta["not_checked"] = reference(path, feeds)
        return outputs

    return path, feeds, refs, meta
