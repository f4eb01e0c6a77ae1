"""`dlperf recommend`'s text: a source's counted costs, the ranked devices, the estimates set against
measurements. Every estimate is labelled: "est." in a column's name, ESTIMATES in a title."""

from __future__ import annotations

from typing import Any

from dlperf.hardware import recommend as R
from dlperf.hardware.measured import CnnRow, nearest
from dlperf.hardware.source_costs import SourceCosts
from dlperf.report.sections import rich_table
from dlperf.units import (
    MISSING,
    UNKNOWN,
    format_figure,
    format_gb,
    format_iqr,
    format_mib,
    format_number,
    format_pct,
    format_size,
)


def what(req: Any) -> str:
    """The request in words, as titles name it."""
    if req.costs is not None:
        return f"{req.model} training step, batch {req.batch}, {req.precision}"
    return f"{req.model} training, batch {req.batch}, {req.image_size} px, {req.precision}"


def print_costs(console: Any, costs: SourceCosts) -> None:
    """The source's step as counted and extrapolated: every figure an estimate, the FLOPs' absence explained."""
    host, device = costs.memory("host"), costs.memory("device")
    rows = [["parameters", f"{costs.params:,}", "counted on the module"],
            ["est. FLOPs per step", "not estimated" if costs.flops is None else format_figure(costs.flops),
             costs.flops_note],
            ["est. memory, CPU process", format_size(host.total_bytes),
             "parameters, gradients, SGD momentum, inputs, saved activations and as many bytes of their gradients "
             "(without the framework's own footprint)"],
            ["est. memory, GPU allocator", format_size(device.total_bytes),
             "the same, with twice the largest saved activation for the gradients alive at once"],
            ["est. saved activations", format_size(costs.saved_bytes), f"autograd's saved tensors ({costs.how})"],
            ["est. inputs", format_size(costs.input_bytes), costs.how],
            ["est. traffic per step", format_size(costs.traffic_bytes()),
             "activations written and read, their gradients, the inputs, the parameters touched 8 times"]]
    console.print(rich_table(f"ESTIMATES for {what(_Req(costs))}: {costs.source}'s costs",
                             ["figure", "value", "how"], rows, text_cols=(-1,)))


class _Req:
    """The fields of a request that `what` reads, from a source's costs."""

    def __init__(self, costs: SourceCosts) -> None:
        self.costs, self.model, self.batch, self.precision = costs, costs.source, costs.batch, costs.precision


def print_ranked(console: Any, ranked: list[R.Estimate], req: Any, key: str, n: int,
                  rows: list[CnnRow], checks: list[R.Check]) -> None:
    unit = req.rate_unit
    header = ["#", "device", "kind", "est. GB / has", f"est. {unit}", "eff.", "price $", "TDP W",
              f"est. {unit}/$1k", f"est. {unit}/W", "measured here", "why this rank"]
    table = []
    for e in ranked:
        d = e["device"]
        has = e["memory_capacity_bytes"]
        assert has is not None  # a ranked device's memory was checked (`recommend.exclusion`)
        cap = f" / {format_figure(has / 1e9)}" + (" RAM" if e["memory_source"] == R.HOST_RAM else "")
        table.append([str(e["rank"]), d.id, d.kind, format_gb(e["memory_bytes"], named=False) + cap,
                      format_figure(e["images_per_s"]), format_pct(e["efficiency"]),
                      format_figure(d.launch_price_usd, ",.0f"), format_figure(d.tdp_w),
                      format_figure(e["images_per_s_per_kusd"]), format_figure(e["images_per_j_tdp"]),
                      _measured_cell(d, rows, checks, req), e["reason"]])
    if not ranked:
        console.print(f"ESTIMATES for {what(req)}: no device qualifies (why each is left out follows)",
                      highlight=False)
        return
    rank_label = R.RANK_KEYS[key][1] if req.costs is None else R.RANK_KEYS[key][1].replace("images", "samples")
    title = (f"ESTIMATES for {what(req)}: {n} device{' qualifies' if n == 1 else 's qualify'}, top {len(ranked)} "
             f"by {rank_label}")
    console.print(rich_table(title, header, table, text_cols=(-2, -1)))
    sources = sorted({e["efficiency_source"] for e in ranked})
    frm = ("the model definition (models.memory, models.spec)" if req.costs is None else
           "the counts on the source's eager module (hardware.source_costs)")
    console.print(f"every figure above is an estimate: memory and FLOPs from {frm}, {unit} = batch / (roofline step "
                  "time / efficiency) on the catalog's peaks and bandwidth; efficiency from: " + " | ".join(sources),
                  highlight=False, markup=False, soft_wrap=True)


def _measured_cell(dev: Any, rows: list[CnnRow], checks: list[R.Check], req: Any) -> str:
    """The measurement nearest to the request on this device, and the leave-one-out estimate's error there."""
    def same_device(row: CnnRow) -> bool:
        if dev.detected:  # this machine's CPU as it is here
            return row["kind"] == "cpu" and row["device_name"] == dev.name
        return row["entry"] is dev and row["share"] == 1.0  # a whole catalog device, not a VM's slice of it

    mine = [c for c in checks if c["row"]["precision"] == req.precision and same_device(c["row"])]
    if not mine:
        return MISSING
    near = nearest([c["row"] for c in mine], req.batch, req.image_size)
    assert near is not None  # `mine` is not empty
    best = max((c for c in mine if c["row"]["batch"] == near["batch"] and
                c["row"]["image_size"] == near["image_size"]), key=lambda c: c["row"]["images_per_s"])
    r = best["row"]
    return (f"{format_number(r['images_per_s'], ',.1f')} img/s {r['framework']} b{r['batch']} {r['image_size']}px "
            f"(est. {format_pct(best['ips_error'], '+.0f', missing=UNKNOWN)})")


def print_validation(console: Any, checks: list[R.Check], model: str, *, source: bool = False) -> None:
    """The estimates against this user's stored CNN results (a source's are not checked: says so)."""
    if source:
        console.print(f"these estimates are not checked against measurements here: dlperf bench {model} and dlperf "
                      f"maxbatch {model} measure its time and memory on this machine", highlight=False,
                      markup=False, soft_wrap=True)
        return
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
