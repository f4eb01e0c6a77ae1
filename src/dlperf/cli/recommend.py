"""`dlperf recommend`: estimates for hardware the user lacks (the measured efficiency of hardware they have is
`dlperf hw measured`, in hw.py). Every estimate is labelled "est." in its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dlperf.cli.options import FiniteFloatRange, db_option, new_console, open_store
from dlperf.errors import DlperfError, StoreError
from dlperf.units import MISSING, UNKNOWN, format_figure, format_gb, format_iqr, format_mib, format_number, format_pct


@click.command()
@click.option("--workload", required=True, metavar="FAMILY:MODEL", help="e.g. cnn:alexnet, cnn:googlenet")
@click.option("--batch", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--image-size", type=click.IntRange(min=1), default=None, help="default: the model's")
@click.option("--precision", type=click.Choice(["fp32", "amp"]), default="fp32", show_default=True)
@click.option("--target-samples-per-s", "target", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="only devices estimated to reach this; ranks cheapest first")
@click.option("--budget-usd", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="only devices whose launch price is at most this")
@click.option("--max-power-w", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="only devices whose TDP is at most this")
@click.option("--kind", type=click.Choice(["cpu", "gpu", "soc", "accelerator"]), multiple=True,
              help="only these kinds (repeatable)")
@click.option("--efficiency", type=FiniteFloatRange(min=0, max=1, min_open=True), default=None,
              help="fraction of the roofline to assume (default: measured here, else 0.25)")
@click.option("--rank-by", type=click.Choice(["throughput", "price", "per-dollar", "per-watt"]), default=None,
              help="default: throughput, or price with --target-samples-per-s")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True)
@click.option("--run", "runs", multiple=True, metavar="RUN", help="calibrate on these runs only")
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/recommend"),
              show_default=True, help="where the price/images-per-second figure goes")
@click.option("--no-plot", is_flag=True, help="no figure")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="json: every ranked and left-out device and every check, for scripts (no figure)")
@db_option
def recommend(workload: str, batch: int, image_size: int | None, precision: str, target: float | None,
              budget_usd: float | None, max_power_w: float | None, kind: tuple[str, ...],
              efficiency: float | None, rank_by: str | None, top: int, runs: tuple[str, ...],
              plot_dir: Path, no_plot: bool, fmt: str, db: str | None) -> None:
    """Rank catalog devices for training WORKLOAD at BATCH: ESTIMATED memory, images/s and cost."""
    from dlperf.cli.readers import cnn_inputs
    from dlperf.hardware import recommend as R
    from dlperf.hardware.catalog import catalog
    from dlperf.hardware.detect import this_cpu
    from dlperf.hardware.measured import cnn_rows
    from dlperf.models import get_spec
    from dlperf.models.spec import layers

    try:
        _family, model = R.parse_workload(workload)
        size = image_size or get_spec(model).image_size
        layers(get_spec(model), size)
    except ValueError as exc:
        raise DlperfError(str(exc)) from None
    req = R.Request(model, batch, size, precision, target, budget_usd, max_power_w, efficiency)
    try:
        store = open_store(db, create=False)
    except StoreError:
        if runs:
            raise
        store = None  # no store yet: estimates from the catalog alone (never a new, empty store)
    rows = cnn_rows(*cnn_inputs(store, [store.resolve_run(r) for r in runs] or None)) if store is not None else []
    here = this_cpu()
    devices = [d for d in (*catalog(), *([here] if here else [])) if not kind or d.kind in kind]
    ranked, excluded, key = R.rank(devices, rows, req, rank_by, here=R.memory_here(here))
    checks = R.validation(rows, model)
    if fmt == "json":
        import json

        click.echo(json.dumps(_as_json(req, key, ranked, excluded, checks), indent=1))
        return
    plot_dir = None if no_plot else plot_dir
    console = new_console()
    _print_ranked(console, ranked[:top], req, key, len(ranked), rows, checks)
    unchecked = [(e, why) for e, why in excluded if why.startswith(R.CANNOT_CHECK_MEMORY)]
    left_out = [(e, why) for e, why in excluded if not why.startswith(R.CANNOT_CHECK_MEMORY)]
    if left_out:
        console.print("left out: " + "; ".join(f"{e['device'].id} ({why})" for e, why in left_out),
                      highlight=False, markup=False, soft_wrap=True)
    if unchecked:
        console.print(f"{R.CANNOT_CHECK_MEMORY} (so not ranked): "
                      + "; ".join(f"{e['device'].id} ({why.partition(': ')[2]})" for e, why in unchecked),
                      highlight=False, markup=False, soft_wrap=True)
    if plot_dir is not None:
        _plot(console, ranked, [e for e, _ in excluded], req, plot_dir)
    _print_validation(console, checks, model)


def _as_json(req: Any, key: str, ranked: list[dict[str, Any]], excluded: list[tuple[dict[str, Any], str]],
             checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the tables show, machine-readable; `estimate: true` marks every figure computed here."""
    from dataclasses import asdict

    def device(e: dict[str, Any]) -> dict[str, Any]:
        d = e["device"]
        return {"id": d.id, "name": d.name, "kind": d.kind, "memory_gb": d.value("memory_gb"),
                "launch_price_usd": d.value("launch_price_usd"), "tdp_w": d.value("tdp_w"),
                "derived_here": d.detected}

    def est(e: dict[str, Any]) -> dict[str, Any]:
        return {"memory_bytes": e["memory_bytes"], "memory_parts": e["memory"].to_dict(), "fits": e["fits"],
                "memory_capacity_bytes": e["memory_capacity_bytes"], "memory_capacity_source": e["memory_source"],
                "images_per_s": e["images_per_s"], "gflops": e.get("gflops"), "binds": e.get("binds"),
                "efficiency": e["efficiency"], "efficiency_source": e["efficiency_source"],
                "images_per_s_per_kusd": e.get("images_per_s_per_kusd"),
                "images_per_s_per_tdp_w": e.get("images_per_j_tdp")}

    return {
        "estimate": True, "request": asdict(req), "ranked_by": key,
        "ranked": [{"rank": e["rank"], "device": device(e), "estimate": est(e), "reason": e["reason"]}
                   for e in ranked],
        "left_out": [{"device": device(e), "estimate": est(e), "reason": why} for e, why in excluded],
        "checks": [{"device": c["row"]["device"], "framework": c["row"]["framework"],
                    "image_size": c["row"]["image_size"], "batch": c["row"]["batch"],
                    "memory_what": c["memory_what"], "memory_measured_bytes": c["memory_measured"],
                    "memory_estimate_bytes": c["memory_estimate"], "memory_error": c["memory_error"],
                    "images_per_s_measured": c["row"]["images_per_s"],
                    "images_per_s_iqr_rel": c["row"].get("iqr_rel"), "images_per_s_estimate": c["ips_estimate"],
                    "images_per_s_error": c["ips_error"]} for c in checks],
    }


def _plot(console: Any, ranked: list[dict[str, Any]], others: list[dict[str, Any]], req: Any, plot_dir: Path) -> None:
    """The figure; a failure to draw or write it is one line, the tables stand."""
    from dlperf.report.plots import recommend_plot

    stem = f"{req.model}-b{req.batch}-{req.image_size}px-{req.precision}"
    title = f"ESTIMATED {req.model} training, batch {req.batch}, {req.image_size} px, {req.precision}"
    try:
        paths = recommend_plot(ranked, others, plot_dir, stem, title, req.budget_usd, req.target_ips)
    except (DlperfError, ValueError) as exc:  # the ranking stands without its figure
        console.print(f"plot: not written ({exc})", highlight=False, markup=False)
        return
    console.print(f"plot: {paths[0]}", highlight=False, markup=False)


def _print_ranked(console: Any, ranked: list[dict[str, Any]], req: Any, key: str, n: int,
                  rows: list[dict[str, Any]], checks: list[dict[str, Any]]) -> None:
    from dlperf.hardware import recommend as R
    from dlperf.report.sections import rich_table

    header = ["#", "device", "kind", "est. GB / has", "est. img/s", "eff.", "price $", "TDP W",
              "est. img/s/$1k", "est. img/s/W", "measured here", "why this rank"]
    table = []
    for e in ranked:
        d = e["device"]
        has = e["memory_capacity_bytes"]
        cap = f" / {format_figure(has / 1e9)}" + (" RAM" if e["memory_source"] == R.HOST_RAM else "")
        table.append([str(e["rank"]), d.id, d.kind, format_gb(e["memory_bytes"], named=False) + cap,
                      format_figure(e["images_per_s"]), format_pct(e["efficiency"]),
                      format_figure(d.launch_price_usd, ",.0f"), format_figure(d.tdp_w),
                      format_figure(e["images_per_s_per_kusd"]), format_figure(e["images_per_j_tdp"]),
                      _measured_cell(d, rows, checks, req), e["reason"]])
    if not ranked:
        console.print(f"ESTIMATES for {req.model} training, batch {req.batch}, {req.image_size} px, {req.precision}: "
                      "no device qualifies (why each is left out follows)", highlight=False)
        return
    title = (f"ESTIMATES for {req.model} training, batch {req.batch}, {req.image_size} px, {req.precision}: "
             f"{n} device{' qualifies' if n == 1 else 's qualify'}, top {len(ranked)} by {R.RANK_KEYS[key][1]}")
    console.print(rich_table(title, header, table, text_cols=(-2, -1)))
    sources = sorted({e["efficiency_source"] for e in ranked})
    console.print("every figure above is an estimate: memory from the model definition (models.memory), img/s = "
                  "batch / (roofline step time / efficiency) on the catalog's peaks and bandwidth; efficiency "
                  "from: " + " | ".join(sources), highlight=False, markup=False, soft_wrap=True)


def _measured_cell(dev: Any, rows: list[dict[str, Any]], checks: list[dict[str, Any]], req: Any) -> str:
    """The measurement nearest to the request on this device, and the leave-one-out estimate's error there."""
    from dlperf.hardware.measured import nearest

    def same_device(row: dict[str, Any]) -> bool:
        if dev.detected:  # this machine's CPU as it is here
            return row["kind"] == "cpu" and row["device_name"] == dev.name
        return row["entry"] is dev and row["share"] == 1.0  # a whole catalog device, not a VM's slice of it

    mine = [c for c in checks if c["row"]["precision"] == req.precision and same_device(c["row"])]
    if not mine:
        return MISSING
    near = nearest([c["row"] for c in mine], req.batch, req.image_size)
    best = max((c for c in mine if c["row"]["batch"] == near["batch"] and
                c["row"]["image_size"] == near["image_size"]), key=lambda c: c["row"]["images_per_s"])
    r = best["row"]
    return (f"{format_number(r['images_per_s'], ',.1f')} img/s {r['framework']} b{r['batch']} {r['image_size']}px "
            f"(est. {format_pct(best['ips_error'], '+.0f', missing=UNKNOWN)})")


def _print_validation(console: Any, checks: list[dict[str, Any]], model: str) -> None:
    from dlperf.report.sections import rich_table

    if not checks:
        console.print(f"no stored {model} results to check the estimates against "
                      f"(run `dlperf run cnn --quick`, then recommend again)", highlight=False)
        return
    header = ["device", "framework", "px", "batch", "measured memory", "est. memory", "error", "measured img/s",
              "IQR", "est. img/s (leave one out)", "error"]
    table = [[c["row"]["device"], c["row"]["framework"], str(c["row"]["image_size"]), str(c["row"]["batch"]),
              format_mib(c["memory_measured"], missing=UNKNOWN), format_mib(c["memory_estimate"], missing=UNKNOWN),
              format_pct(c["memory_error"], "+.0f", missing=UNKNOWN), format_figure(c["row"]["images_per_s"]),
              format_iqr(c["row"].get("iqr_rel"), missing=UNKNOWN), format_figure(c["ips_estimate"]),
              format_pct(c["ips_error"], "+.0f", missing=UNKNOWN)]
             for c in sorted(checks, key=lambda c: (c["row"]["device"], c["row"]["framework"],
                                                   c["row"]["image_size"], c["row"]["batch"]))]
    console.print(rich_table(f"the estimates against this user's {model} measurements", header, table))
    mem = [abs(c["memory_error"]) for c in checks if c["memory_error"] is not None]
    ips = [abs(c["ips_error"]) for c in checks if c["ips_error"] is not None]
    if mem:
        console.print(f"memory estimate: largest error {format_pct(max(mem), '.1f')} over {len(mem)} measured cases "
                      f"({sum(m <= 0.25 for m in mem)} within 25%); a CPU's figure is the worker's peak RSS, "
                      f"estimated as the model's host estimate plus the framework's footprint measured before "
                      f"the workload was built", highlight=False, soft_wrap=True)
    if ips:
        console.print(f"throughput estimate (efficiency from the other batches): median error "
                      f"{format_pct(sorted(ips)[len(ips) // 2])}, largest {format_pct(max(ips))}",
                      highlight=False)
