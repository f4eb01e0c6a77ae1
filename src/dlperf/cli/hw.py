"""`dlperf hw`: the hardware catalog (list, show, compare), study 004's figures against it (diff-study), and
the efficiency measured on hardware the user has (measured)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import click

from dlperf.cli.options import FiniteFloatRange, db_option, new_console, open_store
from dlperf.errors import DlperfError
from dlperf.units import MISSING, UNKNOWN, format_figure, format_iqr

if TYPE_CHECKING:
    from dlperf.hardware.measured import CnnRow

TDP_HELP = "this machine's TDP in W where no meter measured and the catalog has none (labelled as TDP)"
PRICE_HELP = "this machine's price in USD where the catalog has none (labelled as given)"
SORTABLE = ("name", "vendor", "kind", "process_nm", "transistors_millions", "memory_gb", "memory_bw_gbs",
            "peak_fp32_tflops", "peak_fp16_tflops", "peak_int8_tops", "tdp_w", "launch_year", "launch_price_usd",
            "gflops_per_w", "gflops_per_usd")


def _figure(field: str, value: Any) -> str:
    """A catalog figure as `hw` prints it: a year plain (2017, never 2,017), the rest by `format_figure`."""
    return format_figure(value, ".0f") if field == "launch_year" else format_figure(value)


def _sort_value(d: Any, key: str) -> Any:
    v = d.efficiency()[key] if key in ("gflops_per_w", "gflops_per_usd") else getattr(d, key)
    return None if v == "unknown" else v


def _find(name: str) -> Any:
    from dlperf.hardware.catalog import find

    try:
        return find(name)
    except KeyError as exc:
        raise DlperfError(exc.args[0]) from None


def _host(url: str) -> str:
    """A source's site, for narrow tables (`hw show` prints whole addresses)."""
    from urllib.parse import urlparse

    host = urlparse(url).netloc
    return host.removeprefix("www.") if host else url


@click.group()
def hw() -> None:
    """The hardware catalog: vendors' figures with sources, FLOP/s per watt and per dollar."""


@hw.command("list")
@click.option("--kind", type=click.Choice(["cpu", "gpu", "soc", "accelerator"]), default=None, help="only this kind")
@click.option("--sort", "sort_key", type=click.Choice(SORTABLE), default="name", show_default=True)
@click.option("--desc", is_flag=True, help="largest first")
def hw_list(kind: str | None, sort_key: str, desc: bool) -> None:
    """Every catalog device (datasheet figures; ? = unknown; sorted, unknowns last)."""
    from dlperf.hardware.catalog import catalog
    from dlperf.report.sections import rich_table

    devices = [d for d in catalog() if kind is None or d.kind == kind]
    known = sorted((d for d in devices if _sort_value(d, sort_key) is not None),
                   key=lambda d: _sort_value(d, sort_key), reverse=desc)
    devices = known + [d for d in devices if _sort_value(d, sort_key) is None]
    header = ["id", "kind", "year", "nm", "memory GB", "GB/s", "FP32 TFLOP/s", "FP16 TFLOP/s", "INT8 TOP/s",
              "at clock", "TDP W", "price USD", "GFLOP/s per W", "GFLOP/s per $"]
    rows = [[d.id, d.kind, format_figure(d.launch_year, ".0f"), format_figure(d.process_nm),
             format_figure(d.memory_gb), format_figure(d.memory_bw_gbs), format_figure(d.peak_fp32_tflops),
             format_figure(d.peak_fp16_tflops), format_figure(d.peak_int8_tops),
             d.peak_clock + ("" if d.peak_clock_mhz == "unknown" else f" {format_figure(d.peak_clock_mhz)} MHz"),
             format_figure(d.tdp_w),
             format_figure(d.launch_price_usd, ",.0f"), format_figure(d.efficiency()["gflops_per_w"], ".3g"),
             format_figure(d.efficiency()["gflops_per_usd"], ".3g")] for d in devices]
    new_console().print(rich_table(f"hardware catalog: {len(rows)} devices (datasheet figures, peaks at the vendor's "
                                "rated boost clock; `dlperf hw show ID` for sources)", header, rows))


def _detail(d: Any, title: str, console: Any) -> None:
    """A device's figures (with [n] marking each one's source) and the numbered sources under the table."""
    from dlperf.hardware.catalog import FIGURES, TEXT
    from dlperf.report.sections import rich_table

    sources: list[str] = []

    def ref(field: str) -> str:
        src = d.source(field)
        if src not in sources:
            sources.append(src)
        return f"[{sources.index(src) + 1}]"

    rows = [["name", d.name, ""], ["aliases", ", ".join(d.aliases) or MISSING, ""]]
    for f in (*TEXT, *FIGURES):
        v = getattr(d, f)
        mark = " (derived)" if f in d.derived else ""
        rows.append([f, f"{_figure(f, v) if f in FIGURES else v}{mark}", ref(f)])
    eff = d.efficiency()
    rows.append(["GFLOP/s per W (FP32 / TDP)", format_figure(eff["gflops_per_w"], ".3g"), "computed"])
    rows.append(["GFLOP/s per $ (FP32 / price)", format_figure(eff["gflops_per_usd"], ".3g"), "computed"])
    console.print(rich_table(title, ["figure", "value", "source"], rows))
    if d.notes:
        console.print(f"notes: {d.notes}", highlight=False, soft_wrap=True)
    for i, src in enumerate(sources, 1):
        console.print(f"[{i}] {src}", highlight=False, markup=False, soft_wrap=True)


@hw.command("show")
@click.argument("name", required=False)
@click.option("--remeasure", is_flag=True,
              help="measure this machine's CPU peak again and store it (it is measured once per machine and reused)")
def hw_show(name: str | None, remeasure: bool) -> None:
    """One device with the source of every figure; without NAME, this machine's CPU and GPUs and their peaks."""

    console = new_console()
    if remeasure:
        if name:
            raise DlperfError("hw show: --remeasure measures this machine; it takes no NAME")
        import os

        from dlperf.hardware.peak_cache import REMEASURE_ENV

        os.environ[REMEASURE_ENV] = "1"  # before the first probe of this process: measured now, then stored
    if name:
        d = _find(name)
        _detail(d, d.id, console)
        return
    from dlperf.hardware.detect import detect_cpu, detect_gpus, this_cpu

    cpu, how = detect_cpu()
    found = [(cpu, how), *detect_gpus()]
    share = this_cpu() if not cpu.detected else None
    if share is not None:  # a VM's slice of a catalog CPU, or a catalog CPU without an FP32 figure
        found.insert(1, (share, "as this machine sees it"))
    for d, how in found:
        _detail(d, f"this machine: {d.name} ({how})", console)
    from dlperf.hardware.peaks import clock_line, cpu_peaks

    console.print(clock_line(cpu_peaks()), highlight=False, markup=False, soft_wrap=True)
    if not any(d.kind == "gpu" for d, _ in found):
        console.print("GPUs: none found (NVML sees no NVIDIA GPU)", highlight=False)


@hw.command("compare")
@click.argument("names", nargs=-1, required=True)
def hw_compare(names: tuple[str, ...]) -> None:
    """NAMES side by side (at least two), with FLOP/s per watt and per dollar."""
    from dlperf.hardware.catalog import FIGURES
    from dlperf.report.sections import rich_table

    if len(names) < 2:
        raise click.UsageError("compare needs at least two devices")
    devs = [_find(n) for n in names]
    rows = [[f, *[_figure(f, getattr(d, f)) + (" (derived)" if f in d.derived else "") for d in devs]]
            for f in ("kind", "architecture", "peak_clock", *FIGURES)]
    for key, label in (("gflops_per_w", "GFLOP/s per W"), ("gflops_per_usd", "GFLOP/s per $")):
        rows.append([label, *[format_figure(d.efficiency()[key], ".3g") for d in devs]])
    new_console().print(rich_table("datasheet comparison", ["figure", *[d.id for d in devs]], rows))


@hw.command("diff-study")
@click.option("--all", "show_all", is_flag=True, help="also list the figures that agree")
def hw_diff_study(show_all: bool) -> None:
    """Study 004's device figures against the vendors': where they disagree (more than 5%)."""
    from dlperf.hardware.catalog import diff_study
    from dlperf.report.sections import rich_table

    rows = diff_study()
    shown = [r for r in rows if show_all or r["verdict"] != "agree"]
    table = [[r["device"], r["figure"], format_figure(r["study"]), format_figure(r["vendor"]), r["verdict"],
              _host(r["source"])] for r in shown]
    console = new_console()
    console.print(rich_table("study 004's figures against the vendors' (catalog)",
                             ["device", "figure", "study 004", "vendor", "verdict", "source (hw show ID)"], table))
    n_dis = sum(r["verdict"] == "disagree" for r in rows)
    console.print(f"{n_dis} of {len(rows)} figures disagree; "
                  f"{sum(r['verdict'] == 'agree' for r in rows)} agree (--all lists them)", highlight=False)


@hw.command("measured")
@click.option("--run", "runs", multiple=True, metavar="RUN", help="only these runs (default: every cnn result)")
@click.option("--all-batches", is_flag=True, help="every batch, not only the fastest per setup")
@click.option("--tdp-w", type=FiniteFloatRange(min=0, min_open=True), default=None, help=TDP_HELP)
@click.option("--price-usd", type=FiniteFloatRange(min=0, min_open=True), default=None, help=PRICE_HELP)
@db_option
def hw_measured(runs: tuple[str, ...], all_batches: bool, tdp_w: float | None, price_usd: float | None,
                db: str | None) -> None:
    """Measured CNN training efficiency per device: images/s, real GFLOP/s, % of peak, per W, per $."""
    from dlperf.cli.readers import cnn_inputs
    from dlperf.hardware.measured import best_per_setup, cnn_rows
    from dlperf.report.sections import rich_table

    store = open_store(db, create=False)
    run_ids = [store.resolve_run(r) for r in runs] or None
    rows = cnn_rows(*cnn_inputs(store, run_ids), tdp_w=tdp_w, price_usd=price_usd)
    if not rows:
        raise DlperfError("no cnn results stored: run `dlperf run cnn --quick` first")
    shown = rows if all_batches else best_per_setup(rows)
    header = ["device", "framework", "model", "px", "batch", "img/s", "IQR", "real GFLOP/s", "% of peak", "power W",
              "img/s per W", "img/s per $1k"]
    table = []
    for r in shown:
        tdp = "" if r["power_w"] is None or r["power_source"].startswith("measured") else " (TDP)"
        table.append([r["device"], r["framework"], r["model"], str(r["image_size"]), str(r["batch"]),
                      format_figure(r["images_per_s"]), format_iqr(r.get("iqr_rel"), missing=UNKNOWN),
                      format_figure(r["real_gflops"]),
                      format_figure(r["pct_of_peak"], ".1f") + (" (above the peak)" if (r["pct_of_peak"] or 0) > 100
                                                                else ""),
                      format_figure(r["power_w"], ".1f") + tdp, format_figure(r["images_per_j"]) + tdp,
                      format_figure(r["images_per_s_per_kusd"])])
    console = new_console()
    console.print(rich_table("measured CNN training efficiency" + ("" if all_batches else
                                                                    " (fastest batch per setup; --all-batches)"),
                             header, table))
    for line in device_notes(shown):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print("real GFLOP/s = the cost model's training FLOPs / measured median step time (study 004's metric)",
                  highlight=False)


def device_notes(rows: list[CnnRow]) -> list[str]:
    """One line per device: where its power, price and peak came from. Rows of one device whose sources
    differ (one model measured with energy off, another without a meter) give each distinct source once,
    in the rows' order, rather than a near-copy of the whole line per row."""
    fields: tuple[tuple[str, Literal["power_source", "price_source", "peak_source"]], ...] = (
        ("power", "power_source"), ("price", "price_source"), ("peak", "peak_source"))
    seen: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        per = seen.setdefault(r["device"], {name: [] for name, _ in fields})
        for name, key in fields:
            if r[key] not in per[name]:
                per[name].append(r[key])
    return [f"{device}: " + "; ".join(f"{name}: {' | '.join(values)}" for name, values in per.items())
            for device, per in sorted(seen.items())]

