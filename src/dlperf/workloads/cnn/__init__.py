"""`cnn`: one training step (forward, softmax cross-entropy, backward, SGD with momentum) of a CNN.

Study 001's workload: AlexNet and GoogLeNet (plus CaffeNet and LeNet-5) on
synthetic data of the model's input shape, created on the device before timing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from dlperf.frameworks import Framework
from dlperf.models import MODELS, get_spec, spec
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams


class CnnParams(WorkloadParams):
    model: Literal["alexnet", "caffenet", "googlenet", "lenet5"]
    batch: int = Field(gt=0, description="images per training step")
    image_size: int | None = Field(default=None, gt=0, description="square input side (default: the model's)")
    num_classes: int | None = Field(default=None, gt=1, description="default: 1000 (10 for lenet5)")
    precision: Literal["fp32", "amp"] = Field(
        default="fp32", description="amp: autocast fp16 + loss scaling on CUDA, bfloat16 on CPU")
    lr: float = Field(default=0.01, gt=0)
    momentum: float = Field(default=0.9, ge=0, lt=1)

    @model_validator(mode="after")
    def _fits(self) -> CnnParams:
        spec.layers(self.spec(), self.image_size)  # raises ValueError when the image is too small for the net
        return self

    def spec(self) -> spec.ModelSpec:
        return get_spec(self.model, self.classes())

    def classes(self) -> int:
        return self.num_classes or get_spec(self.model).num_classes

    def size(self) -> int:
        return self.image_size or self.spec().image_size


class Cnn(Workload):
    name = "cnn"
    description = "study 001 - CNN training step (AlexNet, CaffeNet, GoogLeNet, LeNet-5), SGD with momentum"
    Params = CnnParams
    #: A parameter along which memory grows: after an OOM the larger values of a series are not run.
    memory_axis: ClassVar[str | None] = "batch"

    def cost(self, params: CnnParams) -> Cost:  # type: ignore[override]
        return Cost(flops=float(spec.train_flops(params.spec(), params.batch, params.image_size)),
                    samples=params.batch)

    def builders(self) -> dict[str, Callable[..., Any]]:
        def torch_builder(fw: Framework, device: str, p: CnnParams) -> Step:
            from dlperf.workloads.cnn import torch_cnn

            return torch_cnn.build(fw, device, p)

        def tf_builder(fw: Framework, device: str, p: CnnParams) -> Step:
            from dlperf.workloads.cnn import tensorflow_cnn

            return tensorflow_cnn.build(fw, device, p)

        def caffe_builder(fw: Framework, device: str, p: CnnParams) -> Step:
            from dlperf.workloads.cnn import caffe_cnn

            return caffe_cnn.build(fw, device, p)

        return {"torch": torch_builder, "tensorflow": tf_builder, "tensorflow-eager": tf_builder,
                "caffe": caffe_builder}


__all__ = ["MODELS", "Cnn", "CnnParams"]
