"""Registry of framework adapters, by name. Importing it imports no framework."""

from __future__ import annotations

from dlperf.frameworks.base import Framework, UnsupportedError, registry
from dlperf.frameworks.caffe_fw import CaffeFramework
from dlperf.frameworks.cupy_fw import CupyFramework
from dlperf.frameworks.jax_fw import JaxFramework, JaxNojitFramework
from dlperf.frameworks.nn_fw import NnCudaCublasFramework, NnCudaFramework, NnFramework, NnSequentialFramework
from dlperf.frameworks.numpy_fw import NumpyFramework
from dlperf.frameworks.onnxruntime_fw import OnnxruntimeFramework
from dlperf.frameworks.openvino_fw import OpenvinoFramework
from dlperf.frameworks.pytensor_fw import PytensorFramework, TheanoFramework
from dlperf.frameworks.tensorflow_fw import TensorflowEagerFramework, TensorflowFramework, TensorflowXlaFramework
from dlperf.frameworks.torch_fw import TorchFramework

#: Name -> adapter class (each with its `family`, which finds its workload builders).
REGISTRY: dict[str, type[Framework]] = registry(
    NumpyFramework, TorchFramework, TensorflowFramework, TensorflowEagerFramework, TensorflowXlaFramework,
    JaxFramework, JaxNojitFramework, PytensorFramework, TheanoFramework, CupyFramework, NnSequentialFramework,
    NnFramework, NnCudaFramework, NnCudaCublasFramework, CaffeFramework, OnnxruntimeFramework, OpenvinoFramework,
)


def get_framework(name: str) -> Framework:
    """A fresh adapter instance for `name` (KeyError lists the known names)."""
    try:
        return REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown framework {name!r} (known: {', '.join(sorted(REGISTRY))})") from None


__all__ = ["REGISTRY", "Framework", "UnsupportedError", "get_framework"]
