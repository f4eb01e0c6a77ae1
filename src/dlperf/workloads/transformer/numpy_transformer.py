"""The transformer in float32 NumPy (`models.transformer.numpy_model`): forward pass and greedy generation.

task `infer`: logits of `batch` x `seq_len` seeded tokens (decoder: every position; encoder: the classifier);
`Step.predict(n)`: the same for the first n sequences.
task `generate`: greedy decoding of `new_tokens` after a `prompt_len`-token prompt, with the KV cache or without;
each call records {"ttft_s", "decode_s"} (`Step.call_phases`, time.perf_counter: NumPy has no device to sync).
task `train` is unsupported: NumPy has no automatic differentiation. Precision: float32 only.
"""

from __future__ import annotations

import time

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.models.transformer import make_tokens
from dlperf.models.transformer import numpy_model as nm
from dlperf.workloads.base import Step, check_predict_n
from dlperf.workloads.transformer import TransformerParams


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    if p.task == "train":
        raise UnsupportedError("NumPy has no automatic differentiation: a training step needs gradients, which a "
                               "framework with autograd computes (torch, tensorflow, jax)")
    if p.precision != "fp32":
        raise UnsupportedError(f"NumPy runs the transformer in float32 only: precision {p.precision} is mixed "
                               "precision (autocast), which NumPy has not")
    cfg = p.config()
    model = nm.build(cfg, device=device)
    last: list[np.ndarray] = []

    if p.task == "infer":
        assert p.seq_len is not None
        tokens = make_tokens(cfg, p.batch, p.seq_len)

        def infer() -> np.ndarray:
            out = nm.logits(model, tokens)
            last[:] = [out]
            return out

        def predict(n: int) -> np.ndarray:
            return nm.logits(model, tokens[:check_predict_n(n, p.batch)])

        return Step(infer, lambda: np.asarray(last[0], dtype=np.float64), predict=predict)

    assert p.prompt_len is not None and p.new_tokens is not None
    prompt = make_tokens(cfg, p.batch, p.prompt_len)
    new_tokens, kv_cache = p.new_tokens, p.kv_cache
    # allocated once per case, outside the timed calls (as torch's and JAX's builders do), reused by every call
    cache = nm.new_cache(cfg, p.batch, p.prompt_len, new_tokens) if kv_cache else None
    phases: list[dict[str, float]] = []

    def generate() -> np.ndarray:
        first: list[float] = []
        t0 = time.perf_counter()
        out = nm.generate(model, prompt, new_tokens, kv_cache=kv_cache,
                          on_first_token=lambda: first.append(time.perf_counter()), cache=cache)
        t1 = time.perf_counter()
        phases.append({"ttft_s": first[0] - t0, "decode_s": t1 - first[0]})
        last[:] = [out]
        return out

    return Step(generate, lambda: np.asarray(last[0], dtype=np.float64), call_phases=lambda: list(phases))
