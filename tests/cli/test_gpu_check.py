"""`make gpu-check` (scripts/gpu_check.py, scripts/gpu_evidence.py) where no GPU is: the one-line refusal, the
device-kind name, the study plan, the step runner, the summaries and the README written from made-up outcomes;
and the whole orchestration once, against a stand-in nvidia-smi, with the one study that has nothing for cuda."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_check  # noqa: E402  (scripts/ is not a package: found through the line above)
from gpu_evidence import StepOutcome, StudyPlan, device_kind, junit_summary, render_readme, run_summary  # noqa: E402


def _fake_smi(tmp_path: Path, body: str) -> Path:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    smi.chmod(0o755)
    return smi


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def test_without_nvidia_smi_it_says_so_in_one_line_and_writes_nothing(tmp_path):
    res = _run("--nvidia-smi", str(tmp_path / "absent"), "--out", str(tmp_path / "evidence"))
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        "gpu-check: no NVIDIA GPU on this machine (nvidia-smi is not installed); no evidence written"]
    assert not (tmp_path / "evidence").exists()


def test_a_driver_that_does_not_answer_is_no_gpu_either(tmp_path):
    smi = _fake_smi(tmp_path, "print(\"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                              "driver.\")\nsys.exit(9)")
    res = _run("--nvidia-smi", str(smi), "--out", str(tmp_path / "evidence"))
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "nvidia-smi exited 9: NVIDIA-SMI has failed" in lines[0]
    assert not (tmp_path / "evidence").exists()


def test_a_bad_timeout_option_is_one_line(tmp_path):
    res = _run("--timeout", "study:ops=soon", "--nvidia-smi", str(tmp_path / "absent"))
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1 and "--timeout study:ops=soon" in res.stderr


@pytest.mark.parametrize(("name", "kind"), [
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
    ("NVIDIA A100-SXM4-40GB", "nvidia-a100-sxm4-40gb"),
    ("  Tesla K40c ", "tesla-k40c"),
    ("NVIDIA GeForce GTX 980 (rev. a1)", "nvidia-geforce-gtx-980-rev-a1"),
])
def test_device_kind_is_the_gpu_name_slugified(name, kind):
    assert device_kind(name) == kind


def test_a_name_without_letters_cannot_name_a_folder():
    with pytest.raises(ValueError, match="no letter or digit"):
        device_kind(" -- ")


def test_every_shipped_study_is_planned_and_those_without_cuda_are_named(tmp_path):
    from dlperf.studies import load_study, shipped_studies

    plans = gpu_check.plan_studies(tmp_path / "derived")
    assert [p.name for p in plans][:2] == ["peaks", "ops"]  # ops' roofline reads the peaks in the same store
    assert sorted(p.name for p in plans) == sorted(shipped_studies())
    by_name = {p.name: p for p in plans}
    assert by_name["smoke"].action == "skip" and "no cuda device" in by_name["smoke"].reason
    assert by_name["backends"].action == "quick" and by_name["backends"].study_arg == "backends"
    assert by_name["ops"].counters and by_name["peaks"].counters and not by_name["cnn"].counters
    for p in plans:
        if p.action == "skip":
            assert p.reason and not p.study_arg
            continue
        assert p.devices == ["cuda"] and p.cuda_cases > 0
        quick = load_study(p.study_arg, quick=True)
        cuda = [c for c in quick.cases if c.device in p.devices]
        assert len(cuda) == p.cuda_cases, p.name
    ops = by_name["ops"]  # the shipped quick variant is CPU-only: its grid runs on cuda from a derived file
    assert ops.action == "quick-grid-on-cuda" and "lists devices cpu only" in ops.reason
    derived = load_study(ops.study_arg, quick=True)
    shipped = load_study("ops", quick=True)
    assert {c.device for c in derived.cases} == {"cuda"}
    assert {(c.framework, json.dumps(c.params, sort_keys=True)) for c in derived.cases} == {
        (c.framework, json.dumps(c.params, sort_keys=True)) for c in shipped.cases
        if c.framework not in ("numpy", "pytensor", "openvino")}  # the study's own exclude: CPU-only frameworks
    assert derived.settings.budget_s == shipped.settings.budget_s


def _check(tmp_path: Path) -> gpu_check.Check:
    return gpu_check.Check(tmp_path, sys.executable, "abc123", dict(gpu_check.os.environ))


def test_a_step_records_its_exit_status_and_output(tmp_path):
    check = _check(tmp_path)
    code = "import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(3)"
    o = check.step("fails", [sys.executable, "-c", code], 60, tmp_path / "logs" / "fails.log",
                   stdout=tmp_path / "out.txt")
    assert (o.exit_status, o.timed_out, o.failed) == (3, False, True)
    assert (tmp_path / "out.txt").read_text() == "to stdout\n" and o.log == "logs/fails.log"
    assert (tmp_path / "logs" / "fails.log").read_text() == "to stderr\n"
    assert o.command.endswith(f"sys.exit(3)' > {check.rel(tmp_path / 'out.txt')}")
    ok = check.step("passes", [sys.executable, "-c", "pass"], 60, tmp_path / "logs" / "passes.log")
    assert not ok.failed and ok.exit_status == 0 and check.outcomes == [o, ok]
    assert ok.log is None and not (tmp_path / "logs" / "passes.log").exists()  # it said nothing: no empty file


def test_a_step_past_its_timeout_is_stopped_and_the_next_one_runs(tmp_path):
    check = _check(tmp_path)
    t0 = time.monotonic()
    slow = check.step("slow", [sys.executable, "-c", "import time; time.sleep(60)"], 1.0, tmp_path / "slow.log")
    assert time.monotonic() - t0 < 30
    assert slow.timed_out and slow.exit_status is None and slow.failed and "stopped after 1 s" in slow.note
    missing = check.step("missing", [str(tmp_path / "no-such-program")], 10, tmp_path / "missing.log")
    assert missing.failed and missing.note.startswith("could not start")


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1"
 skipped="1" tests="4"><testcase classname="tests.workloads.test_ops" name="test_same_output_on_the_gpu[add-torch]"/>
<testcase classname="tests.workloads.test_ops" name="test_same_output_on_the_gpu[add-jax]"><failure
 message="AssertionError: jax has no cuda device&#10;more">trace</failure></testcase>
<testcase classname="tests.runner.test_counters" name="test_counters_on_a_real_gpu"/>
<testcase classname="tests.workloads.test_nn" name="test_cuda_backend"><skipped message="no cupy"/></testcase>
</testsuite></testsuites>"""


def test_junit_summary_counts_and_names_the_failures():
    lines, failed, skipped = junit_summary(JUNIT)
    assert (failed, skipped) == (1, 1)
    assert lines == ["4 GPU tests: 2 passed, 1 failed, 1 skipped",
                     "FAILED tests.workloads.test_ops::test_same_output_on_the_gpu[add-jax]: "
                     "AssertionError: jax has no cuda device"]


def _result(status, energy=None, counters=None, validity=None, key="k"):
    metrics = {"energy": energy, "counters": counters, "validity": validity}
    return {"status": status, "case_key": key, "reason": None if status == "ok" else f"why {key}",
            "metrics": {k: v for k, v in metrics.items() if v is not None}}


def test_run_summary_says_what_was_measured_and_counts_failed_cases():
    export = {"run": {"id": "ops-1", "status": "complete", "n_cases": 4}, "results": [
        _result("ok", {"measured": True, "energy_j": 1.0}, {"flop_count_sp": 5.0}, "valid", "a"),
        _result("ok", {"measured": False, "reason": "nvml: no permission"}, {"error": "ncu wrote no CSV"}, "noisy",
                "b"),
        _result("unsupported", key="c"),
        _result("crashed", key="d")]}
    lines, failed = run_summary(export)
    assert failed == 1
    assert lines == ["run ops-1: complete, 4 of 4 cases stored (1 crashed, 2 ok, 1 unsupported)",
                     "unsupported: c: why c", "crashed: d: why d",
                     "energy measured in 1 of 2 ok cases; not measured: nvml: no permission",
                     "ncu counters in 1 of 2 ok cases; first error: ncu wrote no CSV",
                     "validity: 1 noisy, 1 valid"]


META = {"gpu_name": "NVIDIA H100 80GB HBM3", "kind": "nvidia-h100-80gb-hbm3", "date_utc": "2026-11-20 10:00:00",
        "commit": "0123456789abcdef", "invocation": "python3 scripts/gpu_check.py", "ncu": "/usr/local/cuda/bin/ncu",
        "gpus": ["NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB"], "env_note": "PYTHONPATH=src"}


def _outcome(name, status, **kw):
    return StepOutcome(name, f"cmd {name}", "2026-11-20 10:00:01", kw.pop("duration_s", 12.34), status,
                       "0123456789abcdef", **kw)


def test_readme_from_made_up_outcomes_names_commands_statuses_durations_and_what_failed():
    outcomes = [_outcome("install", None, skipped=True, note="used /opt/py as it is"),
                _outcome("tests", 1, log="logs/tests.log", details=["3 GPU tests: 2 passed, 1 failed, 0 skipped",
                                                                    "FAILED t::x: boom"]),
                _outcome("study:ops", None, timed_out=True, timeout_s=400, duration_s=430.0,
                         note="stopped after 400 s", details=["run ops-1: interrupted, 10 of 54 cases stored"]),
                _outcome("study:cnn", 0, failed_anyway=True, note="2 cases ended in error, timeout or crashed",
                         details=["run cnn-1: complete", "error: cnn/torch/cuda/batch=1: CUDA error"]),
                _outcome("report:cnn:show", 0)]
    plan = [StudyPlan("ops", "quick-grid-on-cuda", "its quick variant lists devices cpu only", "x.yaml", ["cuda"],
                      54, True),
            StudyPlan("smoke", "skip", "no cuda device in the study (devices: cpu)")]
    text = render_readme(META, outcomes, plan, ["README.md", "store.db"])
    assert text.startswith("# GPU evidence: NVIDIA H100 80GB HBM3 (`nvidia-h100-80gb-hbm3`)")
    assert "2026-11-20 10:00:00 at commit `0123456789abcdef`" in text
    assert "**3 of 5 steps failed**: tests, study:ops, study:cnn" in text
    assert "| install | skipped | 12.3 s |" in text
    assert "| tests | 1 | 12.3 s | 2026-11-20 10:00:01 | `0123456789ab` |" in text
    assert "| study:ops | killed at its 400 s time-out | 7.2 min |" in text
    assert "| study:cnn | 0 (but see findings) |" in text and "| report:cnn:show | 0 |" in text
    for o in outcomes:
        assert f"```\ncmd {o.name}\n```" in text
    failed_part = text.split("## What failed")[1].split("## Files")[0]
    assert "- **tests**: 1 (output: `logs/tests.log`)\n  - FAILED t::x: boom" in failed_part
    assert "- **study:ops**: killed at its 400 s time-out; stopped after 400 s" in failed_part
    assert "  - error: cnn/torch/cuda/batch=1: CUDA error" in failed_part
    assert "install" not in failed_part and "report:cnn:show" not in failed_part
    assert "| smoke | skipped | 0 | no cuda device in the study (devices: cpu) |" in text
    assert ("| ops | quick grid on cuda from `x.yaml`, `--counters` | 54 | its quick variant lists devices cpu only |"
            in text)
    assert "- `store.db`" in text


def test_readme_when_everything_passed():
    text = render_readme({**META, "ncu": None}, [_outcome("tests", 0), _outcome("facts:doctor", 0)], [], [])
    assert "- result: all 2 steps passed" in text
    assert "Nothing: every step that ran exited 0" in text
    assert "Nsight Compute: not found, so no counters were collected" in text


@pytest.mark.e2e
def test_whole_check_against_a_stand_in_nvidia_smi(tmp_path):
    """Orchestration end to end where no GPU is: a stand-in nvidia-smi names a GPU, the install is skipped
    (--python), and the studies step runs only smoke, which has no cuda variant: nothing is measured, and the
    README says so. The evidence goes to tmp_path, never to results/evidence."""
    smi = _fake_smi(tmp_path, "if '-q' in sys.argv:\n    print('==== fake nvidia-smi -q ====')\n"
                              "else:\n    print('NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB')")
    res = _run("--nvidia-smi", str(smi), "--out", str(tmp_path / "ev"), "--python", sys.executable,
               "--step", "install", "--step", "studies", "--study", "smoke", "--study", "nope",
               # this orchestration test is not about time: room for a loaded 2-core machine
               "--timeout", "facts:fingerprint=120", "--timeout", "facts:doctor=120", "--timeout", "studies:plan=120",
               timeout=300)
    out = tmp_path / "ev" / "nvidia-h100-80gb-hbm3"
    readme = (out / "README.md").read_text()
    assert res.returncode == 1, res.stdout + res.stderr  # the unknown study `nope` fails the plan step
    assert "- **studies:plan**: 0 (but see findings); no shipped study named nope" in readme
    assert "| smoke | skipped | 0 | no cuda device in the study (devices: cpu) |" in readme
    assert "| install | skipped |" in readme and "study:smoke" not in readme
    assert (out / "nvidia-smi-q.txt").read_text() == "==== fake nvidia-smi -q ====\n"
    fingerprint = json.loads((out / "fingerprint.json").read_text())
    assert fingerprint["dlperf_version"] and "torch" in fingerprint["frameworks"]
    assert "| facts:fingerprint | 0 |" in readme and "| facts:doctor | 0 |" in readme
    state = json.loads((out / "steps.json").read_text())
    assert set(state["steps"]) == {"install", "studies:plan", "facts:nvidia-smi", "facts:frameworks",
                                   "facts:fingerprint", "facts:doctor", "facts:pip"}
    assert json.loads((out / "frameworks.json").read_text())["torch"] is True
    assert "torch==" in (out / "pip-list.txt").read_text()
    assert not (out / "store.db").exists()


@pytest.mark.e2e
def test_a_planned_study_is_run_reported_and_summarised(tmp_path):
    """The chain a cuda study goes through (run, show, report as text and Markdown, export, summary), here on
    the CPU with the README's stand-in for the smoke study narrowed to its numpy case (a derived file's path, as a
    plan for a study with a cuda grid gets), into a store of its own. The chain is the same whatever the framework;
    the torch case's worker and bandwidth sweep cost ~5 s of CPU more and test nothing more here."""
    from dlperf.studies import load_study

    stand_in = (ROOT / "tests" / "studies" / "readme_smoke.yaml").read_text()
    assert "frameworks: [numpy, torch]" in stand_in
    study = tmp_path / "smoke-cpu.yaml"
    study.write_text(stand_in.replace("frameworks: [numpy, torch]", "frameworks: [numpy]"))
    n = len(load_study(str(study), quick=True).cases)
    assert n == 1
    check = _check(tmp_path)
    check.env.update(PYTHONPATH=str(ROOT / "src"), COLUMNS="200")
    plan = StudyPlan("smoke", "quick", "a CPU stand-in for a cuda study", str(study), ["cpu"], n)
    o = gpu_check.run_planned(check, plan, tmp_path / "store.db", counters=False)
    assert [x.name for x in check.outcomes] == ["study:smoke", "report:smoke:show", "report:smoke:text",
                                                "report:smoke:markdown", "report:smoke:export"]
    assert all(not x.failed for x in check.outcomes), [(x.name, x.exit_status, x.note) for x in check.outcomes]
    (run_id,) = gpu_check.run_ids(tmp_path / "store.db")
    assert o.command.startswith(f"{sys.executable} -m dlperf.cli run {study} --quick --device cpu --new --db ")
    assert o.details[0] == f"run {run_id}: complete, {n} of {n} cases stored ({n} ok)"
    assert o.details[1].startswith("energy measured in ")
    where = tmp_path / "runs" / "smoke"
    assert run_id in (where / "show.txt").read_text() and run_id in (where / "run.txt").read_text()
    assert (where / "report.md").read_text().startswith("#") and (where / "report.txt").read_text()
    assert json.loads((where / "results.json").read_text())["run"]["id"] == run_id


def test_a_bug_inside_the_check_is_a_failed_step_and_the_check_goes_on(tmp_path):
    check = _check(tmp_path)

    def broken(c: gpu_check.Check) -> None:
        raise KeyError("plans")

    assert gpu_check.guarded(check, "studies", broken) is None
    (o,) = check.outcomes
    assert o.failed and o.name == "studies" and o.note == "gpu_check.py raised KeyError: 'plans'"
    assert gpu_check.guarded(check, "facts", lambda c, x: x * 2, 21) == 42


def test_run_ids_of_a_store_that_is_not_one(tmp_path):
    assert gpu_check.run_ids(tmp_path / "absent.db") == set()
    (tmp_path / "empty.db").write_bytes(b"")
    assert gpu_check.run_ids(tmp_path / "empty.db") == set()


def test_tests_of_an_absent_framework_are_not_collected_at_all(tmp_path):
    """The first H200 run failed its quick:tests on a collection error: a test file named after TensorFlow
    imports it at the top, and `-k "not tensorflow"` deselects only after collecting. Files named after an absent
    framework are now ignored (--ignore-glob, which pytest roots at its working folder: the check's ROOT, here
    tmp_path); a GPU test of a present one still runs and is counted."""
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "test_model_tensorflow.py").write_text("raise ImportError('tensorflow is not installed')\n")
    (tree / "test_present.py").write_text("import pytest\n\n@pytest.mark.gpu\ndef test_cuda():\n    assert True\n")
    check = _check(tmp_path)
    check.root = tmp_path  # the steps' working folder: pytest roots --ignore-glob there
    gpu_check.tests(check, ["tensorflow"], name="quick:tests", where=tmp_path / "ev", args=(str(tree),))
    (o,) = check.outcomes
    assert "--ignore-glob=*tensorflow*" in o.command and "-k 'not tensorflow'" in o.command
    assert not o.failed, (o.exit_status, o.note, (tmp_path / "ev" / "pytest-tests.txt").read_text())
    assert o.details[0].startswith("1 GPU tests: 1 passed, 0 failed")


def test_part_reruns_only_the_named_quick_parts_and_keeps_the_store(tmp_path):
    """`--part ops` (rerun what failed): only that part runs, and the quick store keeps the earlier runs."""
    check = _check(tmp_path)
    store = tmp_path / "quick" / "store.db"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"earlier runs")
    check.python = str(tmp_path / "python")  # a stand-in that records what it was asked to run
    (tmp_path / "python").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'asked.txt'}\n")
    (tmp_path / "python").chmod(0o755)
    gpu_check.quick(check, None, [], only=["ops"])
    assert [o.name for o in check.outcomes] == ["quick:ops"]
    assert store.read_bytes() == b"earlier runs"
    assert "dlperf.cli run scripts/gpu_quick/ops.yaml --new --db" in (tmp_path / "asked.txt").read_text()


def test_part_without_the_quick_step_is_one_line(tmp_path):
    smi = _fake_smi(tmp_path, "print('NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB')")
    res = _run("--nvidia-smi", str(smi), "--step", "tests", "--part", "ops", "--out", str(tmp_path / "ev"))
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "gpu-check: error: --part picks parts of the quick step: add --step quick"]
