"""The `transformer` study's report: training and inference tokens/s with MFU, generation's TTFT and TPOT tails,
and the KV cache's effect.

- Throughput (train, infer): tokens/s from the median step time, with the 95% interval of the median (the
  order-statistic one, over the per-call times of every repetition of the case pooled); TFLOP/s by the cost
  model's convention (`models.transformer.cost`); MFU = FLOP/s / the device's theoretical peak for the dtype
  the matrix products ran in (`TransformerParams.dtype`: bf16 autocast against the bf16 peak), the peak's source
  named. Where the environment has no peak for that dtype the MFU is not shown and the table says so: never a
  guess. On a CPU whose run used fewer threads than it has cores, the peak is the used cores' share (as the
  roofline's ceilings are).
- Generation: TTFT and TPOT p50/p90/p99 (each with its 95% interval where the calls are enough) and max, decode
  tokens/s (median over calls), the first call's TTFT apart; from the raw per-call phases (`core.phases`),
  repetitions pooled.
- The KV-cache effect: TPOT without the cache over TPOT with it, other parameters equal.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dlperf.core.environment import Environment
from dlperf.core.phases import generation_metrics
from dlperf.core.result import CaseResult
from dlperf.hardware.peaks import flop_peak
from dlperf.hardware.roofline import cpu_share, device_theoretical
from dlperf.report import transformer_memory
from dlperf.report.plots.transformer import latency_percentiles_plot, throughput_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.timing import Measurement
from dlperf.timing.stats import median_ci, quantile
from dlperf.units import MISSING, format_pct, format_rate, format_time
from dlperf.workloads.transformer import PRECISION_DTYPE, TASK_DEFAULTS

#: The short names `hardware.peaks` keys its per-dtype sources by.
_DTYPE_SHORT = {"float64": "fp64", "bfloat16": "bf16", "float16": "fp16", "int8": "int8"}


def peak_for(env: Environment, device: str, dtype: str, threads: int | None = None) -> tuple[float | None, str]:
    """(FLOP/s, where it comes from) of `device` for `dtype` in the run's environment; (None, why) without one.

    On a CPU the peak is the share of the cores the case's own threads use (`threads`, the framework's count as
    the worker recorded it); a framework that does not control its thread count (JAX's XLA pool takes every
    core) records none and is held against the whole CPU."""
    theo = device_theoretical(env, device)
    peak = flop_peak(theo, dtype)
    if not peak:
        return None, f"no {dtype} peak for {device} here"
    source = str(theo.get("peaks_source") or "theoretical, derived on this machine")
    # What the figure rests on (measured, assumed or derived), where the environment says.
    basis = (theo.get("fp32_basis") if dtype == "float32" else
             (theo.get("dtype_peaks_source") or {}).get(_DTYPE_SHORT.get(dtype, dtype)))
    source += f"; {basis}" if basis else ""
    peak, share = cpu_share(peak, env, device, threads)
    source += f"; {share}" if share else ""
    return peak, f"{dtype} {peak / 1e12:.3g} TFLOP/s ({source})"


#: Parameters the key names in its own fields; any other (a shape override, a non-default optimizer setting)
#: goes into the model's label, so cases that differ in it are never pooled into one row.
_NAMED = frozenset({"task", "model", "precision", "seq_len", "batch", "prompt_len", "new_tokens", "kv_cache"})
_DEFAULTS = {key: default for key, (_, default) in TASK_DEFAULTS.items()}


def model_label(p: dict[str, Any]) -> str:
    """The preset's name, followed by what the case changes of it or of the training defaults."""
    extra = [f"{k}={v}" for k, v in sorted(p.items())
             if k not in _NAMED and v is not None and _DEFAULTS.get(k, object()) != v]
    return " ".join([str(p.get("model")), *extra])


def _key(r: CaseResult) -> tuple[Any, ...]:
    p = r.params
    return (p.get("task"), r.framework, r.device, model_label(p), p.get("precision", "fp32"), p.get("seq_len") or 0,
            p.get("batch", 1), p.get("prompt_len") or 0, p.get("new_tokens") or 0, bool(p.get("kv_cache", True)))


def _pooled(results: list[CaseResult]) -> dict[tuple[Any, ...], list[CaseResult]]:
    """Ok results of the transformer workload by case (repetitions together)."""
    by: dict[tuple[Any, ...], list[CaseResult]] = defaultdict(list)
    for r in results:
        if r.workload == "transformer" and r.ok and r.measurement:
            by[_key(r)].append(r)
    return dict(sorted(by.items(), key=lambda kv: tuple(str(x) for x in kv[0][:5]) + kv[0][5:]))


def throughput(rs: list[CaseResult]) -> dict[str, float | None]:
    """Tokens/s and FLOP/s at the median per-call time of the pooled repetitions, with the interval of tokens/s."""
    times = sorted(t for r in rs for t in Measurement.from_dict(r.measurement or {}).times_s)
    median = quantile(times, 0.5)
    tokens, flops = rs[0].m.samples_per_call, rs[0].m.flops_per_call
    ci = median_ci(times)
    rate = (lambda t: tokens / t if tokens and t > 0 else None)
    return {"tokens_per_s": rate(median), "low": rate(ci[1]) if ci else None, "high": rate(ci[0]) if ci else None,
            "flops_per_s": flops / median if flops and median > 0 else None, "n": float(len(times))}


def throughput_rows(data: ReportData) -> tuple[list[str], list[list[str]], list[str]]:
    """Train and infer rows, and the peak sources used (one line each)."""
    header = ["task", "framework", "device", "model", "precision", "seq_len", "batch", "tokens/s", "95% interval",
              "FLOP/s", "MFU", "calls"]
    rows, sources = [], []
    for k, rs in _pooled(data.results).items():
        task, fw, dev, model, prec, seq, batch = k[:7]
        if task not in ("train", "infer"):
            continue
        t = throughput(rs)
        dtype = PRECISION_DTYPE.get(prec, prec)
        peak, source = peak_for(data.env, dev, dtype, rs[0].m.threads)
        if source not in sources:
            sources.append(source)
        if peak is None:
            mfu = f"- ({source})"
        else:
            mfu = format_pct(t["flops_per_s"] / peak, ".1f") if t["flops_per_s"] else MISSING
            if t["flops_per_s"] and t["flops_per_s"] > peak:  # impossible against a true peak: said, not hidden
                mfu += " (above the peak: the peak is too low)"
        interval = (f"{format_rate(t['low'])}-{format_rate(t['high'])}" if t["low"] and t["high"]
                    else "- (n < 6)")
        rows.append([task, fw, dev, model, prec, str(seq), str(batch), format_rate(t["tokens_per_s"]), interval,
                     format_rate(t["flops_per_s"]), mfu, str(int(t["n"] or 0))])
    return header, rows, sources


def generation(rs: list[CaseResult]) -> dict[str, Any]:
    """Generation's figures over the pooled repetitions' timed calls (the first call: the first repetition's)."""
    calls = [c for r in rs for c in (r.m.call_phases or [])]
    p = rs[0].params
    return generation_metrics(rs[0].m.first_call_phases, calls, int(p.get("batch") or 1), p.get("new_tokens")) | {
        "calls": len(calls)}


def _ci(g: dict[str, Any], name: str) -> str:
    """'p [low, high]' (the unit once where all three share it), or 'p [n too small]' where the calls are too few
    for a 95% interval."""
    v, lo, hi = g.get(f"{name}_s"), g.get(f"{name}_ci95_low_s"), g.get(f"{name}_ci95_high_s")
    if v is None:
        return MISSING
    if lo is None or hi is None:
        return f"{format_time(v)} [n too small]"
    texts = [format_time(x) for x in (v, lo, hi)]
    units = {t.rpartition(" ")[2] for t in texts}
    if len(units) == 1:
        return f"{texts[0]} [{texts[1].rpartition(' ')[0]}, {texts[2].rpartition(' ')[0]}]"
    return f"{texts[0]} [{texts[1]}, {texts[2]}]"


def _rate_ci(g: dict[str, Any], name: str) -> str:
    """'rate [low, high]' (the median over calls and its 95% interval), or 'rate [n too small]'."""
    v, lo, hi = g.get(name), g.get(f"{name}_ci95_low"), g.get(f"{name}_ci95_high")
    if v is None:
        return MISSING
    interval = f"{format_rate(lo)}, {format_rate(hi)}" if lo is not None and hi is not None else "n too small"
    return f"{format_rate(v)} [{interval}]"


def _case(k: tuple[Any, ...]) -> str:
    """A generation case in one cell: model, precision, batch, prompt, new tokens, cache."""
    _, _, _, model, prec, _, batch, prompt, new, cache = k
    return f"{model} {prec} b={batch} prompt={prompt} new={new} {'cache' if cache else 'no cache'}"


def generation_rows(data: ReportData) -> tuple[list[list[str]], list[list[str]], list[tuple[str, dict[str, Any]]]]:
    """TTFT rows, TPOT rows (framework, device, case, percentiles ...), and the plot's (label, figures)."""
    ttft, tpot, plotted = [], [], []
    for k, rs in _pooled(data.results).items():
        if k[0] != "generate":
            continue
        g = generation(rs)
        if not g.get("ttft_p50_s"):
            continue
        fw, dev, case = k[1], k[2], _case(k)
        ttft.append([fw, dev, case, _ci(g, "ttft_p50"), _ci(g, "ttft_p90"), _ci(g, "ttft_p99"),
                     format_time(g["ttft_max_s"]), format_time(g["ttft_mean_s"]), format_time(g["first_call_ttft_s"]),
                     str(g["calls"])])
        tpot.append([fw, dev, case, _ci(g, "tpot_p50"), _ci(g, "tpot_p90"), _ci(g, "tpot_p99"),
                     format_time(g["tpot_max_s"]), format_time(g["tpot_mean_s"]),
                     _rate_ci(g, "decode_tokens_per_s"), format_time(g["first_call_tpot_s"])])
        plotted.append((f"{fw} {dev} {case}", g))
    return ttft, tpot, plotted


TTFT_HEADER = ["framework", "device", "case", "TTFT p50", "TTFT p90", "TTFT p99", "max", "mean", "first call",
               "calls"]
TPOT_HEADER = ["framework", "device", "case", "TPOT p50", "TPOT p90", "TPOT p99", "max", "mean", "decode tokens/s",
               "first call"]


def kv_cache_rows(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """TPOT without the cache over TPOT with it (p50), other parameters equal; and decode tokens/s both ways."""
    header = ["framework", "device", "model", "precision", "batch", "prompt", "new", "TPOT p50 without cache",
              "TPOT p50 with cache", "without / with", "decode tokens/s without", "decode tokens/s with"]
    gens = {k: generation(rs) for k, rs in _pooled(data.results).items() if k[0] == "generate"}
    rows = []
    for k, with_cache in gens.items():
        if not k[-1]:
            continue
        without = gens.get(k[:-1] + (False,))
        if without is None or not with_cache.get("tpot_p50_s") or not without.get("tpot_p50_s"):
            continue
        _, fw, dev, model, prec, _, batch, prompt, new, _ = k
        rows.append([fw, dev, model, prec, str(batch), str(prompt), str(new), format_time(without["tpot_p50_s"]),
                     format_time(with_cache["tpot_p50_s"]), f"{without['tpot_p50_s'] / with_cache['tpot_p50_s']:.2f}x",
                     format_rate(without["decode_tokens_per_s"]), format_rate(with_cache["decode_tokens_per_s"])])
    return header, rows


def plot_panels(data: ReportData) -> dict[str, list[tuple[str, list[tuple[int, float]]]]]:
    """Per task, a line per (framework, device, model, precision, seq_len): (batch, tokens/s)."""
    lines: dict[str, dict[str, list[tuple[int, float]]]] = {"train": defaultdict(list), "infer": defaultdict(list)}
    for k, rs in _pooled(data.results).items():
        task, fw, dev, model, prec, seq, batch = k[:7]
        if task in lines:
            rate = throughput(rs)["tokens_per_s"]
            if rate:
                lines[task][f"{fw} {dev} {model} {prec} T={seq}"].append((batch, rate))
    return {task: sorted(by.items()) for task, by in lines.items()}


def not_ok_note(data: ReportData) -> list[Section]:
    """One line per framework whose transformer cases did not all run: how many, and the first reason."""
    by: dict[tuple[str, str], list[CaseResult]] = defaultdict(list)
    for r in data.of("transformer"):
        if not r.ok:
            by[(r.framework, r.status)].append(r)
    return [Note(f"{fw}: {len(rs)} transformer case(s) {status} ({rs[0].reason or 'no reason stored'})")
            for (fw, status), rs in sorted(by.items())]


def sections(data: ReportData) -> list[Section]:
    if not data.of("transformer"):
        return []
    out: list[Section] = [Heading("## Transformer: training and inference throughput",
                                  "Tokens/s from the median step time with the 95% interval of the median; MFU is "
                                  "the cost model's FLOP/s (matrix products, 2 per multiply-add, backward = 2x "
                                  "forward) over the device's theoretical peak for the dtype of the products.")]
    header, rows, sources = throughput_rows(data)
    if rows:
        out.append(Table("transformer: tokens/s and MFU (train, infer)", header, rows))
        out += [Note(f"MFU peak: {s}") for s in sources]
    ttft, tpot, plotted = generation_rows(data)
    if ttft:
        out.append(Table("transformer generation: time to first token per call (p50/p90/p99 [95% interval])",
                         TTFT_HEADER, ttft, heading="## Transformer: generation latency",
                         intro="Each call timed alone; TTFT = until the first new token is on the host, TPOT = the "
                               "rest of the call / (new tokens - 1). The first call (compilation, caches) is apart; "
                               "[n too small]: too few calls for a 95% interval (p99 needs 368)."))
        out.append(Table("transformer generation: time per output token (p50/p90/p99 [95% interval])", TPOT_HEADER,
                         tpot))
    header, rows = kv_cache_rows(data)
    if rows:
        out.append(Table("transformer generation: the KV cache's effect (same other parameters)", header, rows,
                         heading="## The KV cache's effect"))
    out += not_ok_note(data)
    paths = throughput_plot(plot_panels(data), data.plot_dir)
    if paths:
        out.append(Figure(paths, "transformer tokens/s against batch, per sequence length and framework",
                          heading="## Tokens/s against batch"))
    paths = latency_percentiles_plot(plotted, data.plot_dir)
    if paths:
        out.append(Figure(paths, "generation TTFT and TPOT percentiles per framework",
                          heading="## TTFT and TPOT percentiles"))
    return out + transformer_memory.sections(data)
