"""Batch-1 inference latency of ONNX Runtime and OpenVINO over PyTorch's, per model, on this machine (CPU).

Each model is the one dlperf builds (the CNNs of study 001 at their own image sizes, the transformers at
`--seq-len` tokens), with the same weights in all three: the torch module, and its ONNX export
(`models.onnx_export`, cached) served by an ONNX Runtime session and an OpenVINO model compiled at f32, each opened
by dlperf's adapter. The same thread count for all three (torch's intra-op threads, the session's intra-op
threads, OpenVINO's INFERENCE_NUM_THREADS). torch runs in eval mode under inference_mode.

Each runtime runs in its own (spawned) process, driven over a pipe, one process computing at a time: in one
process the thread pools that keep spinning after a call (ONNX Runtime's, OpenMP's) took the cores from the next
runtime's call (torch's AlexNet measured 3x slower beside the other two than alone). Rounds are interleaved
(torch, onnxruntime, openvino, torch, ...), so machine noise hits all three alike; a round times `--iters` single
calls of each and keeps their median; a figure is the median over rounds. Before timing,
the three outputs are compared (the largest difference relative to the largest torch logit is printed: fp32
everywhere, so about 1e-6 or less).

    python benchmarks/runtime_latency.py [--models alexnet,gpt2-mini] [--rounds 7] [--iters 10] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

CNNS = ("lenet5", "alexnet", "caffenet", "googlenet")
TRANSFORMERS = ("gpt2-tiny", "gpt2-mini", "bert-tiny")
RUNTIMES = ("torch", "onnxruntime", "openvino")


def model_input(name: str, seq_len: int) -> tuple[Any, str]:
    """A seeded batch-1 input as NumPy (the same for all three), and what it is in words."""
    import numpy as np

    from dlperf.models import get_spec
    from dlperf.models.transformer import get_config, make_tokens

    if name in CNNS:
        s = get_spec(name)
        x = np.random.default_rng(0).standard_normal((1, s.in_channels, s.image_size, s.image_size),
                                                    dtype=np.float32)
        return x, f"1x{s.in_channels}x{s.image_size}x{s.image_size}"
    return make_tokens(get_config(name), 1, seq_len), f"1x{seq_len} tokens"


def make_call(runtime: str, name: str, x: Any, threads: int, path: str) -> Callable[[], Any]:
    """A zero-argument batch-1 call on `runtime` returning NumPy (imports that runtime only)."""
    if runtime == "torch":
        import torch

        from dlperf.models import onnx_export as ox

        torch.set_num_threads(threads)
        net = ox.cnn_module(name) if name in CNNS else ox.transformer_module(name)
        xt = torch.from_numpy(x)

        def run_torch() -> Any:
            with torch.inference_mode():
                return net(xt).numpy()

        return run_torch
    from dlperf.frameworks import get_framework

    fw = get_framework(runtime)
    fw.set_threads(threads)
    if runtime == "onnxruntime":
        sess = fw.session(path, "cpu")
        feed = {sess.get_inputs()[0].name: x}
        return lambda: sess.run(None, feed)[0]
    request = fw.compile(path, "cpu", "fp32").create_infer_request()
    return lambda: request.infer({0: x})[0]


def serve(conn: Any, runtime: str, name: str, x: Any, threads: int, path: str, warmup: int) -> None:
    """A runtime's own process: sends its first output, then the median of `n` calls for each `n` it is sent."""
    call = make_call(runtime, name, x, threads, path)
    conn.send(call())
    for _ in range(warmup):
        call()
    while (iters := conn.recv()) is not None:
        conn.send(median_call_s(call, iters))


def median_call_s(call: Callable[[], Any], iters: int) -> float:
    """The median of `iters` single calls (each returns with its output on the host: nothing to sync)."""
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_model(name: str, args: Any, threads: int) -> tuple[str, dict[str, list[float]], float]:
    """(input in words, runtime -> per-round medians, largest disagreement relative to torch's largest logit)."""
    import multiprocessing as mp

    import numpy as np

    from dlperf.models import onnx_export as ox

    x, what = model_input(name, args.seq_len)
    path = str(ox.export_cnn(name, isolated=True) if name in CNNS else ox.export_transformer(name, isolated=True))
    ctx = mp.get_context("spawn")
    conns, procs, outs = {}, [], {}
    for r in RUNTIMES:  # one process each: no runtime's thread pool spins beside another's
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=serve, args=(child, r, name, x, threads, path, args.warmup), daemon=True)
        proc.start()
        conns[r], outs[r] = parent, None
        procs.append(proc)
    try:
        for r in RUNTIMES:
            outs[r] = conns[r].recv()
        rounds: dict[str, list[float]] = {r: [] for r in RUNTIMES}
        for _ in range(args.rounds):
            for r in RUNTIMES:  # interleaved: A B C A B C, one process running at a time
                conns[r].send(args.iters)
                rounds[r].append(conns[r].recv())
    finally:
        for r in RUNTIMES:
            conns[r].send(None)
        for proc in procs:
            proc.join(timeout=60)
    want = outs["torch"]
    diff = max(float(np.abs(outs[r] - want).max()) for r in RUNTIMES[1:]) / float(np.abs(want).max())
    return what, rounds, diff


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(CNNS + TRANSFORMERS), help="comma-separated")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10, help="single calls per runtime per round")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls per runtime before the rounds")
    ap.add_argument("--seq-len", type=int, default=128, help="transformer tokens")
    ap.add_argument("--threads", type=int, default=None, help="default: the physical cores")
    args = ap.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in CNNS + TRANSFORMERS]
    if unknown or args.rounds < 1 or args.iters < 1:
        print(f"error: unknown model {unknown[0]!r} (known: {', '.join(CNNS + TRANSFORMERS)})" if unknown
              else "error: --rounds and --iters must be at least 1", file=sys.stderr)
        return 2

    from importlib import metadata

    from dlperf.hardware.probe import default_threads

    threads = args.threads or default_threads()
    versions = {d: metadata.version(d) for d in ("torch", "onnxruntime", "openvino")}
    print(f"torch {versions['torch']}, onnxruntime {versions['onnxruntime']}, openvino {versions['openvino']}; "
          f"{threads} threads each; batch 1, fp32 (OpenVINO compiled at f32); median of {args.rounds} interleaved "
          f"rounds x {args.iters} calls, each runtime in its own process")
    head = (f"{'model':<10} {'input':<17} {'torch ms':>9} {'ort ms':>9} {'ov ms':>9} {'ort/torch':>9} "
            f"{'ov/torch':>9}  {'ratio range over rounds (ort; ov)':<34} {'max diff':>8}")
    print(head)
    print("-" * len(head))
    for name in models:
        what, rounds, diff = measure_model(name, args, threads)
        med = {r: statistics.median(v) for r, v in rounds.items()}
        per = {r: [a / t for a, t in zip(rounds[r], rounds["torch"], strict=True)] for r in RUNTIMES[1:]}
        spread = "; ".join(f"{min(v):.2f}-{max(v):.2f}" for v in per.values())
        print(f"{name:<10} {what:<17} {med['torch'] * 1e3:9.3f} {med['onnxruntime'] * 1e3:9.3f} "
              f"{med['openvino'] * 1e3:9.3f} {med['onnxruntime'] / med['torch']:9.2f} "
              f"{med['openvino'] / med['torch']:9.2f}  {spread:<34} {diff:8.1e}", flush=True)
    print("ratios below 1: the runtime is faster than torch; max diff: largest |runtime - torch| / max |torch|")
    return 0


if __name__ == "__main__":
    sys.exit(main())
