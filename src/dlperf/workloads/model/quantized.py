"""Precisions below fp32 on the model workload: fp16 (CUDA autocast) and int8 through each runtime's own quantizer.

- torch: `torch.ao.quantization.quantize_dynamic` of the `nn.Linear` layers (qint8 weights, activations quantized
  per call; the products in int8 on fbgemm/x86/onednn kernels). Task infer only: the quantized layers have no
  backward, and the gate judges one forward pass.
- onnxruntime: `onnxruntime.quantization.quantize_dynamic` of the exported graph's MatMul and Gemm weights (QInt8),
  written as a file of its own beside the fp32 export (`model.int8.ort-<version>.onnx`; a FILE.onnx source: in
  dlperf's ONNX cache, keyed by the file's bytes), under a temporary name and renamed into place.
- openvino: NNCF's int8 weight compression (`nncf.compress_weights`, per-channel asymmetric) of the read model,
  compiled at the f32 hint: the weights are int8; the CPU plugin quantizes the activations of those products on
  the fly where its DYNAMIC_QUANTIZATION_GROUP_SIZE is on (recorded), else computes them at f32. NNCF's telemetry
  is off (NNCF_CI).

What actually became int8 is counted and recorded (`int8` in the case's metrics): the quantized Linear modules,
the graph's integer nodes, the compiled model's nodes that executed in u8/i8. A model where nothing became int8
is `unsupported` with the reason, never timed as int8.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.frameworks.base import UnsupportedError
from dlperf.frameworks.openvino_fw import DEVICES
from dlperf.models.onnx_export import cache_dir
from dlperf.workloads.model import ModelParams
from dlperf.workloads.model.records import Int8Done

if TYPE_CHECKING:
    import numpy as np

#: ONNX operators that compute in integers (the quantizer's output, and onnxruntime's fusions of it).
INT_OPS = frozenset({"MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul", "QGemm", "ConvInteger",
                     "QLinearConv", "MatMulIntegerToFloat"})
#: OpenVINO layer types whose runtime precision says whether a product ran on int8 weights.
OV_PRODUCTS = frozenset({"FullyConnected", "MatMul", "Convolution", "GroupConvolution", "Gemm"})
WHY_INFER_ONLY = ("int8 runs task infer only here: dynamically quantized layers have no backward, and the "
                  "correctness gate judges one forward pass")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def check_task(p: ModelParams) -> None:
    """UnsupportedError for an int8 case of any task but infer."""
    if p.precision == "int8" and p.task != "infer":
        raise UnsupportedError(f"{WHY_INFER_ONLY}, not {p.task}")


def check_device(p: ModelParams, dev_type: str) -> None:
    """UnsupportedError where the precision cannot run on the device (torch): fp16 is CUDA only, int8 CPU only."""
    if p.precision == "fp16" and dev_type != "cuda":
        raise UnsupportedError(f"fp16 (autocast float16) runs on CUDA only, not on {dev_type}: use bf16 there")
    if p.precision == "int8" and dev_type != "cpu":
        raise UnsupportedError(f"torch's dynamic int8 quantization has CPU kernels only, not {dev_type}")


def torch_int8(torch: Any, net: Any) -> tuple[Any, Int8Done]:
    """(a dynamically quantized copy of `net`, what became int8); UnsupportedError when no Linear did."""
    linears = sum(1 for m in net.modules() if type(m) is torch.nn.Linear)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice, on every call
        quantized = torch.ao.quantization.quantize_dynamic(net, {torch.nn.Linear}, dtype=torch.qint8)
    done = sum(1 for m in quantized.modules() if type(m).__module__.startswith("torch.ao.nn.quantized.dynamic"))
    if not done:
        raise UnsupportedError("int8: nothing to quantize: the model has no nn.Linear layer (torch's dynamic "
                               "quantization converts nn.Linear only); its int8 path would time fp32")
    # Layers with a weight matrix that stayed float (transformers' Conv1D in GPT-2, convolutions): said, not hidden
    left = Counter(type(m).__name__ for m in quantized.modules()
                   if isinstance(getattr(m, "weight", None), torch.nn.Parameter) and m.weight.ndim >= 2
                   and not isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)))
    return quantized, {"int8": {"quantizer": "torch.ao.quantization.quantize_dynamic (nn.Linear, qint8)",
                                "engine": str(torch.backends.quantized.engine),
                                "executed": f"{done} of {linears} nn.Linear layers int8" + (
                                    "; left in float: " + ", ".join(f"{n} {k}" for k, n in sorted(left.items()))
                                    if left else "")}}


def _int8_path(path: Path, version: str) -> Path:
    """Where the quantized copy of `path` goes: beside a dlperf export, else in the ONNX cache by content."""
    cache = cache_dir().resolve()
    if cache in path.resolve().parents:
        return path.with_name(f"{path.stem}.int8.ort-{version}.onnx")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    return cache / f"file-{digest}.int8.ort-{version}.onnx"


def ort_int8(path: Path) -> tuple[Path, Int8Done]:
    """(the int8 ONNX file of `path`, made if absent, what became int8); UnsupportedError when nothing did."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = _int8_path(path, onnxruntime.__version__)
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".onnx", dir=out.parent)
        os.close(fd)
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # the quantizer's advice to pre-process, on the root logger
        try:
            with contextlib.redirect_stdout(sys.stderr):
                quantize_dynamic(str(path), tmp, op_types_to_quantize=["MatMul", "Gemm"],
                                 weight_type=QuantType.QInt8)
            os.replace(tmp, out)
        except Exception as exc:  # a graph the quantizer cannot take (e.g. over protobuf's 2 GiB): the case says so
            raise UnsupportedError(f"onnxruntime's quantize_dynamic failed on this graph: {_short(exc)}") from None
        finally:
            root.setLevel(level)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    ops = Counter(n.op_type for n in onnx.load(str(out), load_external_data=False).graph.node)
    ints = {op: n for op, n in sorted(ops.items()) if op in INT_OPS}
    if not ints:
        raise UnsupportedError("int8: nothing to quantize: onnxruntime's quantize_dynamic made no integer MatMul "
                               "in this graph (no MatMul or Gemm with constant weights); its int8 path would "
                               "time fp32")
    left = ops.get("MatMul", 0) + ops.get("Gemm", 0)
    return out, {"int8": {"quantizer": "onnxruntime.quantization.quantize_dynamic (MatMul, Gemm; QInt8)",
                          "executed": ", ".join(f"{n} {op}" for op, n in ints.items()) + " in the graph"
                          + (f"; {left} MatMul/Gemm left in float (no constant weight)" if left else ""),
                          "file": out.name}}


def ov_int8(fw: Any, path: Path, device: str,
            feeds: dict[str, np.ndarray] | None = None) -> tuple[Any, Int8Done]:
    """(the compiled model of `path` with NNCF's int8 weight compression, what ran int8); UnsupportedError where
    nncf is not installed or no product ran on int8 weights. `feeds` fixes the inputs' shapes (a FILE.onnx)."""
    # NNCF sends usage telemetry (openvino_telemetry, opt-out) unless NNCF_CI is set, whose only effect is to stop
    # it: a benchmark's worker sends nothing anywhere.
    os.environ.setdefault("NNCF_CI", "1")
    try:
        import nncf
        from nncf.common.logging.logger import set_log_level
    except ImportError:
        raise UnsupportedError("openvino int8 needs NNCF's weight compression: pip install nncf") from None
    if device not in DEVICES:
        raise UnsupportedError(f"openvino has no device {device!r} in dlperf (cpu)")
    ov = fw.import_module()
    model = fw.core().read_model(str(path))
    if feeds is not None:
        model.reshape({name: ov.PartialShape(list(a.shape)) for name, a in feeds.items()})
    set_log_level(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its statistics table and progress bar
            model = nncf.compress_weights(model)
    except Exception as exc:
        raise UnsupportedError(f"nncf.compress_weights failed on this model: {_short(exc)}") from None
    compiled = fw.core().compile_model(model, DEVICES[device], fw.compile_config("fp32"))
    executed: Counter[tuple[str, str]] = Counter()
    for node in compiled.get_runtime_model().get_ordered_ops():
        rt = node.get_rt_info()
        layer, prec = rt["layerType"].astype(str), rt["runtimePrecision"].astype(str)
        if layer in OV_PRODUCTS:
            executed[(layer, prec)] += 1
    ints = {k: n for k, n in executed.items() if k[1] in ("u8", "i8")}
    if not ints:
        raise UnsupportedError("int8: nothing to quantize: NNCF compressed no weight of a product that the CPU "
                               "plugin then ran (runtime model: "
                               + (", ".join(f"{n} {lay} in {pr}" for (lay, pr), n in sorted(executed.items()))
                                  or "no FullyConnected, MatMul or Convolution") + "); its int8 path would time fp32")
    try:
        group = int(compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE"))
    except Exception:  # a plugin without the property: no dynamic quantization of activations
        group = 0
    products = (f"dynamic quantization of activations on, group size {group} (DYNAMIC_QUANTIZATION_GROUP_SIZE)"
                if group else "products at the f32 hint")
    return compiled, {"int8": {"quantizer": f"nncf {nncf.__version__} compress_weights (int8 weights, per-channel "
                                            f"asymmetric; {products})",
                               "executed": ", ".join(f"{n} {lay} in {pr}" for (lay, pr), n in sorted(executed.items()))
                               + " (runtime model)", "dynamic_quantization_group_size": group},
                      "mfu_dtype": "int8" if group else "float32"}
