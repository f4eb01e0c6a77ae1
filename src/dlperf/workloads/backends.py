"""`backends` (study 003): a training step of the digits MLP or CNN on each dlperf.nn backend, and in PyTorch.

One timed call is one training step (forward, softmax cross-entropy, backward,
SGD with momentum) on the next batch of the digits training set. Time per epoch
is derived from the per-step median (steps per epoch x median) and labelled as
derived: the sequential backend is timed on few steps, never a whole epoch.
`Step.profile` runs `fit` for a few batches, for the cProfile profile.

Cost convention: FLOPs of the matrix products and convolutions only, forward
plus the two backward products (input and weight gradients): 3 x forward.
Element-wise work (ReLU, pooling, loss, SGD) is not counted.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import numpy as np
from pydantic import Field

from dlperf.frameworks import Framework
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams

MLP_SIZES = [64, 128, 10]
CNN_CHANNELS = 8
PROFILE_BATCHES = 3


class BackendsParams(WorkloadParams):
    model: Literal["mlp", "cnn"]
    batch_size: int = Field(default=32, gt=0)
    seed: int = 0


def _data(p: BackendsParams) -> tuple[np.ndarray, np.ndarray]:
    return _digits_train(p.model == "cnn", p.seed)


@cache
def _digits_train(image: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training split, loaded once per worker (build and steps_per_epoch both need it); read-only."""
    from dlperf.nn.data import digits

    x_train, _, y_train, _ = digits(image=image, seed=seed)
    return x_train, y_train


class Backends(Workload):
    name = "backends"
    description = "study 003: a digits MLP/CNN training step on each dlperf.nn backend and in PyTorch"
    Params = BackendsParams

    def cost(self, params: BackendsParams) -> Cost:  # type: ignore[override]
        b = params.batch_size
        if params.model == "mlp":
            fwd = sum(2 * b * a * c for a, c in zip(MLP_SIZES, MLP_SIZES[1:], strict=False))
        else:
            conv = 2 * b * CNN_CHANNELS * 8 * 8 * 1 * 3 * 3
            dense = 2 * b * CNN_CHANNELS * 4 * 4 * 10
            fwd = conv + dense
        return Cost(flops=3.0 * fwd, bytes_moved=None, samples=b)

    def steps_per_epoch(self, params: BackendsParams) -> int:
        n = len(_data(params)[1])
        return -(-n // params.batch_size)

    def _nn(self, fw: Framework, device: str, p: BackendsParams) -> Step:
        nn = fw.import_module()  # sets the operator backend
        from dlperf.nn import operators as ops

        x, y = _data(p)
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

    def builders(self) -> dict[str, Any]:
        return {"nn-sequential": self._nn, "nn-vectorized": self._nn, "nn-cuda": self._nn, "nn-cuda-cublas": self._nn,
                "torch": self.build_torch}

    def build_torch(self, fw: Framework, device: str, p: BackendsParams) -> Step:
        """The same architecture in PyTorch, float64 like dlperf.nn, as the reference."""
        torch = fw.import_module()
        x, y = _data(p)
        torch.manual_seed(p.seed)
        if p.model == "mlp":
            model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
        else:
            model = torch.nn.Sequential(torch.nn.Conv2d(1, CNN_CHANNELS, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                        torch.nn.Linear(CNN_CHANNELS * 16, 10))
        model = model.double().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        batches = [(torch.from_numpy(x[i:i + p.batch_size]).to(device),
                    torch.from_numpy(y[i:i + p.batch_size]).to(device)) for i in range(0, len(x), p.batch_size)]
        cursor = [0]

        def step() -> Any:
            xb, yb = batches[cursor[0] % len(batches)]
            cursor[0] += 1
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss

        def fit_few() -> None:
            for _ in range(PROFILE_BATCHES):
                step()

        return Step(step, profile=fit_few)
