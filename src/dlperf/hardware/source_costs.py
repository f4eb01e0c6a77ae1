"""A source's training step as `dlperf recommend --model SOURCE` estimates it: FLOPs, memory by part and memory
traffic at the requested batch, from what `workloads.model.costs` counted on the eager module at batches 1, 2
and 4.

Every figure is an ESTIMATE. At a counted batch it is the count; elsewhere the straight line through the counts
at 1 and 2, used only where the count at 4 lies on it (within `LINEAR_TOLERANCE`): a quantity that is not
linear in the batch is not extrapolated, and says so. The memory parts follow `models.memory`'s for the CNNs:
parameters, their gradients and SGD momentum (one buffer each); the inputs; the activations autograd keeps for
the backward (counted with saved-tensor hooks); their gradients: as many bytes again in a CPU process (the
host's allocator keeps freed blocks), twice the largest saved tensor on a GPU (one operation's input and output
gradients alive at once). The traffic is `models.memory.train_traffic_bytes`' formula over these parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlperf.errors import DlperfError
from dlperf.models.memory import TrainMemory

#: How far (relative) the count at batch 4 may lie from the line through batches 1 and 2 for a quantity to be
#: extrapolated.
LINEAR_TOLERANCE = 0.02
#: The counted quantities that scale with the batch.
SCALED = ("flops", "input_bytes", "saved_bytes", "largest_saved_bytes")


@dataclass(frozen=True)
class SourceCosts:
    """A source's training step at `batch` (ESTIMATES; see the module's doc). `flops` is None where it could not
    be estimated, `flops_note` then says why; otherwise it says how it was obtained."""

    source: str
    batch: int
    precision: str
    params: int
    params_bytes: int
    input_bytes: int
    saved_bytes: int
    largest_saved_bytes: int
    flops: float | None
    flops_note: str
    how: str  # how the batch's figures were obtained (counted, or extrapolated from which batches)

    def memory(self, where: str) -> TrainMemory:
        """The step's memory by part for a CPU process (`where="host"`) or a GPU's allocator (`"device"`)."""
        return TrainMemory(params_bytes=self.params_bytes, grads_bytes=self.params_bytes,
                           optimizer_bytes=self.params_bytes, input_bytes=self.input_bytes,
                           activations_bytes=self.saved_bytes,
                           activation_grads_bytes=self.saved_bytes if where == "host" else 2 * self.largest_saved_bytes,
                           where=where)

    def traffic_bytes(self) -> int:
        """Memory traffic of one step if no tensor stays in cache (`models.memory.train_traffic_bytes`' count)."""
        m = self.memory("host")
        return 2 * m.activations_bytes + 2 * m.activation_grads_bytes + m.input_bytes + 8 * m.params_bytes


def _at(counts: dict[int, dict[str, Any]], key: str, batch: int) -> tuple[float | None, str | None]:
    """(value of `key` at `batch`, None) or (None, why it cannot be estimated there)."""
    if batch in counts:
        value = counts[batch][key]
        return (None, "torch's FlopCounterMode could not count it") if value is None else (float(value), None)
    one, two, four = (counts[b][key] for b in (1, 2, 4))
    if None in (one, two, four):
        return None, "torch's FlopCounterMode could not count it"
    line4 = one + 3 * (two - one)
    if abs(four - line4) > LINEAR_TOLERANCE * max(abs(four), 1.0):
        return None, (f"not linear in the batch (counted {one:,.0f}, {two:,.0f} and {four:,.0f} at batches 1, 2 and "
                      f"4), so not extrapolated to batch {batch}")
    return max(0.0, one + (batch - 1) * (two - one)), None


def from_counts(source: str, counts: list[dict[str, Any]], batch: int, precision: str) -> SourceCosts:
    """The estimate at `batch` from `workloads.model.costs`' counts; a DlperfError where the memory cannot be
    estimated there (a FLOP count that cannot be is kept as None with its reason)."""
    by_batch = {int(c["batch"]): c for c in counts}
    if not {1, 2, 4} <= set(by_batch):
        raise DlperfError(f"{source}: counting its training step gave batches {sorted(by_batch)}, not 1, 2 and 4")
    values: dict[str, float] = {}
    for key in SCALED[1:]:
        value, why = _at(by_batch, key, batch)
        if value is None:
            raise DlperfError(f"{source}: cannot estimate its memory at batch {batch}: {key.replace('_', ' ')} "
                              f"{why}; give --batch 1, 2 or 4, or measure it (dlperf maxbatch {source})")
        values[key] = value
    flops, why = _at(by_batch, "flops", batch)
    how = f"counted at batch {batch}" if batch in by_batch else "extrapolated from the counts at batches 1, 2 and 4"
    note = why or f"torch's FlopCounterMode over one forward, loss and backward ({how})"
    first = by_batch[1]
    return SourceCosts(source=source, batch=batch, precision=precision, params=int(first["params"]),
                       params_bytes=int(first["params_bytes"]), input_bytes=int(values["input_bytes"]),
                       saved_bytes=int(values["saved_bytes"]), largest_saved_bytes=int(values["largest_saved_bytes"]),
                       flops=flops, flops_note=f"not estimated: {why}" if why else note, how=how)
