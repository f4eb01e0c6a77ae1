"""The `cnn` study's report (study 001): seconds per image against batch size (Figure 1), the
largest batch that fits, and the kernel-family table (Table 1).

Peak memory is the worker's peak RSS on a CPU and the allocator's peak on a GPU,
as measured; the kernel table shows calls and self time per training step. The
precision (fp32 or amp) is a column of every table and part of every key: a study
that runs both shows both, never one in place of the other.

These are training figures: an inference case (`task: infer`, a forward pass) is never shown as a training
step. The inference cases are `inference_report`'s (latency per batch, throughput, memory per framework and
runtime): drawn here, or by the `inference` study's own report in a run of that study.
"""

from __future__ import annotations

from collections import defaultdict

from dlperf.core.result import CaseResult
from dlperf.profiling.kernels import FAMILY_ORDER, by_family, main_clock
from dlperf.report import inference_report
from dlperf.report.paper_cnn import FIGURE1_NOTE, study001_sections, study004_sections
from dlperf.report.plots.cnn import time_per_image_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.timing import format_time
from dlperf.units import MISSING, format_iqr, format_mib, format_number

Series = tuple[str, str, str, int, str]  # model, framework, device, image size, precision


def _series(r: CaseResult) -> Series:
    from dlperf.workloads.cnn import CnnParams

    p = CnnParams.model_validate(r.params)
    return (p.model, r.framework, r.device, p.size(), p.precision)


def series_label(s: Series) -> str:
    model, fw, dev, size, prec = s
    return f"{model} {fw} {dev} {size}px" + ("" if prec == "fp32" else f" {prec}")


def is_training(r: CaseResult) -> bool:
    """A training case (the cnn workload's default task); inference cases are reported apart."""
    return r.params.get("task", "train") == "train"


def cnn_results(results: list[CaseResult]) -> list[CaseResult]:
    """The cnn training cases (every table and plot here is of training steps)."""
    return [r for r in results if r.workload == "cnn" and is_training(r)]


def time_rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "framework", "device", "image", "precision", "batch", "status", "time/step", "IQR", "s/image",
              "images/s", "GFLOP/s", "peak memory"]
    rows = []
    for r in sorted(cnn_results(results), key=lambda r: (_series(r), r.params["batch"])):
        s = _series(r)
        mem, _ = r.peak_memory()
        if r.ok:
            m = r.m
            rows.append([s[0], s[1], s[2], str(s[3]), s[4], str(r.params["batch"]), "ok", format_time(m.median_s),
                         format_iqr(m.iqr_rel), format_number(m.time_per_sample_s), format_number(m.samples_per_s),
                         format_number(m.flops_per_s, scale=1e9), format_mib(mem or None)])
        else:
            rows.append([s[0], s[1], s[2], str(s[3]), s[4], str(r.params["batch"]), r.status, "-", "-", "-", "-", "-",
                         format_mib(mem or None)])
    return header, rows


def largest_batch_rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "framework", "device", "image", "precision", "largest batch that ran", "peak memory there",
              "first out-of-memory batch"]
    by: dict[Series, list[CaseResult]] = defaultdict(list)
    for r in cnn_results(results):
        by[_series(r)].append(r)
    rows = []
    for s in sorted(by):
        ok = [r for r in by[s] if r.ok]
        oom = [r.params["batch"] for r in by[s] if r.status == "oom"]
        best = max(ok, key=lambda r: r.params["batch"]) if ok else None
        rows.append([s[0], s[1], s[2], str(s[3]), s[4], str(best.params["batch"]) if best else "none",
                     format_mib(best.peak_memory()[0] or None) if best else MISSING,
                     str(min(oom)) if oom else "none (all batches ran)"])
    return header, rows


def kernel_tables(results: list[CaseResult]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per model: family x (framework, device, precision) calls and self time per step, at the largest profiled
    batch."""
    profiled: dict[tuple[str, str, str, str], CaseResult] = {}
    for r in cnn_results(results):
        if not r.ok or not r.m.kernels:
            continue
        s = _series(r)
        key = (s[0], s[1], s[2], s[4])
        if key not in profiled or r.params["batch"] > profiled[key].params["batch"]:
            profiled[key] = r
    tables = []
    for model in sorted({k[0] for k in profiled}):
        cols = sorted(k for k in profiled if k[0] == model)
        kernels = {k: profiled[k].m.kernels or [] for k in cols}
        fams = {k: by_family(kernels[k], main_clock(kernels[k])) for k in cols}
        header = ["kernel family"]
        for k in cols:
            clock = main_clock(kernels[k])
            what = "kernels" if clock == "cuda" else "ops"
            header += [f"{k[1]} {k[2]} {k[3]} calls ({what})", f"{k[1]} {k[2]} {k[3]} time/step"]
        totals = {k: sum(v["time_s"] for v in fams[k].values()) or 1.0 for k in cols}
        rows = []
        for fam in FAMILY_ORDER:
            if not any(fam in fams[k] for k in cols):
                continue
            row = [fam]
            for k in cols:
                f = fams[k].get(fam)
                row += [f"{f['calls']:.0f}", f"{format_time(f['time_s'])} ({f['time_s'] / totals[k]:.0%})"] if f else \
                    ["-", "-"]
            rows.append(row)
        batches = ", ".join(f"{k[1]} {k[2]} {k[3]} batch {profiled[k].params['batch']}" for k in cols)
        tables.append((f"{model}: kernel families per training step ({batches})", header, rows))
    return tables


def plot_series(results: list[CaseResult]) -> list[tuple[str, list[tuple[int, float]], bool]]:
    """Figure 1's lines: (label, [(batch, seconds per image)], solid for a CPU), in series order."""
    by: dict[Series, list[tuple[int, float]]] = defaultdict(list)
    for r in cnn_results(results):
        if r.ok and r.m.time_per_sample_s is not None:
            by[_series(r)].append((r.params["batch"], r.m.time_per_sample_s))
    return [(series_label(s), by[s], s[2] == "cpu") for s in sorted(by)]


def sections(data: ReportData) -> list[Section]:
    """Study 001's layout over the training cases: time per image (table and Figure 1), the largest batch, the
    kernel families; then the inference cases (unless the run's study is `inference`, whose report has them)."""
    out = training_sections(data)
    if data.run.study != inference_report.STUDY:
        out += inference_report.sections_for(data, ("cnn",))
    return out


def training_sections(data: ReportData) -> list[Section]:
    training = cnn_results(data.results)
    if not training:
        return []
    paths = time_per_image_plot(plot_series(training), data.plot_dir)
    alt = "this run: seconds per image against batch size"
    # Markdown shows Figure 1 under the heading; the terminal names its files last.
    out: list[Section] = [Heading("## Study 001 layout: training time per image"),
                          Figure(paths, alt, only="markdown")]
    if paths:
        out.append(Note(FIGURE1_NOTE, markdown="S" + FIGURE1_NOTE[1:] + ".", terminal=False))
    header, rows = time_rows(training)
    out.append(Table("study 001 layout: training step time per image", header, rows))
    header, rows = largest_batch_rows(training)
    out.append(Table("largest batch (this run's batches; `dlperf maxbatch` searches between them)", header, rows,
                     heading="## Largest batch"))
    tables = kernel_tables(training)
    out += [Table(title, header, rows, heading=f"## {title}") for title, header, rows in tables]
    if not tables:
        out.append(Note("kernel table: no case was profiled (run with --profile)", markdown=""))
    out.append(Figure(paths, alt, only="terminal"))
    out += study001_sections(training)
    out += study004_sections(training)
    return out
