"""The model workload in PyTorch: the source's module, eager, on the device; it is also the reference path.

- Weights: the source's own initialisation after `torch.manual_seed(seed)` (seed 0: the seed the runtimes'
  export uses too); inputs seeded (`sources.inputs`), made on the device before timing.
- infer: `module(*args, **kwargs)` under `torch.inference_mode` in eval mode (bf16, fp16: autocast; int8: the
  module's dynamically quantized copy, `quantized.torch_int8`); the output stays
  on the device, as a framework's forward leaves it.
- train: SGD (lr 1e-3) step in train mode on `loss(outputs, batch)`: the source's `loss` where it has one, else
  `training.default_loss` (`training.sgd_step`, which the compiled variants run too).
- generate (causal LMs): greedy, with the KV cache; a transformers model through its `generate` (a streamer
  marks the first token), dlperf's decoders through `torch_model.generate_tokens`; each call records its TTFT and
  decode time (`Step.call_phases`).
- FLOPs per call: FlopCounterMode over one untimed call; the reference: the fp32 eager forward run twice on the
  same inputs before timing (`gate`).
- A compiler variant (`p.variant` other than eager) is built by `torch_compiled` from the same module, inputs
  and reference (task train: eager's step, `training.reference`).
"""

from __future__ import annotations

import time
from typing import Any

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams, gate, quantized, torch_compiled, training
from dlperf.workloads.model import prepare as prep
from dlperf.workloads.model.gate import Verdict
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.step import ModelStep, first_output


def case_seed(fw: Framework) -> int:
    value = fw.seed_value()
    return 0 if value is None else int(value)


def build(fw: Framework, device: str, p: ModelParams) -> Step:
    if p.source.endswith(".onnx"):
        raise UnsupportedError(f"{p.source}: an ONNX file runs on onnxruntime and openvino, not in torch")
    torch = fw.import_module()
    dev_type = torch.device(device).type
    if p.precision == "bf16" and dev_type not in ("cpu", "cuda"):
        raise UnsupportedError(f"bf16 autocast is not run on {dev_type}")
    quantized.check_device(p, dev_type)
    quantized.check_task(p)
    if p.variant != "eager":  # what this variant cannot run here, said before anything is built
        torch_compiled.check(p, dev_type, torch)
        if p.precision == "int8":
            raise UnsupportedError(f"variant {p.variant} with int8: dlperf compiles the float module only (torch's "
                                   "dynamically quantized Linear is eager's int8 path)")
    if dev_type == "cuda":
        torch.backends.cuda.matmul.fp32_precision = "ieee"  # the reference is fp32: no TF32
    pr = prep.prepare(torch, p, case_seed(fw))
    net = pr.module.to(device)
    args, kwargs = prep.to_device(torch, pr.args, device), prep.to_device(torch, pr.kwargs, device)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p.precision)
    path = [net]  # what the timed path runs: the module, or its int8 copy

    def forward(autocast: bool) -> Any:
        with torch.inference_mode(), torch.autocast(dev_type, dtype=low, enabled=autocast and low is not None):
            return (path[0] if autocast else net)(*args, **kwargs)

    net.eval()
    first = prep.as_numpy(torch, forward(False))
    second = prep.as_numpy(torch, forward(False))
    verdict = gate.self_check(first, second)
    info: ModelInfo = {"param_count": prep.param_count(net), "source": p.source,
                            "model_info": pr.loaded.info, "mfu_dtype": p.dtype}
    if p.variant != "eager":  # a compiler's: its FLOPs counted on the eager forward (train: step), as every path's
        if p.task == "infer":
            info["flops_per_call"] = prep.count_flops(torch, lambda: forward(True))
        return torch_compiled.build(torch, fw, device, p, net, pr.loaded, args, kwargs, first, verdict, info,
                                    case_seed(fw))
    if p.precision == "int8":
        path[0], done = quantized.torch_int8(torch, net)
        info |= done
    if p.task == "infer":
        last: list[Any] = [None]

        def step() -> Any:
            last[0] = forward(True)
            return last[0]

        def checked() -> Verdict:
            if verdict is not None:
                return verdict
            if p.precision == "fp32":
                return {"status": "reference", "reason": "the eager fp32 path is the reference (its two runs agree)"}
            return gate.judge(prep.as_numpy(torch, forward(True)), first, p.precision)

        # FLOPs of the eager module (FlopCounterMode counts no quantized kernel): the same figure on every path
        info["flops_per_call"] = prep.count_flops(torch, step if p.precision != "int8" else lambda: forward(False))
        return ModelStep(step, lambda: first_output(torch, last[0]), info=info | {"gate": checked})
    if p.task == "train":
        return _train(torch, net, pr, args, kwargs, p, dev_type, low, info, verdict)
    return _generate(torch, fw, net, pr, args, kwargs, p, info, verdict)


def _train(torch: Any, net: Any, pr: Any, args: Any, kwargs: Any, p: ModelParams, dev_type: str, low: Any,
           info: ModelInfo, verdict: Verdict | None) -> Step:
    run = training.sgd_step(torch, net, pr.loaded, args, kwargs, dev_type, low)
    last: list[Any] = [None]

    def step() -> Any:
        last[0] = run(net)
        return last[0]

    info["loss"] = "the source's loss(outputs, batch)" if pr.loaded.loss else "default_loss"
    info["flops_per_call"] = prep.count_flops(torch, step)
    why = verdict or gate.not_checked("a training step changes the weights; its forward is checked by the "
                                      "infer task, a compiled step against this one")
    return ModelStep(step, lambda: first_output(torch, last[0]), info=info | {"gate": lambda: why})


def _generate(torch: Any, fw: Framework, net: Any, pr: Any, args: Any, kwargs: Any, p: ModelParams,
              info: ModelInfo, verdict: Verdict | None) -> Step:
    prompt_len, new = p.generation()
    vocab = pr.loaded.vocab_size or 2
    device = next(net.parameters()).device
    prompt = torch.randint(0, vocab, (p.batch, prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    sync = fw.sync_fn(str(device))
    phases: list[dict[str, float]] = []
    first_s = [0.0]
    last: list[Any] = [None]

    def on_first(_token: Any = None) -> None:
        sync()
        first_s[0] = time.perf_counter()

    call = _hf_generate(net, prompt, new, on_first) if hasattr(net, "generation_config") else \
        _dlperf_generate(net, prompt, new, on_first)

    def step() -> Any:
        start = time.perf_counter()
        with torch.inference_mode():
            out = call()
        sync()
        end = time.perf_counter()
        phases.append({"ttft_s": first_s[0] - start, "decode_s": end - first_s[0]})
        last[0] = out
        return out

    info["flops_per_call"] = prep.count_flops(torch, step)
    phases.clear()
    why = verdict or {"status": "reference", "reason": "the eager fp32 path is the reference (its two runs agree)"}
    return ModelStep(step, lambda: first_output(torch, last[0]), call_phases=lambda: [dict(d) for d in phases],
                     info=info | {"gate": lambda: why, "prompt_len": prompt_len, "new_tokens": new})


def _hf_generate(net: Any, prompt: Any, new: int, on_first: Any) -> Any:
    class Marks:
        """A transformers streamer: `put` is called with the prompt, then with each new token."""

        calls = 0

        def put(self, value: Any) -> None:
            Marks.calls += 1
            if Marks.calls == 2:
                on_first()

        def end(self) -> None:
            return None

    def call() -> Any:
        Marks.calls = 0
        return net.generate(prompt, attention_mask=prompt.new_ones(prompt.shape), max_new_tokens=new,
                            min_new_tokens=new, do_sample=False, use_cache=True, streamer=Marks(),
                            pad_token_id=0)
    return call


def _dlperf_generate(net: Any, prompt: Any, new: int, on_first: Any) -> Any:
    from dlperf.models.transformer import torch_model as tm

    model = net.model
    buffer = prompt.new_empty((prompt.shape[0], prompt.shape[1] + new))
    cache = tm.KVCache(prompt.shape[1] + new)
    return lambda: tm.generate_tokens(model, prompt, new, kv_cache=True, buffer=buffer, cache=cache,
                                      on_first=on_first)
