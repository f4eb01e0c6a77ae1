"""gpu-check's timing part (scripts/gpu_steps.py, `quick:timing`): on a real GPU, the CUDA-event time dlperf
reads (frameworks/torch_fw.CudaEventTimer) against the wall time of the same work with the device synchronised
before and after. Runs only where a GPU is (`pytest -m gpu`)."""

from __future__ import annotations

import time

import pytest


@pytest.mark.gpu
def test_cuda_event_time_agrees_with_synchronised_wall_time():
    import torch

    from dlperf.frameworks.torch_fw import CudaEventTimer

    if not torch.cuda.is_available():
        pytest.fail("a GPU is present but torch sees no CUDA device")
    a = torch.randn(4096, 4096, device="cuda")
    b = a @ a  # warm-up: cuBLAS's handle and kernel choice
    torch.cuda.synchronize()
    events_s = {}
    for n_gemms in (4, 16, 64):
        timer = CudaEventTimer(torch, "cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        timer.start()
        for _ in range(n_gemms):
            b = a @ a
        event_s = timer.stop()
        torch.cuda.synchronize()
        wall_s = time.perf_counter() - t0
        # the events bracket the GEMMs on the device: never longer than the wall time around them, and short of
        # it by no more than launch and synchronisation overheads (2 ms, or 10% of the wall time)
        assert 0 < event_s <= wall_s, (n_gemms, event_s, wall_s)
        assert wall_s - event_s <= max(2e-3, 0.1 * wall_s), (n_gemms, event_s, wall_s)
        events_s[n_gemms] = event_s
    # the device clock counts the work: 16 times the GEMMs take 16 times as long, within 25%
    assert 12 < events_s[64] / events_s[4] < 20, events_s
    assert torch.isfinite(b).all()
