"""A source's training-step estimate from its counts at batches 1, 2 and 4 (`hardware.source_costs`): a counted
batch is its count, another the straight line through 1 and 2 where 4 lies on it; a quantity off the line is not
extrapolated (FLOPs: None with the reason; memory: an error naming the part)."""

from __future__ import annotations

import pytest

from dlperf.errors import DlperfError
from dlperf.hardware.source_costs import from_counts


def _counts(flops=lambda b: 100.0 * b, saved=lambda b: 10 + 40 * b) -> list[dict]:
    return [{"batch": b, "flops": flops(b), "params": 25, "params_bytes": 100, "input_bytes": 32 * b,
             "saved_bytes": saved(b), "largest_saved_bytes": 16 * b} for b in (1, 2, 4)]


def test_a_linear_step_is_extrapolated_and_its_memory_parts_add_up():
    c = from_counts("m.py:net", _counts(), 10, "fp32")
    assert (c.flops, c.input_bytes, c.saved_bytes, c.largest_saved_bytes) == (1000.0, 320, 410, 160)
    assert "extrapolated from the counts at batches 1, 2 and 4" in c.flops_note
    host, device = c.memory("host"), c.memory("device")
    assert host.total_bytes == 3 * 100 + 320 + 410 + 410  # params, grads, momentum; inputs; saved; their grads
    assert device.total_bytes == 3 * 100 + 320 + 410 + 2 * 160
    assert c.traffic_bytes() == 2 * 410 + 2 * 410 + 320 + 8 * 100


def test_a_counted_batch_is_its_count_even_off_the_line():
    c = from_counts("m.py:net", _counts(flops=lambda b: 7.0 * b * b), 4, "fp32")
    assert c.flops == 112.0 and c.how == "counted at batch 4"


def test_flops_off_the_line_are_not_estimated_and_say_why():
    c = from_counts("m.py:net", _counts(flops=lambda b: 7.0 * b * b), 16, "fp32")
    assert c.flops is None
    assert c.flops_note == ("not estimated: not linear in the batch (counted 7, 28 and 112 at batches 1, 2 and 4), "
                            "so not extrapolated to batch 16")
    c = from_counts("m.py:net", _counts(flops=lambda b: None), 2, "fp32")
    assert c.flops is None and "FlopCounterMode could not count it" in c.flops_note


def test_memory_off_the_line_is_refused_with_the_part_named():
    with pytest.raises(DlperfError, match="cannot estimate its memory at batch 8: saved bytes not linear in the "
                                          r"batch .* give --batch 1, 2 or 4"):
        from_counts("m.py:net", _counts(saved=lambda b: b * b), 8, "fp32")
