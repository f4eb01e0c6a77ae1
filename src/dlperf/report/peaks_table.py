"""`dlperf peaks`: theoretical and measured peaks side by side, per device and framework."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dlperf.hardware.roofline import device_theoretical


def _g(x: float | None, scale: float = 1e9) -> str:
    return "-" if x is None else f"{x / scale:.1f}"


def render_peaks(store: Any, run_id: str, console: Console) -> None:
    env = store.run_environment(run_id)  # with the peaks this run was measured under
    measured: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in store.results(run_id):
        measured.setdefault((r["device"], r["framework"]), {})[r["params"]["kind"]] = r
    table = Table(title=f"peaks of this machine (run {run_id})", title_justify="left")
    for col in ("device", "framework", "theoretical FP32 GFLOP/s", "GEMM GFLOP/s", "% of theoretical",
                "theoretical GB/s", "copy GB/s", "triad GB/s", "IQR (gemm/copy/triad)"):
        table.add_column(col, justify="left" if col in ("device", "framework") else "right")
    for (device, framework), kinds in sorted(measured.items()):
        theo = device_theoretical(env, device)
        fp32 = theo.get("fp32_flops_per_s")

        def val(kind: str, key: str, kinds: dict[str, dict[str, Any]] = kinds) -> float | None:
            r = kinds.get(kind)
            return r["metrics"][key] if r and r["status"] == "ok" else None

        gemm = val("gemm", "flops_per_s")
        iqrs = [val(k, "iqr_rel") for k in ("gemm", "copy", "triad")]
        iqr = "/".join("-" if x is None else f"{x:.0%}" for x in iqrs)
        failed = [f"{k}: {r['status']}" for k, r in kinds.items() if r["status"] != "ok"]
        table.add_row(device, framework, _g(fp32), _g(gemm),
                      "-" if gemm is None or not fp32 else f"{100 * gemm / fp32:.0f}%",
                      _g(theo.get("mem_bw_bytes_per_s")), _g(val("copy", "bytes_per_s")),
                      _g(val("triad", "bytes_per_s")), iqr + (f" ({', '.join(failed)})" if failed else ""))
    console.print(table)
    cpu = env.get("cpu_peaks_theoretical") or {}
    console.print(escape(f"CPU theoretical peak: {cpu.get('assumptions', 'unknown')}"), highlight=False)
    console.print(escape(f"CPU memory bandwidth: {cpu.get('mem_bw_source', 'unknown')}"), highlight=False)
    for g in env.get("gpus") or []:
        gp = g.get("peaks_theoretical") or {}
        console.print(escape(f"cuda:{g['index']} {g['name']}: {gp.get('assumptions', 'no theoretical peak')}"),
                      highlight=False)
    console.print("GEMM: 2 n^3 FLOPs; copy 2N and triad 3N bytes (STREAM's counting); rates from the median.",
                  highlight=False)
