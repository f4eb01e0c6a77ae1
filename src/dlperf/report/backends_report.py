"""The `backends` study's report (study 003): time per step and per epoch, the speedup matrix, the profile."""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Console
from rich.markup import escape

from dlperf.report.tables import markdown_table, rich_table
from dlperf.timing import format_time

PAIRS = (("nn-sequential", "nn-vectorized"), ("nn-sequential", "nn-cuda"), ("nn-vectorized", "nn-cuda"),
         ("nn-sequential", "torch"), ("nn-vectorized", "torch"), ("nn-cuda", "torch"), ("nn-cuda", "nn-cuda-cublas"))


def _by_model(results: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        if r["workload"] == "backends" and r["status"] == "ok":
            out.setdefault(r["params"]["model"], {})[r["framework"]] = r
    return out


def sections(results: list[dict[str, Any]]) -> list[tuple[str, list[str], list[list[str]]]]:
    models = _by_model(results)
    if not models:
        return []
    times_h = ["model", "backend", "time/step (median)", "IQR", "steps timed", "time/epoch (derived)"]
    times = []
    for model, fws in sorted(models.items()):
        for fw, r in sorted(fws.items()):
            m = r["metrics"]
            times.append([model, fw, format_time(m["median_s"]), f"{m['iqr_rel']:.0%}", str(m["total_iters"]),
                          f"{format_time(m['time_per_epoch_s_derived'])} ({m['steps_per_epoch']} steps x median)"])
    sp_h = ["model", *[f"{a} / {b}" for a, b in PAIRS]]
    sp = []
    for model, fws in sorted(models.items()):
        row = [model]
        for a, b in PAIRS:
            if a in fws and b in fws:
                row.append(f"{fws[a]['metrics']['median_s'] / fws[b]['metrics']['median_s']:.3g}")
            else:
                row.append("-")
        sp.append(row)
    out = [("time per training step; per epoch derived from the per-step median", times_h, times),
           ("speedup matrix: time per step of a / time per step of b (above 1: b is faster; '-': one did not run)",
            sp_h, sp)]
    for model, fws in sorted(models.items()):
        for fw in ("nn-vectorized", "nn-sequential"):
            prof = (fws.get(fw) or {}).get("metrics", {}).get("profile")
            if prof:
                rows = [[p["function"], str(p["ncalls"]), f"{p['inclusive_s'] * 1e3:.2f}", f"{p['self_s'] * 1e3:.2f}"]
                        for p in prof["by_inclusive"][:10]]
                out.append((f"cProfile of fit ({model}, {fw}, a few batches, {prof['total_s'] * 1e3:.1f} ms): "
                            "top by inclusive time", ["function", "calls", "inclusive ms", "self ms"], rows))
                rows = [[p["function"], str(p["ncalls"]), f"{p['self_s'] * 1e3:.2f}", f"{p['inclusive_s'] * 1e3:.2f}"]
                        for p in prof["by_self"][:10]]
                out.append((f"cProfile of fit ({model}, {fw}): top by self time",
                            ["function", "calls", "self ms", "inclusive ms"], rows))
    return out


def render_terminal(results: list[dict[str, Any]], console: Console, **_: Any) -> None:
    for title, header, rows in sections(results):
        console.print(rich_table(title, header, rows))
    if any(r["workload"] == "backends" for r in results):
        seq = [r for r in results if r["framework"] == "nn-sequential" and r["status"] == "ok"]
        if seq:
            n = statistics.median(r["metrics"]["total_iters"] for r in seq)
            console.print(escape(f"nn-sequential was timed on {n:g} steps (median), not whole epochs: its per-epoch "
                                 "time is the per-step median times the steps of an epoch"), highlight=False)


def render_markdown(results: list[dict[str, Any]], **_: Any) -> str:
    out = []
    for title, header, rows in sections(results):
        out += ["", f"### {title}", "", markdown_table(header, rows)]
    return "\n".join(out)
