"""`cnn`: one training step (forward, softmax cross-entropy, backward, SGD with momentum) of a CNN, or (`task:
infer`) one forward pass in inference mode (no gradients), the logits brought to the host.

Study 001's workload: AlexNet and GoogLeNet (plus CaffeNet and LeNet-5) on
synthetic data of the model's input shape, created on the device before timing.
The builders are the `<family>_cnn` modules beside this one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dlperf.models import MODELS, get_spec, spec
from dlperf.workloads.base import Cost, Workload, WorkloadParams

#: The training step's optimizer settings and their defaults (refused on inference).
TRAIN_DEFAULTS: dict[str, float] = {"lr": 0.01, "momentum": 0.9}


class CnnParams(WorkloadParams):
    model: Literal["alexnet", "caffenet", "googlenet", "lenet5"]
    task: Literal["train", "infer"] = Field(default="train", description="train: one SGD step; infer: a forward pass")
    batch: int = Field(gt=0, description="images per step")
    image_size: int | None = Field(default=None, gt=0, description="square input side (default: the model's)")
    num_classes: int | None = Field(default=None, gt=1, description="default: 1000 (10 for lenet5)")
    precision: Literal["fp32", "amp"] = Field(
        default="fp32", description="amp: autocast fp16 + loss scaling on CUDA, bfloat16 on CPU")
    lr: float | None = Field(default=None, gt=0, description="train: SGD learning rate (default 0.01)")
    momentum: float | None = Field(default=None, ge=0, lt=1, description="train: SGD momentum (default 0.9)")

    @model_validator(mode="before")
    @classmethod
    def _task_defaults(cls, data: Any) -> Any:
        """The optimizer's settings belong to training: filled with their defaults there, refused on inference,
        so an inference case's key names no learning rate (a training case's key is as it always was)."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for key, default in TRAIN_DEFAULTS.items():
            if out.get("task", "train") == "train":
                out[key] = default if out.get(key) is None else out[key]
            elif out.get(key) is not None:
                raise ValueError(f"{key} applies to task train, not {out['task']}")
        return out

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


class Cnn(Workload[CnnParams]):
    name = "cnn"
    description = ("study 001 - CNN training step (AlexNet, CaffeNet, GoogLeNet, LeNet-5), SGD with momentum; "
                   "or inference (task: infer)")
    Params = CnnParams
    #: After an out-of-memory batch, the larger batches of the same series are not run.
    memory_axis = "batch"
    sample_unit = "image"

    def cost(self, params: CnnParams) -> Cost:
        count = spec.forward_flops if params.task == "infer" else spec.train_flops
        return Cost(flops=float(count(params.spec(), params.batch, params.image_size)), samples=params.batch)


__all__ = ["MODELS", "Cnn", "CnnParams"]
