"""dlperf's transformer training throughput against a hand-written PyTorch loop (torch CPU, one process).

The same small decoder (gpt2-mini: 4 layers, width 256, vocabulary 8192; batch 2 x 64 tokens by default),
the same weights, data, fused AdamW and thread count, trained two ways, interleaved over rounds:
- dlperf: the Step built by the workload's torch builder (`workloads/transformer/torch_transformer.py`), timed
  by `dlperf.timing.measure` with the worker's default settings (warm-up, adaptive stop, budget);
- plain: a loop as anyone writes it (zero_grad, forward, cross-entropy, backward, step) on its own copy of the
  model, `time.perf_counter` around each of `iters` steps, the median step of the round.
Both figures are medians of single steps (a median against a mean would favour the side that drops its slow
outliers). Prints tokens/s of each (median over rounds) and the ratio dlperf / plain; the target is within 5%
either way (dlperf faster than the plain loop would mean its step does less work). Exits 1 if it is missed.

    python benchmarks/transformer_loop.py [--rounds 9] [--iters 10] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

#: dlperf's tokens/s within this fraction of the plain loop's, either way.
TARGET = 0.05


def plain_loop(torch, cfg, batch: int, seq_len: int, lr: float, weight_decay: float):
    """The hand-written training loop: its own model (same weights), optimizer and batch."""
    from dlperf.models.transformer import init_weights, make_tokens, torch_model

    model = torch_model.build(cfg, init_weights(cfg, 0)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, fused=True)
    toks = torch.as_tensor(make_tokens(cfg, batch, seq_len + 1))
    x, y = toks[:, :-1].contiguous(), toks[:, 1:].reshape(-1).contiguous()

    def run(iters: int) -> float:
        """The median of `iters` steps, each timed alone (a CPU step needs no device sync)."""
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x).view(-1, cfg.vocab_size), y)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return run



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-mini")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=10, help="steps per plain-loop timing")
    ap.add_argument("--threads", type=int, default=None,
                    help="default: as a run picks them, the physical cores other processes leave idle")
    args = ap.parse_args()

    from dlperf import measure
    from dlperf.core.settings import RunSettings
    from dlperf.frameworks import get_framework
    from dlperf.runner.threads import threads_now
    from dlperf.workloads import get_workload

    fw = get_framework("torch")
    torch = fw.import_module()
    fw.set_threads(args.threads or threads_now())
    w = get_workload("transformer")
    p = w.parse({"model": args.model, "task": "train", "batch": args.batch, "seq_len": args.seq_len})
    step = w.build(fw, "cpu", p).fn
    plain = plain_loop(torch, p.config(), args.batch, args.seq_len, p.lr, p.weight_decay)
    s = RunSettings()
    timing = {"warmup": s.warmup, "min_run_time_s": s.min_run_time_s, "max_time_s": s.budget_s,
              "target_rel_ci": s.target_rel_ci}
    plain(3)  # warm the plain loop as measure() warms the step
    tokens = args.batch * args.seq_len
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(measure(step, sync=fw.sync_fn("cpu"), **timing).median_s)
        theirs.append(plain(args.iters))
    d, q = statistics.median(ours), statistics.median(theirs)
    ratio = q / d  # tokens/s of dlperf over tokens/s of the plain loop
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.model} train, batch {args.batch} x "
          f"{args.seq_len} tokens, fused AdamW, fp32; {args.rounds} interleaved rounds")
    print(f"dlperf {tokens / d:9.0f} tokens/s ({d * 1e3:.1f} ms/step) | plain loop {tokens / q:9.0f} tokens/s "
          f"({q * 1e3:.1f} ms/step) | ratio dlperf/plain {ratio:.3f} "
          f"(target within {TARGET:.0%}: {'met' if abs(ratio - 1) <= TARGET else 'MISSED'})")
    print("per-round ratios: " + ", ".join(f"{b / a:.3f}" for a, b in zip(ours, theirs, strict=True)))
    return 0 if abs(ratio - 1) <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
