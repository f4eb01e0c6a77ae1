"""Ops against the machine's own measured ceilings, torch on the CPU, in one process.

Issue 3's check: at the largest quick size (32 MiB), each element-wise op's
bandwidth (compulsory bytes / median time) as a ratio of the measured copy
bandwidth, and dot's FLOP/s as a ratio of the measured GEMM peak (a 4096 x 4096
fp32 matmul). Everything is measured here, in the same run, with dlperf.measure,
so the ratios compare like with like on a noisy shared machine.

Issue 28's check: that GEMM as a share of the machine's measured FP32 peak (the
clock probe's FMA loop, `peak_cache`: the figure every % of peak and MFU divides
by). Target: at most 100% (a GEMM above the peak means the peak is wrong) and at
least `GEMM_SHARE_MIN` (a BLAS GEMM reaches most of the FMA peak; far below it, the
peak is too high, as the add-chain clock once made it on Intel AVX-512). Exits 1 if
it is missed, and only then.

    python benchmarks/ops_roofline.py [--size-mb 32] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys

#: The least share of the measured FP32 peak a 4096^3 fp32 GEMM is expected to reach on a CPU (77-82% of it with
#: torch on the 2-core Zen 4 VM, 2026-11-29).
GEMM_SHARE_MIN = 0.5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=32.0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--budget", type=float, default=2.0, help="timer budget per measurement, seconds")
    args = ap.parse_args()

    from dlperf import measure
    from dlperf.frameworks import get_framework
    from dlperf.workloads import get_workload

    fw = get_framework("torch")
    torch = fw.import_module()
    if args.threads:
        fw.set_threads(args.threads)
    ops, peaks = get_workload("ops"), get_workload("peaks")

    def rate(workload, params, key):
        p = workload.parse(params)
        m = measure(workload.build(fw, "cpu", p).fn, max_time_s=args.budget)
        cost = workload.cost(p)
        value = (cost.bytes_moved if key == "bytes" else cost.flops) / m.median_s
        return value, m

    copy_bw, mc = rate(peaks, {"kind": "copy", "size_mb": 768}, "bytes")
    gemm, mg = rate(peaks, {"kind": "gemm", "size_mb": 192}, "flops")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, working set {args.size_mb:g} MiB")
    print(f"ceiling: copy {copy_bw / 1e9:.1f} GB/s (IQR {mc.iqr_rel:.0%}), "
          f"GEMM 4096^3 {gemm / 1e9:.1f} GFLOP/s (IQR {mg.iqr_rel:.0%})")
    for op in ("add", "mul", "scalar", "sigmoid", "tanh", "relu", "softmax"):
        bw, m = rate(ops, {"op": op, "size_mb": args.size_mb}, "bytes")
        print(f"  {op:8s} {bw / 1e9:7.1f} GB/s   ratio to copy bandwidth {bw / copy_bw:5.2f}   (IQR {m.iqr_rel:.0%})")
    flops, m = rate(ops, {"op": "dot", "size_mb": args.size_mb}, "flops")
    print(f"  {'dot':8s} {flops / 1e9:7.1f} GFLOP/s ratio to GEMM peak      {flops / gemm:5.2f}"
          f"   (IQR {m.iqr_rel:.0%})")

    from dlperf.hardware.peaks import cpu_peaks

    found = cpu_peaks()
    peak = found.get("fp32_flops_per_s")
    if not peak:
        print(f"no FP32 peak to judge the GEMM by: {found['assumptions']}")
        return 1
    share = gemm / peak
    met = GEMM_SHARE_MIN <= share <= 1.0
    print(f"GEMM 4096^3 against the FP32 peak {peak / 1e9:.1f} GFLOP/s ({found['fp32_source']}; "
          f"{found['fp32_basis']}): share {share:.2f}, target {GEMM_SHARE_MIN:g}-1.0 with "
          f"{torch.get_num_threads()} threads: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
