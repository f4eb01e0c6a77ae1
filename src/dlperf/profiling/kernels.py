"""Kernel-level breakdowns: rows of (name, calls, self time) from a framework's profiler,
grouped into the families of study 001's Table 1.

A row's `where` says which clock timed it: `cuda` rows are device kernels
(self device time), `cpu` rows are host-side operators (self CPU time; on a
CPU they are the work itself). Self times do not nest, so a family's sum is
time actually spent in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypedDict

#: Family -> pattern on the kernel or op name, tried in this order (first match wins).
FAMILIES: list[tuple[str, re.Pattern[str]]] = [
    ("memory copy", re.compile(r"memcpy|memset|copy|transpose|permute|contiguous|concat|\bcat\b|aten::cat|"
                               r"\bpad|aten::pad|constant_pad|split|slice|clone|gather|scatter|Identity", re.I)),
    ("convolution", re.compile(r"conv|cudnn|fprop|dgrad|wgrad|winograd|implicit_gemm|im2col|col2im", re.I)),
    ("GEMM batched", re.compile(r"bmm|batched|batch_?mat_?mul|gemmStridedBatched|gemm_?batched", re.I)),
    ("GEMM plain", re.compile(r"gemm|matmul|aten::mm\b|aten::addmm|aten::linear|\bmm\b|_MklMatMul|\bdot\b", re.I)),
    ("reduction", re.compile(r"reduce|sum|mean|\bmax\b|pool|softmax|nll|cross_?entropy|xent|argmax|\bnorm\b|"
                             r"lrn|local_response|amax", re.I)),
    ("element-wise", re.compile(r"elementwise|relu|threshold|add|sub|mul|div|pow|sqrt|exp|log|sgd|momentum|"
                                r"foreach|fill|zero|dropout|bernoulli|where|cast|bias|sign|neg|select|"
                                r"clamp|apply|assign|maximum|minimum|square|rsqrt|scale|unary|binary|copysign", re.I)),
]
FAMILY_ORDER = ["GEMM plain", "GEMM batched", "convolution", "element-wise", "reduction", "memory copy", "other"]


class KernelRow(TypedDict):
    """One kernel or operator over the profiled calls (`make_rows`), as stored in a case's `kernels`."""

    name: str
    family: str
    calls: int
    self_time_s: float
    where: str  # "cuda" (self device time) or "cpu" (self CPU time)
    steps: int


def family(name: str) -> str:
    """The family of a kernel or operator name (`other` when no pattern matches)."""
    for fam, pattern in FAMILIES:
        if pattern.search(name):
            return fam
    return "other"


def make_rows(raw: Iterable[tuple[str, int, float, str]], steps: int) -> list[KernelRow]:
    """Rows from (name, calls, self_time_s, where) over `steps` profiled calls; zero-time rows dropped."""
    rows: list[KernelRow] = []
    for name, calls, self_s, where in raw:
        if calls <= 0 and self_s <= 0:
            continue
        rows.append({"name": name, "family": family(name), "calls": int(calls), "self_time_s": float(self_s),
                     "where": where, "steps": steps})
    rows.sort(key=lambda r: -r["self_time_s"])
    return rows


def by_family(rows: list[dict[str, Any]], where: str | None = None) -> dict[str, dict[str, float]]:
    """Family -> {calls, time_s} per profiled step (only rows timed on `where`, when given)."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if where is not None and r["where"] != where:
            continue
        f = out.setdefault(r["family"], {"calls": 0.0, "time_s": 0.0})
        f["calls"] += r["calls"] / r["steps"]
        f["time_s"] += r["self_time_s"] / r["steps"]
    return out


def main_clock(rows: list[dict[str, Any]]) -> str | None:
    """`cuda` when the rows include device kernels (then they are the breakdown), else `cpu`."""
    if not rows:
        return None
    return "cuda" if any(r["where"] == "cuda" for r in rows) else "cpu"
