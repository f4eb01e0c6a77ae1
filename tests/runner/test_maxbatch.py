"""`dlperf maxbatch` on any workload with a memory axis: the target's resolution (a CNN model's name or a workload
with its -p parameters), the errors that stop it before a store is opened, and the search along an axis named by
the workload, with workers replaced by a function of the probe's parameters (the real search runs end to end in
tests/workloads/test_cnn.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest
from pydantic import Field

from dlperf.errors import StudyError
from dlperf.runner import maxbatch
from dlperf.runner.maxbatch import Target, UnknownTarget, check_search, resolve_target
from dlperf.store import Store
from dlperf.workloads import REGISTRY
from dlperf.workloads.base import Cost, Workload, WorkloadParams


class ToyParams(WorkloadParams):
    size_mb: int = Field(gt=0)
    width: int = Field(default=1, gt=0, le=8)


class Toy(Workload[ToyParams]):
    """A workload whose memory axis is not called batch (registered only inside these tests)."""

    name: ClassVar[str] = "toy"
    Params = ToyParams
    memory_axis = "size_mb"

    def cost(self, params: ToyParams) -> Cost:
        return Cost(samples=params.size_mb)

    def frameworks(self) -> list[str]:
        return ["numpy", "torch"]  # no builder modules: its probes are replaced (`_no_workers`)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "toy", Toy)


def _no_workers(monkeypatch: pytest.MonkeyPatch, outcome: Any, seen: list[Any]) -> None:
    """The search fingerprints and runs probes without a worker; `outcome(case)` is a probe's (status, reason)."""
    from dlperf.runner.sweep import result_row

    def run_case(case, settings, run_id, env_id, counters=False):
        seen.append(case)
        status, reason = outcome(case)
        metrics = {"median_s": 1e-3, "iqr_rel": 0.0, "n_samples": 2, "time_per_sample_s": 1e-4,
                   "peak_rss_bytes": 2**20 * 10}
        return result_row(case, {"status": status, "reason": reason, "metrics": metrics}, run_id, env_id,
                          wall_s=0.0, started=datetime.now(UTC))

    monkeypatch.setattr(maxbatch, "collect_fingerprint", lambda names, threads: {"cpu_model": "test"})
    monkeypatch.setattr(maxbatch, "run_case", run_case)


def test_a_cnn_model_name_is_the_cnn_workload_searched_along_batch():
    assert resolve_target("lenet5") == Target("cnn", "batch", {"model": "lenet5", "precision": "fp32"}, "lenet5",
                                              model="lenet5")
    t = resolve_target("alexnet", {"num_classes": 10}, image_size=64, precision="amp")
    assert t.params == {"model": "alexnet", "precision": "amp", "image_size": 64, "num_classes": 10}
    assert resolve_target("alexnet", {"precision": "amp", "image_size": 64}).params == {
        "model": "alexnet", "precision": "amp", "image_size": 64}
    assert t.sample == "image"


def test_a_source_is_the_model_workload_searched_along_batch_its_training_step_by_default():
    t = resolve_target("m.py:build", {"precision": "bf16"}, source_options={"input": ("x:float32[B,8]",),
                                                                            "inputs_fn": None, "seq": None})
    assert (t.workload, t.axis, t.model) == ("model", "batch", None)
    assert t.params == {"source": "m.py:build", "precision": "bf16", "input": ["x:float32[B,8]"], "task": "train"}
    assert t.label == "m.py:build precision=bf16 input=x:float32[B,8] task=train"
    onnx = resolve_target("net.onnx", source_options={"seq": 3})
    assert onnx.params == {"source": "net.onnx", "seq": 3, "task": "infer"}  # the one task an ONNX file runs
    assert resolve_target("hf:gpt2,n_layer=1", source_options={"task": "generate"}).params["task"] == "generate"


def test_a_workload_name_takes_its_parameters_from_p():
    t = resolve_target("transformer", {"model": "gpt2-tiny", "task": "train", "seq_len": 64})
    assert (t.workload, t.axis, t.model, t.sample) == ("transformer", "batch", None, "token")
    assert t.label == "transformer model=gpt2-tiny task=train seq_len=64"
    check_search(t, framework="torch", start=1, max_batch=8)  # valid: no error


@pytest.mark.parametrize(("target", "params", "options", "error", "fragment"), [
    ("resnet", {}, {}, UnknownTarget, "'resnet' is neither a CNN model (alexnet, caffenet, googlenet, lenet5), "
                                      "a workload with a memory axis (cnn, model, transformer) nor a source"),
    ("lenet5", {}, {"source_options": {"input": ("x:float32[B,8]",), "seq": 4}}, StudyError,
     "--input, --seq are for a SOURCE target"),
    ("dlperf:lenet5", {}, {"precision": "amp"}, StudyError, "give a source's precision as -p precision=bf16"),
    ("m.py:build", {"task": "infer"}, {"source_options": {"task": "train"}}, StudyError,
     "-p task is set by --task: give it once"),
    ("m.py:build", {"batch": 2}, {}, StudyError, "-p batch is set by the search"),
    ("faults", {"mode": "ok"}, {}, UnknownTarget, "workload 'faults' has no memory axis to search"),
    ("transformer", {"model": "gpt2-tiny", "batch": 4}, {}, StudyError, "-p batch sets the axis the search varies"),
    ("transformer", {"model": "gpt2-tiny", "seq_len": 8}, {"precision": "amp"}, StudyError,
     "--precision is for a CNN model's name"),
    ("cnn", {"model": "lenet5"}, {"image_size": 64}, StudyError, "--image-size is for a CNN model's name"),
    ("alexnet", {"precision": "amp"}, {"precision": "fp32"}, StudyError, "-p precision and --precision both set"),
    ("alexnet", {"model": "lenet5"}, {}, StudyError, "-p model and TARGET both set"),
])
def test_a_target_that_cannot_be_searched_is_refused(target, params, options, error, fragment):
    with pytest.raises(error) as exc:
        resolve_target(target, params, **options)
    assert fragment in str(exc.value)


@pytest.mark.parametrize(("target", "params", "fragment"), [
    ("transformer", {"model": "gpt2-tiny", "task": "train"}, "maxbatch: task train needs seq_len"),
    ("transformer", {"model": "gpt2-tiny", "seq_len": 999}, "seq_len 999 exceeds the context of 128"),
    ("transformer", {"model": "gpt2-tiny", "seq_len": 8, "colour": "red"}, "colour: Extra inputs are not permitted"),
    ("transformer", {"model": "gpt2-huge", "seq_len": 8}, "unknown transformer 'gpt2-huge'"),
    ("cnn", {"model": "lenet5", "image_size": 1}, "too small"),
])
def test_bad_parameters_are_named_before_any_store(target, params, fragment):
    with pytest.raises(StudyError, match="^maxbatch: ") as exc:
        check_search(resolve_target(target, params), framework="torch", start=1, max_batch=8)
    assert fragment in str(exc.value)


def test_the_search_varies_the_workloads_own_axis(tmp_path, monkeypatch, toy):
    seen: list[Any] = []
    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["size_mb"] <= 40 else ("oom", "too big"), seen)
    store = Store(tmp_path / "r.sqlite")
    target = resolve_target("toy", {"width": 3})
    out = maxbatch.search(store, target, framework="numpy", device="cpu", start=5, max_batch=1000, steps=1,
                          exact=True)
    assert (out.largest, out.first_oom, out.stopped) == (40, 41, None)
    assert [c.params["size_mb"] for c in seen] == [5, 10, 20, 40, 80, 60, 50, 45, 42, 41]
    assert all(c.workload == "toy" and c.params["width"] == 3 for c in seen)
    run = store.run(out.run_id)
    assert (run.study, run.variant, run.status) == ("maxbatch", "toy width=3", "complete")
    assert run.filters == {"framework": "numpy", "device": "cpu", "start": 5, "max_batch": 1000,
                              "workload": "toy", "axis": "size_mb"}
    stored = store.results(out.run_id)
    assert sorted(r.params["size_mb"] for r in stored) == sorted(c.params["size_mb"] for c in seen)
    assert {r.status for r in stored} == {"ok", "oom"}


def test_a_start_that_does_not_fit_is_halved_until_one_does(tmp_path, monkeypatch, toy):
    """CI's machine ran out of memory at LeNet's --start 2048 under 600 MiB, where this AMD one peaked at
    564 MiB: the libraries' own footprint under the cap differs by machine. The search then found nothing; now it
    halves down from --start and bisects as before."""
    seen: list[Any] = []
    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["size_mb"] <= 10 else ("oom", "too big"), seen)
    store = Store(tmp_path / "r.sqlite")
    out = maxbatch.search(store, resolve_target("toy", {}), framework="numpy", device="cpu", start=64,
                          max_batch=1000, steps=1, exact=True)
    assert [c.params["size_mb"] for c in seen] == [64, 32, 16, 8, 12, 10, 11]
    assert (out.largest, out.first_oom, out.stopped) == (10, 11, None)
    assert store.run(out.run_id).status == "complete"


@pytest.mark.parametrize(("fits", "largest", "probes"), [(0, None, [8, 4, 2, 1]), (1, 1, [8, 4, 2, 1])])
def test_halving_stops_at_1(tmp_path, monkeypatch, toy, fits, largest, probes):
    seen: list[Any] = []
    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["size_mb"] <= fits else ("oom", "x"), seen)
    out = maxbatch.search(Store(tmp_path / "r.sqlite"), resolve_target("toy", {}), framework="numpy", device="cpu",
                          start=8, steps=1)
    assert [c.params["size_mb"] for c in seen] == probes
    assert (out.largest, out.first_oom) == (largest, 1 if largest is None else 2)


def test_a_failure_while_halving_stops_the_search(tmp_path, monkeypatch, toy):
    seen: list[Any] = []
    _no_workers(monkeypatch, lambda case: ("oom", "x") if case.params["size_mb"] > 4 else ("error", "boom"), seen)
    store = Store(tmp_path / "r.sqlite")
    out = maxbatch.search(store, resolve_target("toy", {}), framework="numpy", device="cpu", start=16, steps=1)
    assert [c.params["size_mb"] for c in seen] == [16, 8, 4]
    assert out.largest is None and out.stopped == "size_mb 4 ended error: boom"
    assert store.run(out.run_id).status == "failed"


def test_a_failure_other_than_memory_stops_the_search_and_names_the_axis(tmp_path, monkeypatch, toy):
    seen: list[Any] = []
    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["size_mb"] < 4 else ("error", "boom"), seen)
    store = Store(tmp_path / "r.sqlite")
    out = maxbatch.search(store, resolve_target("toy", {}), framework="numpy", device="cpu", steps=1)
    assert out.largest == 2 and out.stopped == "size_mb 4 ended error: boom"
    assert store.run(out.run_id).status == "failed"


def test_the_cnn_form_stores_its_run_as_it_always_did(tmp_path, monkeypatch):
    seen: list[Any] = []
    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["batch"] <= 4 else ("oom", "OOM"), seen)
    store = Store(tmp_path / "r.sqlite")
    out = maxbatch.search(store, resolve_target("lenet5"), framework="torch", device="cpu", steps=1)
    run = store.run(out.run_id)
    assert (run.variant, run.filters) == ("lenet5", {"framework": "torch", "device": "cpu", "start": 1,
                                                           "max_batch": 8192})
    assert seen[0].params == {"model": "lenet5", "precision": "fp32", "batch": 1} and out.largest == 4


def test_a_search_shows_its_probes_and_a_killed_one_says_it_is_not_resumed(tmp_path, monkeypatch, toy):
    """`runs` gave a search "3/0" cases (its count is not known beforehand), and a killed one stayed
    `interrupted (owner gone)` for ever, though nothing resumes a search."""
    from dlperf.runner.lifecycle import SEARCH_OWNER_GONE, shown_cases, shown_status
    from tests.conftest import run_cli

    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["size_mb"] <= 2 else ("oom", "OOM"), [])
    db = tmp_path / "r.sqlite"
    store = Store(db)
    out = maxbatch.search(store, resolve_target("toy", {}), framework="numpy", device="cpu", steps=1)
    assert [p.value for p in out.probes] == [1, 2, 4, 3]
    (row,) = store.list_runs()
    assert shown_cases(row.study, row.n_done, row.n_cases) == "4 (search)"
    assert shown_cases("many_ok", 3, 12) == "3/12"
    store.set_run_status(out.run_id, "running")  # as a SIGKILL leaves it: running, its owner gone
    (row,) = store.list_runs()
    assert shown_status(row.status, row.lease, study=row.study) == SEARCH_OWNER_GONE
    assert shown_status(row.status, row.lease, study="many_ok") == "interrupted (owner gone)"
    shown = run_cli("runs", db=db).stdout
    assert "4 (search)" in shown and "a search is not resumed: run it again" in shown and "4/0" not in shown
