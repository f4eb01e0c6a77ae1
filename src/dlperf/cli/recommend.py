"""`dlperf recommend`: estimates for hardware the user lacks (the measured efficiency of hardware they have is
`dlperf hw measured`, in hw.py), for a CNN (`--workload cnn:MODEL`) or a source (`--model SOURCE`, its costs
counted on its eager module in a fresh process). Every estimate is labelled "est." in its table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dlperf.cli.options import FiniteFloatRange, db_option, new_console, open_store
from dlperf.errors import DlperfError, StoreError
from dlperf.untrusted import path_component

if TYPE_CHECKING:
    from dlperf.hardware.recommend import Check, Estimate


@click.command()
@click.option("--workload", default=None, metavar="FAMILY:MODEL", help="e.g. cnn:alexnet, cnn:googlenet")
@click.option("--model", "source", default=None, metavar="SOURCE",
              help="a model of yours, as dlperf bench takes it: file.py:NAME, hf:ARCH[,k=v...], dlperf:NAME")
@click.option("--input", "input_specs", multiple=True, metavar="NAME:DTYPE[DIMS]",
              help="--model's input, e.g. x:float32[B,256] (repeatable)")
@click.option("--inputs", "inputs_fn", default=None, metavar="PATH.py:FN", help="--model's FN(batch) inputs")
@click.option("--seq", type=click.IntRange(min=1), default=None, help="--model's sequence length (S)")
@click.option("--batch", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--image-size", type=click.IntRange(min=1), default=None, help="a CNN's (default: the model's)")
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
def recommend(workload: str | None, source: str | None, input_specs: tuple[str, ...], inputs_fn: str | None,
              seq: int | None, batch: int, image_size: int | None, precision: str, target: float | None,
              budget_usd: float | None, max_power_w: float | None, kind: tuple[str, ...],
              efficiency: float | None, rank_by: str | None, top: int, runs: tuple[str, ...],
              plot_dir: Path, no_plot: bool, fmt: str, db: str | None) -> None:
    """Rank catalog devices for training WORKLOAD (a CNN) or --model SOURCE (a model of yours: a training step,
    its FLOPs and memory counted on its eager module, a user's file run in a fresh process) at BATCH: ESTIMATED
    memory, samples/s and cost."""
    from dlperf.cli.readers import cnn_inputs
    from dlperf.cli.recommend_text import R, print_costs, print_ranked, print_validation, what
    from dlperf.hardware.catalog import catalog
    from dlperf.hardware.detect import this_cpu
    from dlperf.hardware.measured import cnn_rows

    if (workload is None) == (source is None):
        raise click.UsageError("give one of --workload FAMILY:MODEL (a CNN) or --model SOURCE (a model of yours)")
    if source is None and (input_specs or inputs_fn or seq):
        raise DlperfError("--input, --inputs and --seq are for --model SOURCE")
    if source is not None and image_size is not None:
        raise DlperfError("--image-size is for a CNN (--workload); give --model SOURCE's inputs with --input")
    req = (_cnn_request(R, workload, batch, image_size, precision) if workload is not None else
           _source_request(R, source, input_specs, inputs_fn, seq, batch, precision))  # type: ignore[arg-type]
    req = R.Request(req.model, batch, req.image_size, precision, target, budget_usd, max_power_w, efficiency,
                    costs=req.costs)
    model = req.model
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
    if req.costs is not None:
        print_costs(console, req.costs)
    print_ranked(console, ranked[:top], req, key, len(ranked), rows, checks)
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
        _plot(console, ranked, [e for e, _ in excluded], req, plot_dir, f"ESTIMATED {what(req)}")
    print_validation(console, checks, model, source=req.costs is not None)


def _cnn_request(R: Any, workload: str, batch: int, image_size: int | None, precision: str) -> Any:
    """The request's model and image size for `--workload cnn:MODEL` (DlperfError where it has none)."""
    from dlperf.models import get_spec
    from dlperf.models.spec import layers

    try:
        _family, model = R.parse_workload(workload)
        size = image_size or get_spec(model).image_size
        layers(get_spec(model), size)
    except ValueError as exc:
        raise DlperfError(str(exc)) from None
    return R.Request(model, batch, size, precision)


def _source_request(R: Any, source: str, input_specs: tuple[str, ...], inputs_fn: str | None, seq: int | None,
                    batch: int, precision: str) -> Any:
    """The request for `--model SOURCE`: its training step counted at batches 1, 2 and 4 in a fresh process
    (`workloads.model.costs`) and estimated at `batch` (`hardware.source_costs`); DlperfError with one line for a
    bad source."""
    from pydantic import ValidationError

    from dlperf.hardware.source_costs import from_counts
    from dlperf.workloads.model.costs import ONNX_REFUSAL, ModelParams, count

    if source.endswith(".onnx"):
        raise DlperfError(ONNX_REFUSAL.format(source=source))
    point = {"source": source, "task": "train", "seq": seq, "input": list(input_specs) or None,
             "inputs_fn": inputs_fn, "precision": "bf16" if precision == "amp" else "fp32"}
    try:
        params = ModelParams.model_validate({k: v for k, v in point.items() if v is not None})
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise DlperfError(msg if source in msg else f"--model {source}: {msg}") from None
    costs = from_counts(source, count(params), batch, precision)
    return R.Request(source, batch, None, precision, costs=costs)


def _as_json(req: Any, key: str, ranked: list[Estimate], excluded: list[tuple[Estimate, str]],
             checks: list[Check]) -> dict[str, Any]:
    """Everything the tables show, machine-readable; `estimate: true` marks every figure computed here."""
    from dataclasses import asdict

    def device(e: Estimate) -> dict[str, Any]:
        d = e["device"]
        return {"id": d.id, "name": d.name, "kind": d.kind, "memory_gb": d.value("memory_gb"),
                "launch_price_usd": d.value("launch_price_usd"), "tdp_w": d.value("tdp_w"),
                "derived_here": d.detected}

    def est(e: Estimate) -> dict[str, Any]:
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


def _plot(console: Any, ranked: list[Estimate], others: list[Estimate], req: Any, plot_dir: Path,
          title: str) -> None:
    """The figure; a failure to draw or write it is one line, the tables stand."""
    from dlperf.report.plots.recommend import recommend_plot

    if req.costs is None:
        stem = f"{req.model}-b{req.batch}-{req.image_size}px-{req.precision}"
    else:  # a source's text may hold any character: a safe file name from it
        stem = path_component(f"{req.model}-b{req.batch}-{req.precision}")
    try:
        paths = recommend_plot(ranked, others, plot_dir, stem, title, req.budget_usd,
                               req.target_ips, samples="images" if req.costs is None else "samples")
    except (DlperfError, ValueError) as exc:  # the ranking stands without its figure
        console.print(f"plot: not written ({exc})", highlight=False, markup=False)
        return
    console.print(f"plot: {paths[0]}", highlight=False, markup=False)
