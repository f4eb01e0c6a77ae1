"""Inference across frameworks and runtimes (the `inference` study): the cnn and transformer `task: infer` cases.

Per model, one row per framework or runtime, device, precision and batch size: the latency of one inference call
(a batch) as the median of the timed calls with the 95% interval of the median (order statistics; repetitions
pooled), the latency over PyTorch's at the same device, precision and batch, throughput in the workload's samples
(images/s for a cnn, tokens/s for the transformer) from the median, and the memory the inference took: the
worker's peak RSS above the framework's own footprint measured before the step was built (`peak_rss_bytes -
baseline_rss_bytes`; the largest over repetitions), and the device allocator's peak where one was measured, with
its source. Cases that did not run keep their row with their status and reason. A plot per model draws latency
against batch size.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TypedDict

from dlperf.core.result import CaseResult
from dlperf.report.plots.serving import latency_batch_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.timing import Measurement
from dlperf.timing.stats import median_ci, quantile
from dlperf.units import MISSING, format_mib, format_rate, format_time

#: The study whose report this is (the registry draws it for a run of this study; the cnn report leaves its
#: inference cases to it there).
STUDY = "inference"
WORKLOADS = ("cnn", "transformer")
#: The framework whose latency the others are set against.
BASELINE = "torch"
MEMORY_NOTE = ("memory: host = the worker's peak RSS above its RSS before the step was built (the framework's own "
               "footprint left out; the largest over repetitions); device = the device allocator's peak where a "
               "meter read one, with its source")


def infer_results(results: list[CaseResult], workloads: tuple[str, ...] = WORKLOADS) -> list[CaseResult]:
    """The inference cases (`task: infer`) of the given workloads."""
    return [r for r in results if r.workload in workloads and r.params.get("task") == "infer"]


def model_label(r: CaseResult) -> str:
    """The model and its input shape: 'cnn resnet18 224px', 'transformer gpt2-tiny T=64'."""
    p = r.params
    if r.workload == "transformer":
        return f"transformer {p.get('model')} T={p.get('seq_len') or MISSING}"
    size = p.get("image_size")
    if size is None:
        from dlperf.workloads.cnn import CnnParams

        try:
            size = CnnParams.model_validate(p).size()
        except (ValueError, KeyError):  # parameters this version does not know: the size stays unnamed
            size = None
    return f"{r.workload} {p.get('model')}" + (f" {size}px" if size else "")


def sample_unit(workload: str) -> str:
    """What the workload's samples are (image, token), from the workload itself."""
    from dlperf.workloads import REGISTRY

    cls = REGISTRY.get(workload)
    return str(cls.sample_unit) if cls is not None else "sample"


Key = tuple[str, str, str, str, int]  # framework, device, precision, model label, batch


def grouped(results: list[CaseResult]) -> dict[str, dict[tuple[str, str, str, int], list[CaseResult]]]:
    """Per model label: (framework, device, precision, batch) -> the case's repetitions."""
    by: dict[str, dict[tuple[str, str, str, int], list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        key = (r.framework, r.device, str(r.params.get("precision", "fp32")), int(r.params.get("batch") or 1))
        by[model_label(r)][key].append(r)
    return {m: dict(sorted(cases.items())) for m, cases in sorted(by.items())}


class Latency(TypedDict):
    """A case's median latency per call over its pooled timed calls, the median's 95% interval (None where the
    calls are too few), the calls, and the samples per call (None where the workload did not record it)."""

    median_s: float
    low_s: float | None
    high_s: float | None
    n: int
    samples: int | None


def latency(rs: list[CaseResult]) -> Latency | None:
    """Median latency per call over the ok repetitions' timed calls pooled, its 95% interval, the calls, the
    samples per call; None where no repetition ran."""
    ok = [r for r in rs if r.ok and r.measurement]
    times = sorted(t for r in ok for t in Measurement.from_dict(r.measurement or {}).times_s)
    if not times:
        return None
    ci = median_ci(times)
    return {"median_s": quantile(times, 0.5), "low_s": ci[0] if ci else None, "high_s": ci[1] if ci else None,
            "n": len(times), "samples": ok[0].m.samples_per_call}


def failure_mark(notes: list[str], label: str, rs: list[CaseResult], measured: bool) -> str:
    """A case's failed repetitions as a numbered note appended to `notes` ("[k] LABEL: n of m repetitions STATUS:
    reason", the count only where some repetition was `measured`), and its mark for the table cell ("" where none
    failed)."""
    failed = [r for r in rs if not r.ok]
    if not failed:
        return ""
    notes.append(f"[{len(notes) + 1}] {label}: " + (f"{len(failed)} of {len(rs)} repetitions " if measured else "")
                 + f"{failed[0].status}: {failed[0].reason or 'no reason stored'}")
    return f" [{len(notes)}]"


def memory_cells(rs: list[CaseResult]) -> tuple[str, str]:
    """(host memory above the framework's baseline, device peak with its source), the largest over repetitions."""
    ok = [r for r in rs if r.ok]
    host = [int(r.m.peak_rss_bytes) - int(r.m.baseline_rss_bytes) for r in ok
            if r.m.peak_rss_bytes is not None and r.m.baseline_rss_bytes is not None]
    if host:
        host_cell = format_mib(max(host))
    elif any(r.m.peak_rss_bytes is not None for r in ok):
        host_cell = f"{MISSING} (baseline RSS not recorded)"
    else:
        host_cell = f"{MISSING} (not measured)"
    dev = [r for r in ok if r.m.peak_device_mem_bytes]
    if dev:
        top = max(dev, key=lambda r: int(r.m.peak_device_mem_bytes or 0))
        source = top.m.peak_device_mem_source or "source not stored"
        device_cell = f"{format_mib(top.m.peak_device_mem_bytes)} ({source})"
    else:
        device_cell = MISSING if all(r.device == "cpu" for r in rs) else f"{MISSING} (not measured)"
    return host_cell, device_cell


def _interval(lat: Latency) -> str:
    """The median's 95% interval, "20.6-20.9 ms" where both ends share a unit."""
    if lat["low_s"] is None or lat["high_s"] is None:
        return f"{MISSING} (n < 6)"
    low, high = format_time(lat["low_s"]), format_time(lat["high_s"])
    low_num, _, low_unit = low.partition(" ")
    high_num, _, high_unit = high.partition(" ")
    return f"{low_num}-{high_num} {low_unit}" if low_unit == high_unit else f"{low} - {high}"


#: Under every table: what "vs torch" is.
RATIO_NOTE = (f"vs {BASELINE}: the median over {BASELINE}'s at the same device, precision and batch "
              f"(\"{MISSING}\": no {BASELINE} case there)")


def model_table(model: str, cases: dict[tuple[str, str, str, int], list[CaseResult]]) -> list[Section]:
    """The model's table (narrow enough for a 120-column terminal: short headers, the device memory column only
    where a case ran off the CPU, the host memory column wrapped) and, under it, why a case has no latency: its
    cell says `- [n]` and note [n] gives the status and reason."""
    unit = sample_unit(next(iter(cases.values()))[0].workload)
    on_device = any(r.device != "cpu" for rs in cases.values() for r in rs)
    header = (["framework", "device", "precision", "batch", "median", "95% interval", f"vs {BASELINE}", "calls",
               f"{unit}s/s", "host memory (above baseline)"] + (["device memory"] if on_device else []))
    medians = {k: lat["median_s"] for k, rs in cases.items() if (lat := latency(rs))}
    rows, notes = [], []
    for (fw, dev, prec, batch), rs in cases.items():
        lat = latency(rs)
        host, device = memory_cells(rs)
        mark = failure_mark(notes, f"{fw} {dev} {prec} batch {batch}", rs, lat is not None)
        if lat is None:
            rows.append([fw, dev, prec, str(batch), f"{MISSING}{mark}", MISSING, MISSING, MISSING, MISSING, host]
                        + ([device] if on_device else []))
            continue
        base = medians.get((BASELINE, dev, prec, batch))
        ratio = f"{lat['median_s'] / base:.2f}x" if base else MISSING
        samples = lat["samples"]
        rate = format_rate(samples / lat["median_s"]) if samples and lat["median_s"] > 0 else MISSING
        rows.append([fw, dev, prec, str(batch), format_time(lat["median_s"]) + mark, _interval(lat), ratio,
                     str(lat["n"]), rate, host] + ([device] if on_device else []))
    table = Table(f"inference {model}: latency per call, {unit}s/s and memory per framework/runtime and batch",
                  header, rows, heading=f"## Inference: {model}", text_cols=(9,))
    return [table, *(Note(n) for n in notes)]


def plot_panels(groups: dict[str, dict[tuple[str, str, str, int], list[CaseResult]]]
                ) -> dict[str, list[tuple[str, list[tuple[int, float, float | None, float | None]]]]]:
    """Per model: a line per framework/device/precision of (batch, median, 95% low, 95% high)."""
    panels: dict[str, list[tuple[str, list[tuple[int, float, float | None, float | None]]]]] = {}
    for model, cases in groups.items():
        lines: dict[str, list[tuple[int, float, float | None, float | None]]] = defaultdict(list)
        for (fw, dev, prec, batch), rs in cases.items():
            lat = latency(rs)
            if lat:
                lines[f"{fw} {dev}" + ("" if prec == "fp32" else f" {prec}")].append(
                    (batch, lat["median_s"], lat["low_s"], lat["high_s"]))
        panels[model] = sorted(lines.items())
    return panels


def sections_for(data: ReportData, workloads: tuple[str, ...] = WORKLOADS) -> list[Section]:
    """The inference sections over the run's `task: infer` cases of `workloads` (nothing where it has none)."""
    groups = grouped(infer_results(data.results, workloads))
    if not groups:
        return []
    out: list[Section] = [Heading("## Inference across frameworks and runtimes",
                                  "Latency of one inference call (a batch) on each framework and runtime: the median "
                                  "of the timed calls with its 95% interval (repetitions pooled), over PyTorch's at "
                                  "the same device, precision and batch; throughput from the median.")]
    out += [s for model, cases in groups.items() for s in model_table(model, cases)]
    out.append(Note(MEMORY_NOTE, markdown=MEMORY_NOTE[0].upper() + MEMORY_NOTE[1:] + "."))
    out.append(Note(RATIO_NOTE))
    present = [w for w in workloads if any(r.workload == w for r in infer_results(data.results, workloads))]
    paths = latency_batch_plot(plot_panels(groups), data.plot_dir, stem="inference-latency-per-batch-"
                               + "-".join(present))
    if paths:
        out.append(Figure(paths, "inference latency per call against batch size, per model and framework/runtime",
                          heading="## Inference latency against batch size"))
    return out


def sections(data: ReportData) -> list[Section]:
    """The `inference` study's report: every cnn and transformer inference case of the run."""
    return sections_for(data, WORKLOADS)
