"""The CNN training step in Caffe: the same net as a generated prototxt, one SGDSolver.step(1) per call.

Inference (`task: infer`) is not built for Caffe: pycaffe is not installed where dlperf is developed and tested,
so a Caffe forward pass could not be checked against torch's here; it ends `unsupported` with that reason."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.models.caffe_prototxt import net_prototxt, solver_prototxt
from dlperf.workloads.base import Step
from dlperf.workloads.cnn import CnnParams


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    if p.task != "train":
        raise UnsupportedError(f"cnn task {p.task!r} is not built for caffe: pycaffe is not installed where dlperf "
                               "is tested, so an untested Caffe inference path is not shipped (training only)")
    caffe = fw.import_module()
    if p.precision != "fp32":
        raise UnsupportedError("Caffe runs fp32 only here")
    fw.use_device(device)  # type: ignore[attr-defined]
    folder = Path(tempfile.mkdtemp(prefix="dlperf-caffe-"))
    net_path = folder / "train.prototxt"
    net_path.write_text(net_prototxt(p.spec(), p.batch, p.image_size))
    solver_path = folder / "solver.prototxt"
    solver_path.write_text(solver_prototxt(str(net_path), p.lr, p.momentum, gpu=device != "cpu"))
    solver = caffe.SGDSolver(str(solver_path))
    rng = np.random.default_rng(0)
    size = p.size()
    solver.net.blobs["data"].data[...] = rng.standard_normal((p.batch, p.spec().in_channels, size, size))
    solver.net.blobs["label"].data[...] = rng.integers(0, p.classes(), p.batch)

    def step() -> Any:
        solver.step(1)  # Input layers keep their blobs, so every step trains on the same batch

    return Step(step, lambda: np.array([float(solver.net.blobs["loss"].data)]))
