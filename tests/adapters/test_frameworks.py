"""Adapters: registry, presence without import, devices, sync, seeds, threads, memory; base hooks fail loudly."""

from __future__ import annotations

import pytest

from dlperf.frameworks import REGISTRY, Framework, UnsupportedError, get_framework
from dlperf.timing import measure


def test_registry_and_unknown_name():
    assert {"numpy", "torch"} <= set(REGISTRY)
    with pytest.raises(KeyError, match="unknown framework 'mxnet'"):
        get_framework("mxnet")


def test_base_hooks_fail_loudly():
    class Bare(Framework):
        name = "bare"
        module = "json"

    fw = Bare()
    assert fw.available()
    for call in (fw.devices, lambda: fw.sync("cpu"), lambda: fw.seed(0), lambda: fw.set_threads(1)):
        with pytest.raises(NotImplementedError, match="Bare does not implement"):
            call()
    assert fw.peak_memory_bytes("cpu") == (None, "bare keeps no allocator statistics for cpu")


def test_absent_framework_is_unsupported():
    class Ghost(Framework):
        name = "ghost"
        module = "no_such_module_dlperf"

    fw = Ghost()
    assert not fw.available() and fw.version is None
    with pytest.raises(UnsupportedError, match="ghost is not installed"):
        fw.import_module()


@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_cpu_adapter(name):
    fw = get_framework(name)
    assert fw.available() and fw.version
    assert "cpu" in fw.devices()
    assert fw.check_device("cpu") == "cpu"
    fw.sync("cpu")
    fw.sync_fn("cpu")()
    assert fw.device_timer("cpu") is None
    fw.set_threads(1)
    assert fw.threads() == 1
    info = fw.info()
    assert info["version"]
    peak, how = fw.peak_memory_bytes("cpu")
    assert peak is None and "no" in how  # honest: no CPU allocator statistics


def test_torch_info_names_blas():
    info = get_framework("torch").info()
    assert info.get("blas_info") and info["threads"] >= 1


def test_numpy_info_names_blas():
    assert "blas" in get_framework("numpy").info()


def test_seed_makes_frameworks_deterministic():
    np_fw, torch_fw = get_framework("numpy"), get_framework("torch")
    np = np_fw.import_module()
    torch = torch_fw.import_module()
    np_fw.seed(3)
    a = np.random.rand(4)
    np_fw.seed(3)
    assert (np.random.rand(4) == a).all()
    torch_fw.seed(3)
    b = torch.rand(4)
    torch_fw.seed(3)
    assert torch.equal(torch.rand(4), b)


def test_seed_fixes_a_keras_models_initial_weights():
    """Keras 3 seeds initializers from Python's `random`: seeding only TensorFlow would not fix them."""
    fw = get_framework("tensorflow")
    fw.import_module()
    import keras

    def weights():
        fw.seed(3)
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]).get_weights()[0]

    first = weights()
    assert (weights() == first).all()


def test_cupy_adapter_where_cupy_is_absent():
    fw = get_framework("cupy")
    if fw.available():
        pytest.skip("CuPy is installed here: test_ops.py::test_same_output_on_the_gpu covers it")
    assert fw.version is None and "pip install" in fw.install_hint
    with pytest.raises(UnsupportedError, match="cupy is not installed"):
        fw.devices()


def test_missing_device_is_unsupported():
    with pytest.raises(UnsupportedError, match="numpy has no device 'cuda'"):
        get_framework("numpy").check_device("cuda")


def test_torch_oom_classification():
    fw = get_framework("torch")
    assert fw.is_oom(MemoryError())
    assert fw.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"))
    assert not fw.is_oom(RuntimeError("shape mismatch"))
    # oneDNN's words for a failed primitive are a suspect, not an OOM: the worker re-checks them.
    onednn = RuntimeError("could not create a primitive")
    assert fw.oom_suspect(onednn) and not fw.is_oom(onednn)
    assert not fw.oom_suspect(RuntimeError("shape mismatch"))



@pytest.mark.parametrize("name", ["onnxruntime", "openvino"])
def test_a_runtimes_failed_allocation_inside_a_run_is_out_of_memory(name: str) -> None:
    """Words recorded from onnxruntime 1.2x runs under a 600 MiB cap (dlperf maxbatch FILE.onnx): its arena's
    refusal and a std::bad_alloc, both RuntimeErrors; before, they ended a maxbatch search as errors."""
    fw = get_framework(name)
    arena = RuntimeError("Error in execution: Non-zero status code returned while running Relu node. Name:'' Status "
                         "Message: bfc_arena.cc:360 Failed to allocate memory for requested buffer of size 256000000")
    bad_alloc = RuntimeError("Error in execution: Non-zero status code returned while running Relu node. Name:'' "
                             "Status Message: std::bad_alloc")
    assert fw.is_oom(arena) and fw.is_oom(bad_alloc) and fw.is_oom(MemoryError())
    assert not fw.is_oom(RuntimeError("Error in execution: Got invalid dimensions for input: x"))

@pytest.mark.gpu
def test_torch_cuda_events_peak_memory_and_sync():
    fw = get_framework("torch")
    torch = fw.import_module()
    dev = fw.check_device("cuda")
    a = torch.randn(2048, 2048, device=dev)
    fw.reset_peak_memory(dev)
    b = a @ a
    peak, how = fw.peak_memory_bytes(dev)
    assert peak >= b.numel() * 4 and how == "torch.cuda.max_memory_allocated"
    m = measure(lambda: torch.matmul(a, a, out=b), sync=fw.sync_fn(dev), device_timer=fw.device_timer(dev),
                max_time_s=1.0)
    assert m.timer == "cuda_event" and m.median_s > 0
    # host clock around the same synced work agrees with the device events within 20%
    h = measure(lambda: torch.matmul(a, a, out=b), sync=fw.sync_fn(dev), max_time_s=1.0)
    assert abs(h.median_s / m.median_s - 1) < 0.2
