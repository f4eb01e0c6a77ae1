"""The `cnn` study's report (study 001): seconds per image against batch size (Figure 1), the
largest batch that fits, and the kernel-family table (Table 1).

Peak memory is the worker's peak RSS on a CPU and the allocator's peak on a GPU,
as measured; the kernel table shows calls and self time per training step.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from dlperf.profiling.kernels import FAMILY_ORDER, by_family, main_clock
from dlperf.report.plots import save_figure
from dlperf.report.tables import markdown_table, rich_table
from dlperf.runner.derive import peak_memory
from dlperf.timing import format_time

Series = tuple[str, str, str, int, str]  # model, framework, device, image size, precision


def _series(r: dict[str, Any]) -> Series:
    from dlperf.workloads.cnn import CnnParams

    p = CnnParams.model_validate(r["params"])
    return (p.model, r["framework"], r["device"], p.size(), p.precision)


def _label(s: Series) -> str:
    model, fw, dev, size, prec = s
    return f"{model} {fw} {dev} {size}px" + ("" if prec == "fp32" else f" {prec}")


def _mib(n: int | None) -> str:
    return f"{n / 2**20:,.0f} MiB" if n else "-"


def cnn_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["workload"] == "cnn"]


def time_rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "framework", "device", "image", "batch", "status", "time/step", "IQR", "s/image", "images/s",
              "GFLOP/s", "peak memory"]
    rows = []
    for r in sorted(cnn_results(results), key=lambda r: (_series(r), r["params"]["batch"])):
        s = _series(r)
        mem, _ = peak_memory(r)
        if r["status"] == "ok":
            m = r["metrics"]
            rows.append([s[0], s[1], s[2], str(s[3]), str(r["params"]["batch"]), "ok", format_time(m["median_s"]),
                         f"{m['iqr_rel']:.1%}", f"{m['time_per_sample_s']:.3g}", f"{m['samples_per_s']:.3g}",
                         f"{m['flops_per_s'] / 1e9:.3g}", _mib(mem)])
        else:
            rows.append([s[0], s[1], s[2], str(s[3]), str(r["params"]["batch"]), r["status"], "-", "-", "-", "-", "-",
                         _mib(mem)])
    return header, rows


def largest_batch_rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "framework", "device", "image", "largest batch that ran", "peak memory there",
              "first out-of-memory batch"]
    by: dict[Series, list[dict[str, Any]]] = defaultdict(list)
    for r in cnn_results(results):
        by[_series(r)].append(r)
    rows = []
    for s in sorted(by):
        ok = [r for r in by[s] if r["status"] == "ok"]
        oom = [r["params"]["batch"] for r in by[s] if r["status"] == "oom"]
        best = max(ok, key=lambda r: r["params"]["batch"]) if ok else None
        rows.append([s[0], s[1], s[2], str(s[3]), str(best["params"]["batch"]) if best else "none",
                     _mib(peak_memory(best)[0]) if best else "-",
                     str(min(oom)) if oom else "none (all batches ran)"])
    return header, rows


def kernel_tables(results: list[dict[str, Any]]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per model: family x (framework, device) calls and self time per step, at the largest profiled batch."""
    profiled: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in cnn_results(results):
        if r["status"] != "ok" or not (r["metrics"] or {}).get("kernels"):
            continue
        s = _series(r)
        key = (s[0], s[1], s[2])
        if key not in profiled or r["params"]["batch"] > profiled[key]["params"]["batch"]:
            profiled[key] = r
    tables = []
    for model in sorted({k[0] for k in profiled}):
        cols = sorted(k for k in profiled if k[0] == model)
        fams = {k: by_family(profiled[k]["metrics"]["kernels"], main_clock(profiled[k]["metrics"]["kernels"]))
                for k in cols}
        header = ["kernel family"]
        for k in cols:
            clock = main_clock(profiled[k]["metrics"]["kernels"])
            what = "kernels" if clock == "cuda" else "ops"
            header += [f"{k[1]} {k[2]} calls ({what})", f"{k[1]} {k[2]} time/step"]
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
        batches = ", ".join(f"{k[1]} {k[2]} batch {profiled[k]['params']['batch']}" for k in cols)
        tables.append((f"{model}: kernel families per training step ({batches})", header, rows))
    return tables


def time_per_image_plot(results: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Figure 1 of study 001: seconds per image against batch size, log-log, a line per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by: dict[Series, list[tuple[int, float]]] = defaultdict(list)
    for r in cnn_results(results):
        if r["status"] == "ok":
            by[_series(r)].append((r["params"]["batch"], r["metrics"]["time_per_sample_s"]))
    if not by:
        return []
    fig, ax = plt.subplots(figsize=(9, 6))
    for s in sorted(by):
        merged: dict[int, list[float]] = defaultdict(list)  # median over repetitions at each batch
        for b, t in by[s]:
            merged[b].append(t)
        xs = sorted(merged)
        ax.plot(xs, [statistics.median(merged[b]) for b in xs], "-" if s[2] == "cpu" else "--", marker="o",
                label=_label(s))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (images per step)")
    ax.set_ylabel("seconds per image (training step / batch)")
    ax.set_title("CNN training: time per image against batch size (study 001, Figure 1)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, "cnn-time-per-image")


def _plot(results: list[dict[str, Any]], plot_dir: Path | None) -> list[Path]:
    if plot_dir is None:
        return []
    try:
        return time_per_image_plot(results, plot_dir)
    except OSError as exc:
        from dlperf.errors import DlperfError

        raise DlperfError(f"{plot_dir}: cannot write plots ({exc.strerror})") from None


def render_terminal(results: list[dict[str, Any]], console: Console, plot_dir: Path | None = None) -> None:
    if not cnn_results(results):
        return
    header, rows = time_rows(results)
    console.print(rich_table("study 001 layout: training step time per image", header, rows))
    header, rows = largest_batch_rows(results)
    console.print(rich_table("largest batch (this run's batches; `dlperf maxbatch` searches between them)",
                             header, rows))
    tables = kernel_tables(results)
    for title, header, rows in tables:
        console.print(rich_table(title, header, rows))
    if not tables:
        console.print("kernel table: no case was profiled (run with --profile)", highlight=False)
    for p in _plot(results, plot_dir):
        console.print(escape(f"plot: {p}"), highlight=False)


def render_markdown(results: list[dict[str, Any]], plot_dir: Path | None = None, rel_to: Path | None = None) -> str:
    if not cnn_results(results):
        return ""
    out = ["", "## Study 001 layout: training time per image", ""]
    for p in _plot(results, plot_dir):
        if p.suffix == ".png":
            try:
                shown = p.resolve().relative_to((rel_to or Path.cwd()).resolve())
            except ValueError:
                shown = p.resolve()
            out += [f"![seconds per image against batch size]({shown})", ""]
    header, rows = time_rows(results)
    out.append(markdown_table(header, rows))
    header, rows = largest_batch_rows(results)
    out += ["## Largest batch", "", markdown_table(header, rows)]
    for title, header, rows in kernel_tables(results):
        out += [f"## {title}", "", markdown_table(header, rows)]
    return "\n".join(out)
