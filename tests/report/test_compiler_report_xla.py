"""The compiler variants' report on TensorFlow's and JAX's variants (synthetic stored results): each framework's
variants against its own eager, an XLA mode's cold compile read from its first call and its warm one said to be a
cache hit or not, JAX's eager saying why it has no warm compile, and an unchecked path shown as `not checked`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from dlperf.core.result import CaseResult, Metrics
from dlperf.report.compiler_report import group_table, grouped
from dlperf.report.sections import Note, Table
from dlperf.units import MISSING
from dlperf.workloads.xla_compile import COLD, COLD_NO_CACHE, NOJIT


def result(framework: str, variant: str, scale_s: float, seed: int, *, first_call_s: float = 0.001,
           compile_record: dict[str, Any] | None = None, gate: str = "pass") -> CaseResult:
    now = datetime.now(UTC)
    times = list(scale_s * np.random.default_rng(seed).lognormal(0.0, 0.03, 300))
    extra: dict[str, Any] = {"correctness": {"status": gate, "reason": "not ported" if gate != "pass" else None}}
    if compile_record:
        extra["compile"] = compile_record
    metrics = Metrics(first_call_s=first_call_s, peak_rss_bytes=200 * 2**20, baseline_rss_bytes=100 * 2**20,
                      **extra)
    return CaseResult(run_id="r", case_key=f"model/{framework}/cpu/variant={variant}", repetition=seed,
                      workload="model", framework=framework, device="cpu",
                      params={"source": "dlperf:mlp-small", "batch": 8, "variant": variant}, status="ok",
                      reason=None, measurement={"sample_times_s": times, "sample_iters": [1] * len(times)},
                      metrics=metrics, env_id=1, started_at=now, finished_at=now)


def tables(results: list[CaseResult]) -> dict[str, tuple[dict[str, list[str]], list[str]]]:
    """framework -> (variant -> row, notes)."""
    out = {}
    for group, variants in grouped(results).items():
        sections = group_table(group, variants)
        table = next(s for s in sections if isinstance(s, Table))
        out[group[1]] = ({r[0]: r for r in table.rows}, [s.text for s in sections if isinstance(s, Note)])
    return out


def test_tensorflow_and_jax_variants_against_their_own_eager_with_xla_compile_times() -> None:
    xla = {"mode": "tensorflow-xla", "cold": COLD, "cache": "XLA's", "warm_s": 0.5, "warm_hit": True}
    jit = {"mode": "jax", "cold": COLD, "cache": "JAX's", "warm_s": 0.2, "warm_hit": False}
    nojit = {"mode": "jax-nojit", "cold": COLD_NO_CACHE, "cache": "none", "no_warm": NOJIT}
    got = tables([result("tensorflow", "eager", 4e-3, 1), result("tensorflow", "graph", 2e-3, 2),
                  result("tensorflow", "xla", 1e-3, 3, first_call_s=2.0, compile_record=xla),
                  result("jax", "eager", 8e-3, 4, first_call_s=0.3, compile_record=nojit),
                  result("jax", "jit", 1e-3, 5, first_call_s=1.0, compile_record=jit, gate="not checked")])
    tf_rows, _ = got["tensorflow"]
    assert tf_rows["eager"][3] == "reference"
    assert abs(float(tf_rows["graph"][3].split("x")[0]) - 2.0) < 0.05
    assert abs(float(tf_rows["xla"][3].split("x")[0]) - 4.0) < 0.1  # over tensorflow's eager, not torch's
    assert tf_rows["xla"][4] == "2 s" and tf_rows["xla"][5] == "500 ms (cache hit)"
    assert tf_rows["graph"][4] == MISSING and tf_rows["graph"][5] == MISSING  # a tf.function: no compile record
    jax_rows, notes = got["jax"]
    assert jax_rows["eager"][3] == "reference" and jax_rows["eager"][4] == "300 ms" and jax_rows["eager"][5] == MISSING
    assert any(n.startswith("eager: no warm compile: jax-nojit compiles no step") for n in notes)
    assert jax_rows["jit"][5] == "200 ms (no cache hit)"
    assert jax_rows["jit"][-1] == "not checked" and any(n == "jit: not checked: not ported" for n in notes)
