"""`dlperf peaks` and the report of a peaks run: theoretical and measured peaks side by side, per device and
framework, with the assumptions behind each theoretical figure."""

from __future__ import annotations

from dlperf.core.result import CaseResult
from dlperf.hardware.roofline import device_theoretical
from dlperf.report.sections import Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import format_number, format_pct


def _share(achieved: float | None, peak: float | None) -> str:
    """The GEMM's share of the theoretical peak; above 100% it says so (the peak is too low), never a bare figure."""
    if achieved is None or not peak:
        return "-"
    pct = 100 * achieved / peak
    return f"{pct:.0f}%" + (" (above the peak: the peak is too low)" if pct > 100 else "")


def sections(data: ReportData) -> list[Section]:
    """One row per (device, framework): theoretical FP32 and bandwidth beside measured GEMM, copy and triad."""
    measured: dict[tuple[str, str], dict[str, CaseResult]] = {}
    for r in data.of("peaks"):
        measured.setdefault((r.device, r.framework), {})[r.params["kind"]] = r
    if not measured:
        return []
    header = ["device", "framework", "theoretical FP32 GFLOP/s", "GEMM GFLOP/s", "% of theoretical",
              "theoretical GB/s", "copy GB/s", "triad GB/s", "IQR (gemm/copy/triad)"]
    rows = []
    for (device, framework), kinds in sorted(measured.items()):
        theo = device_theoretical(data.env, device)
        fp32 = theo.get("fp32_flops_per_s")

        def val(kind: str, key: str, kinds: dict[str, CaseResult] = kinds) -> float | None:
            r = kinds.get(kind)
            return r.m.get(key) if r is not None and r.ok else None

        gemm = val("gemm", "flops_per_s")
        iqr = "/".join(format_pct(val(k, "iqr_rel")) for k in ("gemm", "copy", "triad"))
        failed = [f"{k}: {r.status}" for k, r in kinds.items() if not r.ok]
        rows.append([device, framework, format_number(fp32, ".1f", scale=1e9), format_number(gemm, ".1f", scale=1e9),
                     _share(gemm, fp32),
                     format_number(theo.get("mem_bw_bytes_per_s"), ".1f", scale=1e9),
                     format_number(val("copy", "bytes_per_s"), ".1f", scale=1e9),
                     format_number(val("triad", "bytes_per_s"), ".1f", scale=1e9),
                     iqr + (f" ({', '.join(failed)})" if failed else "")])
    cpu = data.env.get("cpu_peaks_theoretical") or {}
    notes = [f"CPU theoretical peak: {cpu.get('assumptions', 'unknown')}",
             f"CPU memory bandwidth: {cpu.get('mem_bw_source', 'unknown')}"]
    for g in data.env.get("gpus") or []:
        gp = g.get("peaks_theoretical") or {}
        notes.append(f"cuda:{g['index']} {g['name']}: {gp.get('assumptions', 'no theoretical peak')}")
    notes.append("GEMM: 2 n^3 FLOPs; copy 2N and triad 3N bytes (STREAM's counting); rates from the median.")
    return [Heading("## Peaks"), Table(f"peaks of this machine (run {data.run.id})", header, rows),
            *[Note(line, markdown=f"- {line}") for line in notes]]
