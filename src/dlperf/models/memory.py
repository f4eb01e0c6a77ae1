"""Memory of one training step, estimated from a model definition alone (no framework, no device).

What a training step of `batch` samples holds at its peak, by part:
- parameters, their gradients and the optimizer's state (SGD with momentum: one buffer per parameter);
- the input batch and its labels;
- activations kept for the backward pass: every layer's output (a ReLU done in place shares its
  convolution's output; a flatten is a view), plus what the backward of max pooling, dropout and LRN
  keeps beside it (pool argmax indices, the dropout mask, LRN's intermediates);
- the backward's gradients of activations. On a GPU (`where="device"`, the caching allocator's own
  count of live bytes) only those of the layer being differentiated are alive together: the largest
  layer's input and output gradients. In a CPU process (`where="host"`, the peak resident set) the C
  allocator keeps most freed blocks in its heap instead of returning them, so the high-water mark
  holds about one gradient per saved activation: the whole backward's gradients are counted.

This is an ESTIMATE: frameworks add workspaces (convolution algorithms), allocator caching, fused
kernels that keep less, and on a CPU the process's own footprint, which is measured separately
(`baseline_rss_bytes`, recorded by the worker before the workload is built) and never guessed here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dlperf.models import spec as S

#: Bytes per stored value for each precision: fp32 keeps everything in 4 bytes; amp keeps fp32 master
#: weights, gradients and optimizer state but 2-byte activations.
ACTIVATION_BYTES = {"fp32": 4, "amp": 2}
PARAM_BYTES = 4
#: Extra bytes per output element that a layer's backward keeps beside its output, as PyTorch keeps
#: them (read with torch.autograd.graph.saved_tensors_hooks in tests/test_recommend.py):
#: max-pool argmax indices (int64); the dropout mask (a float tensor of the output's size);
#: LocalResponseNorm, computed as separate ops, keeps three tensors of its size (the padded square,
#: the scale and the scale to the power beta). TensorFlow's fused LRN and max-pool gradient keep less,
#: so these err high for TensorFlow.
EXTRA_SAVED_BYTES = {"maxpool": 8, "dropout": 4, "lrn": 12}


@dataclass(frozen=True)
class TrainMemory:
    """Bytes of one training step by part; `total_bytes` is their sum (an estimate, see the module doc)."""

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    input_bytes: int
    activations_bytes: int
    activation_grads_bytes: int
    where: str = "device"

    @property
    def total_bytes(self) -> int:
        return (self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.input_bytes
                + self.activations_bytes + self.activation_grads_bytes)

    def to_dict(self) -> dict[str, int | str]:
        return asdict(self) | {"total_bytes": self.total_bytes}


def train_memory(model: S.ModelSpec, batch: int, image_size: int | None = None, *, precision: str = "fp32",
                 optimizer_slots: int = 1, where: str = "device") -> TrainMemory:
    """The estimate for `batch` samples of `image_size` (default: the model's) with SGD momentum;
    `where` is "device" (a GPU allocator's peak) or "host" (a CPU process's peak RSS, without the
    framework's own footprint)."""
    if where not in ("device", "host"):
        raise ValueError(f"where must be 'device' or 'host', not {where!r}")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    if precision not in ACTIVATION_BYTES:
        raise ValueError(f"precision must be one of {sorted(ACTIVATION_BYTES)}, not {precision!r}")
    act = ACTIVATION_BYTES[precision]
    infos = S.layers(model, image_size)
    n_params = sum(li.params for li in infos)
    size = image_size or model.image_size
    saved = 0
    all_grads = 0
    largest = 0
    for li in infos:
        if li.kind == "flatten":
            continue  # a view of its input
        n_out = math.prod(li.out_shape)
        saved += n_out * (act + EXTRA_SAVED_BYTES.get(li.kind, 0))
        all_grads += n_out * act
        largest = max(largest, (math.prod(li.in_shape) + n_out) * act)
    return TrainMemory(
        params_bytes=n_params * PARAM_BYTES,
        grads_bytes=n_params * PARAM_BYTES,
        optimizer_bytes=n_params * PARAM_BYTES * optimizer_slots,
        input_bytes=batch * (model.in_channels * size * size * 4 + 8),
        activations_bytes=batch * saved,
        activation_grads_bytes=batch * (all_grads if where == "host" else largest),
        where=where,
    )


def train_traffic_bytes(model: S.ModelSpec, batch: int, image_size: int | None = None, *,
                        precision: str = "fp32") -> int:
    """Memory traffic of one training step if no tensor stays in cache between layers (an estimate):
    each saved activation written in the forward and read in the backward, each activation gradient
    written and read once, the input read, and the parameters touched 8 times (read forward and
    backward, gradient written, SGD reading gradient, momentum and weight and writing the last two)."""
    m = train_memory(model, batch, image_size, precision=precision, where="host")
    return 2 * m.activations_bytes + 2 * m.activation_grads_bytes + m.input_bytes + 8 * m.params_bytes
