"""Phases inside each call of a step (`Step.call_phases`): which calls were timed, and generation's figures.

A generate step records, per call, {"ttft_s": call start until the first new token is known on the host,
"decode_s": the rest of the call}. The worker keeps the raw phases (`split_calls`: the first call apart, the
timed calls in order, one per sample in per-call mode) and `CaseResult.from_row` computes the figures below
from them on every load (`generation_metrics`), never trusting stored ones:

- TTFT (time to first token): p50/p90/p99 with their distribution-free 95% intervals (`timing.stats`), max
  and mean over the timed calls;
- TPOT (time per output token) = decode_s / (new_tokens - 1): the same summary; None with one new token
  (no decode step), the reason stored;
- decode tokens/s = batch x (new_tokens - 1) / decode_s per call, the median over calls with its 95% interval;
- the first call's TTFT and TPOT apart (compilation, caches, allocations happen there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from dlperf.timing.stats import median_ci, quantile, tail_keys, tail_summary

#: Every key `generation_metrics` sets (Metrics declares them).
GENERATION_KEYS = (tail_keys("ttft_") + tail_keys("tpot_")
                   + ["decode_tokens_per_s", "decode_tokens_per_s_ci95_low", "decode_tokens_per_s_ci95_high",
                      "first_call_ttft_s", "first_call_tpot_s", "tpot_reason"])


#: A generation figure: seconds or tokens/s (None: not defined for these calls), or `tpot_reason`'s text.
GenerationValue = float | str | None


class CallPhases(TypedDict, total=False):
    """`split_calls`'s answer: the first call's phases and the timed calls' in order, or, where the calls recorded
    do not match the timer's, only why none were mapped."""

    first_call_phases: dict[str, float]
    call_phases: list[dict[str, float]]
    call_phases_error: str


def split_calls(phases: Sequence[dict[str, float]], warmup_calls: int, timed_calls: int) -> CallPhases:
    """The first call's phases and the timed calls', from every call's phases in call order.

    The timer made 1 (first) + `warmup_calls` (warm-up, calibration, discarded samples: the Measurement's
    `warmup_iters`) + `timed_calls` (`total_iters`) calls, in that order, and the timed ones are the last.
    Any other count means someone else called the step too: nothing is mapped then (an error is stored, a
    phase is never given to the wrong call).
    """
    expected = 1 + warmup_calls + timed_calls
    if len(phases) != expected:
        return {"call_phases_error": f"the step recorded {len(phases)} calls' phases, the timer made {expected} "
                                     f"calls (1 first, {warmup_calls} warm-up, {timed_calls} timed): not mapped"}
    return {"first_call_phases": dict(phases[0]),
            "call_phases": [dict(p) for p in phases[len(phases) - timed_calls:]]}


def generation_metrics(first: dict[str, float] | None, calls: Sequence[dict[str, float]] | None,
                       batch: int, new_tokens: int | None) -> dict[str, GenerationValue]:
    """TTFT, TPOT and decode tokens/s of a generation's timed calls (see the module); {} where the calls have no
    `ttft_s` (a step that is not a generation)."""
    if not calls or any("ttft_s" not in c for c in calls):
        return {}
    out: dict[str, GenerationValue] = dict.fromkeys(GENERATION_KEYS)
    out |= tail_summary([c["ttft_s"] for c in calls], "ttft_")
    out["first_call_ttft_s"] = first.get("ttft_s") if first else None
    decode_steps = (new_tokens or 1) - 1
    if decode_steps < 1:
        out["tpot_reason"] = "one new token: the prefill makes it, there is no decode step"
        return out
    if any("decode_s" not in c for c in calls):
        out["tpot_reason"] = "the step recorded no decode_s"
        return out
    out |= tail_summary([c["decode_s"] / decode_steps for c in calls], "tpot_")
    if first and "decode_s" in first:
        out["first_call_tpot_s"] = first["decode_s"] / decode_steps
    rates = sorted(batch * decode_steps / c["decode_s"] for c in calls if c["decode_s"] > 0)
    if rates:
        ci = median_ci(rates)
        out["decode_tokens_per_s"] = quantile(rates, 0.5)
        out["decode_tokens_per_s_ci95_low"], out["decode_tokens_per_s_ci95_high"] = ci if ci else (None, None)
    return out
