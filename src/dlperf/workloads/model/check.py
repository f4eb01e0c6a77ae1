"""`python -m dlperf.workloads.model.check PARAMS_JSON`: what `dlperf bench` decides before anything is measured.

In a fresh process (a user's file runs here, as in a worker; transformers offline): load the source, check the
task, build its inputs at batch 1 and run one forward pass, whose output must hold a tensor, and for task train
the module a parameter to update (`check_step`); a --seq must change an input's shape. A FILE.onnx: task infer,
its declared inputs bound, the reference run where onnxruntime is installed. Exit 0, or 2 with one line on stderr
saying why. `preflight` starts it from a command (`dlperf bench`, `dlperf maxbatch SOURCE`) before any store is
opened.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from dlperf.errors import DlperfError
from dlperf.sources import SourceError
from dlperf.workloads.model import ModelParams
from dlperf.workloads.model import prepare as prep

#: Seconds the check may take (an hf: model is built once there).
CHECK_TIMEOUT_S = 600
#: The environment of every process that may import transformers: the hub offline, nothing downloaded.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def in_fresh_process(module: str, params: ModelParams, doing: str, timeout_s: float) -> str:
    """`python -m MODULE PARAMS_JSON` with the hub offline; its stdout, or DlperfError with the last line it
    wrote to stderr (`doing` names the work in the time-out's and a silent failure's message)."""
    try:
        done = subprocess.run([sys.executable, "-m", module, params.model_dump_json()],
                              capture_output=True, text=True, timeout=timeout_s, env=os.environ | OFFLINE)
    except subprocess.TimeoutExpired:
        raise DlperfError(f"{doing} took over {timeout_s:g} s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise DlperfError(lines[-1] if lines else f"{doing} failed (exit {done.returncode})")
    return done.stdout


def preflight(params: ModelParams, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Load the source and run one forward pass at batch 1 in a fresh process; DlperfError with its line if not."""
    in_fresh_process("dlperf.workloads.model.check", params, "loading the source", timeout_s)


def main(argv: list[str]) -> int:
    os.environ.update(OFFLINE)
    try:
        p = ModelParams.model_validate_json(argv[1]).model_copy(update={"batch": 1})
        if p.source.endswith(".onnx"):
            return check_onnx(p)
        import torch

        pr = prep.prepare(torch, p, 0)
        check_context(p, pr.module)
        try:
            with torch.inference_mode():
                out = pr.module.eval()(*pr.args, **pr.kwargs)
        except Exception as exc:
            raise SourceError(f"{p.source}: the model rejects its inputs: {type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:200]}") from None
        check_step(p, prep.tensors(torch, out), type(out).__name__, pr.module, pr.loaded.loss is not None)
        if p.seq is not None and p.task != "generate":  # a length the inputs ignore would only mislabel the run
            other = p.model_copy(update={"seq": p.seq - 1 if p.seq > 1 else p.seq + 1})
            if shapes(torch, prep.inputs(torch, other, pr.loaded)) == shapes(torch, (pr.args, pr.kwargs)):
                raise SourceError(f"{p.source}: --seq {p.seq} changes none of its inputs (S in an --input, a token "
                                  "model's sequence): leave it out, or the run is labelled with a length it did "
                                  "not use")
    except SourceError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 2
    return 0


def context_length(module: Any) -> int | None:
    """The positions a causal language model takes (a Hugging Face config's, or dlperf's transformer's), or None
    where the module does not say (dlperf's own wrap theirs as `.model`)."""
    for m in (module, getattr(module, "model", None)):
        cfg = getattr(m, "config", None) or getattr(m, "cfg", None)
        for key in ("max_position_embeddings", "n_positions", "max_positions"):
            value = getattr(cfg, key, None)
            if isinstance(value, int) and value > 0:
                return value
    return None


def check_context(p: ModelParams, module: Any) -> None:
    """SourceError where a generate case's prompt and new tokens need more positions than the model has (its
    forward would fail with an index error in the position embedding, or read past its context)."""
    if p.task != "generate":
        return
    prompt_len, new = p.generation()
    context = context_length(module)
    if context is not None and prompt_len + new > context:
        raise SourceError(f"{p.source}: a prompt of {prompt_len} tokens and {new} new ones need {prompt_len + new} "
                          f"positions, over the model's context of {context} (--prompt-len, --new-tokens)")


def shapes(torch: Any, inputs: tuple[tuple[Any, ...], dict[str, Any]]) -> list[tuple[int, ...]]:
    """The shapes of every tensor among a call's (args, kwargs), in order."""
    args, kwargs = inputs
    return [tuple(t.shape) for t in prep.tensors(torch, [*args, *kwargs.values()])]


def check_step(p: ModelParams, outputs: list[Any], returned: str, module: Any, own_loss: bool) -> None:
    """SourceError where the forward's `outputs` (its tensors) cannot make the task's step: none at all (no path
    could be checked against it, and a runtime's export has nothing to return), or for task train no parameter to
    update (the optimizer's bare ValueError in every case) or no floating output for the default loss."""
    if not outputs:
        raise SourceError(f"{p.source}: its forward returned {returned}, no tensor (return a tensor, or a tuple, "
                          "list or dict of them): there is nothing to check its paths against")
    if p.task != "train":
        return
    if not any(q.requires_grad for q in module.parameters()):
        raise SourceError(f"{p.source}: task train needs parameters to update, and the model has none that "
                          "require grad (bench it with --task infer)")
    if not own_loss and not any(t.is_floating_point() for t in outputs):
        raise SourceError(f"{p.source}: task train's default loss needs a floating output and its forward "
                          "returned none (define loss(outputs, batch) beside the model)")


def check_onnx(p: ModelParams) -> int:
    """A FILE.onnx source: task infer, its declared inputs bound at batch 1, the reference run once."""
    from dlperf.workloads.model import onnx_file

    if p.task != "infer":
        raise SourceError(f"{p.source}: an ONNX file runs task infer, not {p.task}")
    _, _, refs, meta = onnx_file.prepared(p, 0)
    if refs() is None and meta.get("not_checked") != onnx_file.NO_ONNXRUNTIME:  # a graph onnxruntime cannot run
        raise SourceError(f"{p.source}: {meta.get('not_checked')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
