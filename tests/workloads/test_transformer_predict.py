"""The transformer's `task: infer` serves: `Step.predict(n)` on every framework with an infer builder gives the
first n sequences' logits of the full-batch forward pass, on the host, and refuses n outside 1..batch; training
and generation steps cannot be served."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import get_framework
from dlperf.workloads import get_workload

W = get_workload("transformer")
FRAMEWORKS = ["torch", "tensorflow", "tensorflow-eager", "jax", "numpy"]


def built(framework: str, **raw):
    fw = get_framework(framework)
    fw.seed(0)
    return W.build(fw, "cpu", W.parse(raw))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model", ["gpt2-tiny", "bert-tiny"])
def test_predict_is_the_first_rows_of_the_full_batch(framework, model):
    step = built(framework, model=model, task="infer", batch=3, seq_len=16)
    assert step.predict is not None
    step.fn()
    full = step.result()
    assert full.shape[0] == 3 and np.isfinite(full).all()
    for n in (1, 3, 2, 1):  # a repeated n reuses its slice (and its trace or compiled program)
        out = step.predict(n)
        assert out.device.type == "cpu" if framework == "torch" else isinstance(out, np.ndarray)  # on the host
        got = np.asarray(out)
        assert got.shape == (n, *full.shape[1:])
        # another batch size may take another kernel: equal within float32 rounding, not bit for bit
        np.testing.assert_allclose(got.astype(np.float64), full[:n], rtol=1e-5, atol=1e-6 * np.abs(full).max())
    for bad in (0, 4):
        with pytest.raises(ValueError, match="1 to 3"):
            step.predict(bad)


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_training_and_generation_steps_cannot_be_served(framework):
    assert built(framework, model="gpt2-tiny", task="train", batch=2, seq_len=8).predict is None
    assert built(framework, model="gpt2-tiny", task="generate", batch=1, prompt_len=4, new_tokens=2).predict is None
