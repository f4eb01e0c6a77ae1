"""The correctness gate: a path's outputs on the fixed seeded inputs against the eager fp32 reference.

- The reference (torch, eager, fp32, eval mode) is run twice first. Where the two runs differ by more than
  `SELF_TOL` of the output's scale (dropout left in training mode, random ops in `forward`), the model is
  `nondeterministic` and no path is judged by comparison.
- Tolerance (`TOLERANCE`, by the path's precision) is relative to the output's scale, the largest |value| of the
  reference output: a path passes when max |out - ref| <= tol x scale for every output, and, for logits (a
  floating output of 2 or more dimensions whose last axis has 2 or more classes), when its top-1 class agrees
  with the reference's at every position where the reference's top two differ by more than that tolerance.
- The accuracy cost is recorded with the verdict: the largest error (`max_abs_err`, and `rel_err` of the scale)
  and, for the first logits-shaped output, `top1_agreement` (the share of all its positions whose top-1 class
  is the reference's, close calls included).
- Status: `pass`, `fail` (with the largest error, its output and index), `nondeterministic`, `reference` (the
  eager fp32 path itself) or `not checked` (with the reason).
"""

from __future__ import annotations

from typing import Literal, TypedDict

import numpy as np

#: Largest |error| allowed, as a fraction of the output's scale, per precision of the path. The reasons:
#: - fp32: another kernel order or fusion of the same fp32 products (a runtime, a compiler) differs by rounding only.
#: - fp16: 11 significant bits (about 5e-4 per rounding) kept through products with fp32 accumulation.
#: - bf16: 8 significant bits (about 4e-3 per rounding), accumulating over a few layers.
#: - int8: dynamic int8 rounds each weight to 1/255 of its tensor's (or channel's) range and each activation
#:   per call: about 1% of the scale per layer, accumulating over the layers (the shipped 3-layer MLP: 1-3%).
#:   A bound of 10% keeps a sum of such roundings and still catches a path that computes something else.
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2, "int8": 1e-1}
#: The reference against itself: more than this fraction of the scale apart is nondeterministic.
SELF_TOL = 1e-6

Status = Literal["pass", "fail", "nondeterministic", "reference", "not checked"]


class Verdict(TypedDict, total=False):
    """The gate's verdict, stored as a case's `correctness`: the status and its reason always, the rest where
    they apply (the tolerance and precision of a judged path, the largest error and where it is, the top-1
    agreement of the first logits-shaped output, the disagreeing positions of a top-1 failure)."""

    status: Status
    reason: str | None
    tolerance_rel: float
    precision: str
    rel_err: float
    max_abs_err: float
    output: int
    index: list[int]
    scale: float
    top1_agreement: float
    top1_output: int
    disagree: int
    positions: int
    # a training step's (`training.judge_step`): the worst tensor by name, and what was compared
    tensor: str
    compared: str


class _Top1(TypedDict):
    disagree: int
    positions: int
    agreement: float


def _scale(a: np.ndarray) -> float:
    return float(np.max(np.abs(a))) if a.size else 0.0


def self_check(first: list[np.ndarray], second: list[np.ndarray]) -> Verdict | None:
    """None when the reference's two runs agree; else the `nondeterministic` verdict with where they differ."""
    if len(first) != len(second):
        return {"status": "nondeterministic", "reason": "the reference's two runs returned different outputs"}
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        if a.shape != b.shape:
            return {"status": "nondeterministic", "reason": f"output {i}: shapes {a.shape} and {b.shape}"}
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        if err > SELF_TOL * max(_scale(a), 1e-30):
            return {"status": "nondeterministic", "max_abs_err": err, "output": i,
                    "reason": f"the eager fp32 reference differs from itself by {err:.3g} (output {i}, scale "
                              f"{_scale(a):.3g}): random ops in forward or a layer in training mode"}
    return None


def judge(outputs: list[np.ndarray], reference: list[np.ndarray], precision: str,
          logits: bool = True) -> Verdict:
    """`pass` or `fail` of a path's outputs against the reference's (see the module's rules); `logits=False`:
    no top-1 rule (the tensors are not outputs: a training step's gradients and weights, `training`)."""
    tol = TOLERANCE[precision]
    base: Verdict = {"tolerance_rel": tol, "precision": precision}
    if len(outputs) != len(reference):
        return base | {"status": "fail", "reason": f"{len(outputs)} outputs where the reference has "
                                                   f"{len(reference)}"}
    worst: Verdict = {"rel_err": 0.0}
    for i, (out, ref) in enumerate(zip(outputs, reference, strict=True)):
        if out.shape != ref.shape:
            return base | {"status": "fail", "output": i,
                           "reason": f"output {i} has shape {out.shape}, the reference {ref.shape}"}
        if not out.size:
            continue
        if not np.all(np.isfinite(out)):
            return base | {"status": "fail", "output": i, "reason": f"output {i} has non-finite values"}
        diff = np.abs(out - ref)
        idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
        scale = max(_scale(ref), 1e-30)
        rel = float(diff[idx]) / scale
        top = _top1(out, ref, tol * scale) if logits else None
        if top is not None and "top1_agreement" not in worst:
            worst["top1_agreement"], worst["top1_output"] = top["agreement"], i
        if rel > worst["rel_err"]:
            worst |= {"rel_err": rel, "max_abs_err": float(diff[idx]), "output": i, "index": [int(x) for x in idx],
                      "scale": scale}
        if rel > tol:
            return base | worst | {"status": "fail", "reason": f"output {i}: |error| {float(diff[idx]):.3g} at "
                                                              f"{list(map(int, idx))} = {rel:.2g} x scale > {tol:g}"}
        if top is not None and top["disagree"]:
            return base | worst | {"status": "fail", "output": i, "disagree": top["disagree"],
                                   "positions": top["positions"],
                                   "reason": f"output {i}: top-1 differs at {top['disagree']} of "
                                             f"{top['positions']} positions"}
    return base | worst | {"status": "pass", "reason": None}


def _top1(out: np.ndarray, ref: np.ndarray, margin: float) -> _Top1 | None:
    """Top-1 agreement of logits-shaped outputs where the reference's choice is clear (margin); else None."""
    if ref.ndim < 2 or ref.shape[-1] < 2:
        return None
    r = ref.reshape(-1, ref.shape[-1])
    o = out.reshape(-1, out.shape[-1])
    two = np.sort(r, axis=1)[:, -2:]
    clear = (two[:, 1] - two[:, 0]) > margin
    same = np.argmax(r, axis=1) == np.argmax(o, axis=1)
    return {"disagree": int(np.sum(~same & clear)), "positions": int(np.sum(clear)),
            "agreement": float(np.mean(same))}


def not_checked(reason: str) -> Verdict:
    return {"status": "not checked", "reason": reason}
