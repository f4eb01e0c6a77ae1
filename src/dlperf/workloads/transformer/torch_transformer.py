"""The transformer workload in PyTorch: an AdamW training step, a forward pass, or greedy generation.

- Weights `init_weights(cfg, 0)`, float32 (master weights under mixed precision); tokens and labels from
  `make_tokens`/`make_labels`, on the device before timing.
- Optimizer: `torch.optim.AdamW(lr, weight_decay, fused=True)` with torch's default betas (0.9, 0.999) and
  eps 1e-8. Fused: one kernel over all parameters, the implementation torch's docs call the fastest (on CPU
  too since 2.4); `zero_grad(set_to_none=True)`.
- Precision: fp32 is float32 throughout, and on CUDA float32 matmuls are set to IEEE (no TF32:
  `torch.backends.cuda.matmul.fp32_precision = "ieee"`, process-wide, and a worker runs one case). bf16/fp16:
  `torch.autocast` on cpu or cuda (matrix products in the low dtype, softmax/cross-entropy in float32);
  fp16 trains through `torch.amp.GradScaler` (dynamic loss scaling; on CPU as on CUDA, since fp16 gradients
  underflow alike). bf16 on a GPU without it, or low precision on another device type, is unsupported.
- Inference: `Step.predict(n)` runs the forward pass on the first n sequences and copies the logits to the
  host.
- Generation: `torch_model.generate_tokens` under inference_mode, with the KV cache (allocated by the first
  call, reused) or without; each call records {"ttft_s", "decode_s"} with the device synced when token 1 is
  chosen and at the end (`Step.call_phases`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.models.transformer import init_weights, make_labels, make_tokens
from dlperf.workloads.base import Step, check_predict_n
from dlperf.workloads.transformer import TransformerParams


def _low_dtype(torch: Any, dev_type: str, precision: str) -> Any:
    """The autocast dtype (None for fp32), or UnsupportedError with the reason."""
    if precision == "fp32":
        return None
    if dev_type not in ("cpu", "cuda"):
        raise UnsupportedError(f"{precision} autocast is not supported on {dev_type} by this builder")
    if dev_type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
        raise UnsupportedError(f"{torch.cuda.get_device_name()} has no native bfloat16")
    return torch.bfloat16 if precision == "bf16" else torch.float16


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    torch = fw.import_module()
    from dlperf.models.transformer import torch_model as tm

    cfg = p.config()
    dev_type = torch.device(device).type
    low = _low_dtype(torch, dev_type, p.precision)
    if dev_type == "cuda" and low is None:
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    model = tm.build(cfg, init_weights(cfg, 0), device=device)

    def autocast() -> Any:
        return torch.autocast(dev_type, dtype=low, enabled=low is not None)

    if p.task == "train":
        return _train(torch, model, p, device, autocast, low)
    if p.task == "infer":
        return _infer(torch, model, p, device, autocast)
    return _generate(torch, tm, model, p, device, autocast, fw.sync_fn(device))


def _train(torch: Any, model: Any, p: TransformerParams, device: str, autocast: Any, low: Any) -> Step:
    cfg = model.cfg
    assert p.seq_len is not None
    if cfg.kind == "decoder":
        toks = torch.as_tensor(make_tokens(cfg, p.batch, p.seq_len + 1), device=device)
        x, y = toks[:, :-1].contiguous(), toks[:, 1:].reshape(-1).contiguous()
    else:
        x = torch.as_tensor(make_tokens(cfg, p.batch, p.seq_len), device=device)
        y = torch.as_tensor(make_labels(cfg, p.batch), device=device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay, fused=True)
    scaler = torch.amp.GradScaler(torch.device(device).type) if low is torch.float16 else None
    cross_entropy = torch.nn.functional.cross_entropy
    last: list[Any] = [None]

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with autocast():
            out = model(x)
            loss = cross_entropy(out.reshape(-1, out.shape[-1]), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        last[0] = loss
        return loss

    return Step(step, lambda: np.array([float(last[0].detach())]) if last[0] is not None else np.array([]))


def _infer(torch: Any, model: Any, p: TransformerParams, device: str, autocast: Any) -> Step:
    assert p.seq_len is not None
    x = torch.as_tensor(make_tokens(model.cfg, p.batch, p.seq_len), device=device)
    last: list[Any] = [None]

    def step() -> Any:
        with torch.inference_mode(), autocast():
            last[0] = model(x)
        return last[0]

    def predict(n: int) -> Any:
        """The logits of the first n sequences, float32 on the host (the copy waits for the device)."""
        with torch.inference_mode(), autocast():
            return model(x[:check_predict_n(n, p.batch)]).float().cpu()

    return Step(step, lambda: _numpy(last[0]), predict=predict)


def _generate(torch: Any, tm: Any, model: Any, p: TransformerParams, device: str, autocast: Any,
              sync: Any) -> Step:
    assert p.prompt_len is not None and p.new_tokens is not None
    n = p.new_tokens
    prompt = torch.as_tensor(make_tokens(model.cfg, p.batch, p.prompt_len), device=device)
    buffer = torch.empty((p.batch, p.prompt_len + n), dtype=torch.int64, device=device)
    cache = tm.KVCache(p.prompt_len + n) if p.kv_cache else None
    phases: list[dict[str, float]] = []
    last: list[Any] = [None]
    first_s = [0.0]

    def on_first(_token: Any) -> None:
        sync()
        first_s[0] = time.perf_counter()

    def step() -> Any:
        start = time.perf_counter()
        with torch.inference_mode(), autocast():
            out = tm.generate_tokens(model, prompt, n, kv_cache=p.kv_cache, buffer=buffer, cache=cache,
                                     on_first=on_first)
        sync()
        end = time.perf_counter()
        phases.append({"ttft_s": first_s[0] - start, "decode_s": end - first_s[0]})
        last[0] = out
        return out

    return Step(step, lambda: _numpy(last[0]), call_phases=lambda: [dict(d) for d in phases])


def _numpy(t: Any) -> np.ndarray:
    """The step's last output as float64 NumPy (via float32 for a low-precision tensor, which NumPy lacks)."""
    if t is None:
        return np.array([])
    t = t.detach().cpu()
    return (t.float() if t.is_floating_point() else t).numpy().astype(np.float64)
