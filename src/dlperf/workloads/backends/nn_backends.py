"""The digits MLP or CNN training step in dlperf.nn, on the backend the framework selected."""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.workloads.backends import CNN_CHANNELS, MLP_SIZES, PROFILE_BATCHES, BackendsParams, data
from dlperf.workloads.base import Step


def build(fw: Framework, device: str, p: BackendsParams) -> Step:
    nn = fw.import_module()  # sets the operator backend
    from dlperf.nn import operators as ops

    x, y = data(p)
    model = nn.mlp(MLP_SIZES, seed=p.seed) if p.model == "mlp" else nn.cnn(seed=p.seed, channels=CNN_CHANNELS)
    model.to_backend()
    opt = nn.SGD(0.05, 0.9)
    b = ops.backend()
    batches = [(b.asarray(x[i:i + p.batch_size]), y[i:i + p.batch_size]) for i in range(0, len(x), p.batch_size)]
    cursor = [0]

    def step() -> float:
        xb, yb = batches[cursor[0] % len(batches)]
        cursor[0] += 1
        return model.train_step(xb, yb, opt)

    def fit_few() -> Any:
        return model.fit(x, y, epochs=1, batch_size=p.batch_size, max_batches=PROFILE_BATCHES, seed=p.seed)

    return Step(step, profile=fit_few)
