"""What one training step of a source holds and computes, counted on the eager module (for `dlperf recommend
--model SOURCE`'s estimates; nothing is timed).

`python -m dlperf.workloads.model.costs PARAMS_JSON` (a fresh process: a user's file runs here, transformers
offline) builds the source at each of `COUNT_BATCHES` on the CPU and runs one forward, the loss (the source's
`loss`, else `training.default_loss`) and one backward at each, in float32 (`amp`: bf16 autocast), and prints
one JSON line per batch:
- `flops`: torch's FlopCounterMode over the forward, loss and backward (null where counting fails);
- `params`, `params_bytes`: the module's parameters;
- `input_bytes`: the inputs' tensors;
- `saved_bytes`, `largest_saved_bytes`: what autograd keeps for the backward (`saved_tensors_hooks`), each
  storage once, parameters and inputs left out: the activations a training step holds at its peak.
`count` runs it from the parent and returns the lines, or a DlperfError with its one line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TypedDict

from dlperf.sources import SourceError
from dlperf.workloads.model import ModelParams
from dlperf.workloads.model.check import CHECK_TIMEOUT_S, OFFLINE, in_fresh_process
from dlperf.workloads.model.training import default_loss

#: Why an ONNX file gets no estimate (said before anything is read).
ONNX_REFUSAL = ("{source}: cannot estimate: an ONNX file has no training step, and dlperf counts FLOPs and saved "
                "activations on a torch module; measure it instead (dlperf bench, dlperf maxbatch)")
#: The batches counted; an estimate at another batch is the straight line through the first two, checked
#: against the third (`hardware.source_costs`).
COUNT_BATCHES = (1, 2, 4)


class StepCounts(TypedDict):
    """One JSON line of `main`: a training step's counts at `batch` (the module's doc says what each is)."""

    batch: int
    flops: float | None
    params: int
    params_bytes: int
    input_bytes: int
    saved_bytes: int
    largest_saved_bytes: int


def count(params: ModelParams, timeout_s: float = CHECK_TIMEOUT_S) -> list[dict[str, Any]]:
    """The counts at `COUNT_BATCHES`, one dict each, from a fresh process; DlperfError with its line if it fails."""
    out = in_fresh_process("dlperf.workloads.model.costs", params, "counting the source's costs", timeout_s)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def count_at(torch: Any, p: ModelParams) -> StepCounts:
    """One training step's counts at `p.batch` (see the module's doc)."""
    from torch.utils.flop_counter import FlopCounterMode

    from dlperf.workloads.model.prepare import param_count, prepare, tensors

    pr = prepare(torch, p, 0)
    net = pr.module.train()
    args, kwargs = pr.args, pr.kwargs
    keep_ptrs = {t.untyped_storage().data_ptr() for t in [*net.parameters(), *tensors(torch, (args, kwargs))]}
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in keep_ptrs and ptr != 0:
            saved[ptr] = max(saved.get(ptr, 0), storage.nbytes())
        return t

    batch = kwargs if kwargs else (args[0] if len(args) == 1 else args)
    counter = FlopCounterMode(display=False)
    with counter, torch.autocast("cpu", dtype=torch.bfloat16, enabled=p.precision == "bf16"):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = net(*args, **kwargs)
            loss = pr.loaded.loss(out, batch) if pr.loaded.loss else default_loss(torch, out, args, kwargs,
                                                                                   pr.loaded.vocab_size)
        loss.backward()
    try:
        flops: float | None = float(counter.get_total_flops())
    except Exception:
        flops = None
    return {"batch": p.batch, "flops": flops, "params": param_count(net),
            "params_bytes": int(sum(t.numel() * t.element_size() for t in net.parameters())),
            "input_bytes": int(sum(t.numel() * t.element_size() for t in tensors(torch, (args, kwargs)))),
            "saved_bytes": int(sum(saved.values())), "largest_saved_bytes": int(max(saved.values(), default=0))}


def main(argv: list[str]) -> int:
    os.environ.update(OFFLINE)
    p = ModelParams.model_validate_json(argv[1])
    try:
        if p.source.endswith(".onnx"):
            raise SourceError(ONNX_REFUSAL.format(source=p.source))
        import torch

        torch.manual_seed(0)
        for batch in COUNT_BATCHES:
            print(json.dumps(count_at(torch, p.model_copy(update={"batch": batch, "task": "train"}))), flush=True)
    except SourceError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"{p.source}: counting a training step raised "
              f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
