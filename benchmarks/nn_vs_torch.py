"""dlperf.nn's vectorized backend against PyTorch CPU: training-step time, same architecture, one process.

Two nets: the digits MLP (64-128-10, batch 64) and a larger MLP (784-512-10,
batch 256, synthetic data). Each training step (forward, softmax cross-entropy,
backward, SGD with momentum) is timed with dlperf.measure on both, interleaved
over rounds; the ratio nn / torch is printed. Target (issue 6): at most 2.0 for
the larger net. Exits 1 if missed.

    python benchmarks/nn_vs_torch.py [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys

TARGET = 2.0


def torch_step(torch, sizes, batch, rng):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        layers.append(torch.nn.Linear(a, b, dtype=torch.float64))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.tensor(rng.standard_normal((batch, sizes[0])))
    y = torch.tensor(rng.integers(0, sizes[-1], batch))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def nn_step(sizes, batch, rng):
    from dlperf import nn

    model = nn.mlp(sizes, seed=0)
    opt = nn.SGD(0.05, 0.9)
    x, y = rng.standard_normal((batch, sizes[0])), rng.integers(0, sizes[-1], batch)
    return lambda: model.train_step(x, y, opt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    import numpy as np
    import torch

    from dlperf import measure
    from dlperf.nn import operators as ops

    if args.threads:
        torch.set_num_threads(args.threads)
    ops.set_mode("vectorized")
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; float64 on both; {args.rounds} rounds")
    failed = False
    for name, sizes, batch in (("digits MLP 64-128-10, batch 64", [64, 128, 10], 64),
                               ("MLP 784-512-10, batch 256", [784, 512, 10], 256)):
        ours, theirs = nn_step(sizes, batch, rng), torch_step(torch, sizes, batch, rng)
        r_nn, r_torch = [], []
        for _ in range(args.rounds):
            r_nn.append(measure(ours, max_time_s=1.0).median_s)
            r_torch.append(measure(theirs, max_time_s=1.0).median_s)
        a, b = statistics.median(r_nn), statistics.median(r_torch)
        ratio = a / b
        line = f"{name:32s} dlperf.nn {a * 1e3:8.3f} ms | torch {b * 1e3:8.3f} ms | ratio nn/torch {ratio:.2f}"
        if sizes[0] == 784:
            ok = ratio <= TARGET
            failed |= not ok
            line += f" (target <= {TARGET}: {'met' if ok else 'MISSED'})"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
