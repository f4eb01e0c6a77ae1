"""The model workload's training step (task train), shared by eager (`torch_model`) and the compiled variants
(`torch_compiled`): SGD (lr `LR`) in train mode on `loss(outputs, batch)`, the source's `loss` where it has one,
else `default_loss`; the forward is whatever callable the path runs (the module, or torch.compile of it: then
AOTAutograd compiles the backward, and the optimizer step stays eager).

A compiled training step is checked against eager's (`reference`, `judge_step`): from the same seeded weights and
inputs, one step of each (eager's on deep copies of the module, so the module itself is left as it was) must give
the same loss, the same gradients and the same updated weights, each within the gate's tolerance for the case's
precision (`gate.TOLERANCE`, relative to that tensor's own scale; fp32: 1e-4: another kernel order or fusion of
the same fp32 sums, as for a forward). Gradients are compared beside the weights because an SGD update at lr 1e-3
moves a weight by far less than the weight's own tolerance. Eager's step is run twice on two copies first: where
they differ (dropout, random ops), the step is `nondeterministic` and nothing is judged by comparison.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from dlperf.sources import Loaded
from dlperf.workloads.model import gate
from dlperf.workloads.model import prepare as prep

#: The SGD learning rate of every training step.
LR = 1e-3


def default_loss(torch: Any, out: Any, args: tuple[Any, ...], kwargs: dict[str, Any], vocab: int | None) -> Any:
    """The loss where the source gives none: a causal LM's next-token cross-entropy on its own input ids; a
    classifier's (a 2-D floating output, batch x classes) cross-entropy against seeded labels; otherwise the
    mean square of the first floating output (gradients reach every parameter that output depends on)."""
    first = next(t for t in prep.tensors(torch, out) if t.is_floating_point())
    ids = kwargs.get("input_ids", args[0] if args else None)
    if vocab is not None and first.ndim == 3 and ids is not None:
        return torch.nn.functional.cross_entropy(first[:, :-1].reshape(-1, first.shape[-1]).float(),
                                                 ids[:, 1:].reshape(-1))
    if first.ndim == 2 and first.shape[1] >= 2:
        labels = torch.randint(0, first.shape[1], (first.shape[0],), generator=torch.Generator().manual_seed(1))
        return torch.nn.functional.cross_entropy(first.float(), labels.to(first.device))
    return first.float().pow(2).mean()


def sgd_step(torch: Any, net: Any, loaded: Loaded, args: Any, kwargs: Any, dev_type: str,
             low: Any) -> Callable[[Any], Any]:
    """`run(forward)`: one SGD step of `net`'s parameters whose forward is `forward(*args, **kwargs)` (the module
    or a compiled callable of it); returns the loss. `net` is put in train mode."""
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    user_loss = loaded.loss
    batch = kwargs if kwargs else (args[0] if len(args) == 1 else args)

    def run(forward: Any) -> Any:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev_type, dtype=low, enabled=low is not None):
            out = forward(*args, **kwargs)
            loss = user_loss(out, batch) if user_loss else default_loss(torch, out, args, kwargs, loaded.vocab_size)
        loss.backward()
        opt.step()
        return loss

    return run


def state(torch: Any, net: Any, loss: Any) -> tuple[list[np.ndarray], list[str]]:
    """(the arrays, their names) after a step: the loss, each parameter's gradient (empty where it has none),
    then each parameter; what `judge_step` compares."""
    named = list(net.named_parameters())
    arrays = prep.as_numpy(torch, loss)
    arrays += [prep.as_numpy(torch, p.grad)[0] if p.grad is not None else np.array([]) for _, p in named]
    arrays += [prep.as_numpy(torch, p)[0] for _, p in named]
    return arrays, ["loss"] + [f"grad {n}" for n, _ in named] + [f"weight {n} after the step" for n, _ in named]


def reference(torch: Any, net: Any, loaded: Loaded, args: Any, kwargs: Any, dev_type: str,
              low: Any) -> tuple[list[np.ndarray], gate.Verdict | None, Any]:
    """(eager's state after one step from `net`'s weights, None or the `nondeterministic` verdict where two such
    steps disagree, the first step's copy of `net`, for counting FLOPs on); `net` is left as it was."""
    twins = [copy.deepcopy(net), copy.deepcopy(net)]
    (first, names), (second, _) = (state(torch, twin, sgd_step(torch, twin, loaded, args, kwargs, dev_type, low)(twin))
                                   for twin in twins)
    verdict = gate.self_check(first, second)
    if verdict is not None:
        verdict = verdict | {"reason": f"{names[verdict.get('output', 0)]}: eager's training step differs from "
                                       f"itself: {verdict['reason']}"}
    return first, verdict, twins[0]


def judge_step(torch: Any, net: Any, loss: Any, ref: list[np.ndarray], precision: str) -> gate.Verdict:
    """`pass` or `fail` of a compiled step's loss, gradients and updated weights against eager's (module doc);
    a failure names the tensor (`tensor`)."""
    arrays, names = state(torch, net, loss)
    verdict = gate.judge(arrays, ref, precision, logits=False)
    if "output" in verdict:  # the worst tensor (a failure: the one that failed), by name
        verdict |= {"tensor": names[verdict["output"]]}
        if verdict["status"] == "fail":
            verdict["reason"] = f"{names[verdict['output']]}: {verdict['reason']}"
    return verdict | {"compared": "the loss, gradients and updated weights of one step from eager's weights"}
