"""`ops`: single operations timed in isolation (the core's smoke set: add and matmul).

Counting convention (FLOPs and bytes are per call of the step):
- add: C = A + B over n elements; 1 FLOP per element; bytes = 3 n x itemsize
  (read A and B, write C; caches and write-allocate traffic are not counted).
- matmul: C = A @ B with A, B, C n x n; 2 n^3 FLOPs (one multiply and one add per
  inner-product term, the usual GEMM convention); bytes = 3 n^2 x itemsize, the
  compulsory traffic (each matrix read or written once).
The study of element-wise and matrix ops (issue 3) extends this workload.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dlperf.frameworks import Framework
from dlperf.workloads.base import Cost, Workload, WorkloadParams

_ITEMSIZE = {"float32": 4, "float64": 8}


class OpsParams(WorkloadParams):
    op: Literal["add", "matmul"]
    n: int = Field(gt=0, description="elements for add; matrix side for matmul")
    dtype: Literal["float32", "float64"] = "float32"


class Ops(Workload):
    name = "ops"
    description = "single ops (add, matmul) on device-resident inputs; output kept"
    Params = OpsParams

    def cost(self, params: OpsParams) -> Cost:  # type: ignore[override]
        size = _ITEMSIZE[params.dtype]
        if params.op == "add":
            return Cost(flops=float(params.n), bytes_moved=3.0 * params.n * size, samples=1)
        n = params.n
        return Cost(flops=2.0 * n**3, bytes_moved=3.0 * n * n * size, samples=1)

    def build_numpy(self, fw: Framework, device: str, p: OpsParams):
        np = fw.import_module()
        rng = np.random.default_rng(0)
        shape = (p.n,) if p.op == "add" else (p.n, p.n)
        a = rng.standard_normal(shape, dtype=np.dtype(p.dtype))
        b = rng.standard_normal(shape, dtype=np.dtype(p.dtype))
        out = np.empty(shape, dtype=p.dtype)
        ufunc = np.add if p.op == "add" else np.matmul
        return lambda: ufunc(a, b, out=out)

    def build_torch(self, fw: Framework, device: str, p: OpsParams):
        torch = fw.import_module()
        dtype = getattr(torch, p.dtype)
        gen = torch.Generator(device=device).manual_seed(0)
        shape = (p.n,) if p.op == "add" else (p.n, p.n)
        a = torch.randn(shape, dtype=dtype, device=device, generator=gen)
        b = torch.randn(shape, dtype=dtype, device=device, generator=gen)
        out = torch.empty(shape, dtype=dtype, device=device)
        op = torch.add if p.op == "add" else torch.matmul
        return lambda: op(a, b, out=out)
