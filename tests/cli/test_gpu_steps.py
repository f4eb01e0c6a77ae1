"""gpu-check's step plan (scripts/gpu_steps.py) where no GPU is: every step's time-outs fit the budget of one
short job, the quick step's study files are one-case (or the shipped quick grid's) cuda studies, the plan printed
against a stand-in nvidia-smi, and the kit's install (--python --wheels) with no index."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_check  # noqa: E402  (scripts/ is not a package: found through the line above)
import gpu_steps  # noqa: E402


def test_the_quick_step_fits_eight_minutes_on_any_node():
    for wheels in (False, True):
        for ncu in (False, True):
            parts = gpu_steps.quick_parts(wheels=wheels, ncu=ncu)
            assert gpu_steps.quick_budget_s(parts, ncu) <= gpu_steps.STEP_BUDGET_S < 8 * 60
            assert ("quick:install" in [p.name for p in parts]) == wheels
            assert ("quick:counters" in [p.name for p in parts]) == ncu
    full = gpu_steps.quick_parts(wheels=True, ncu=True)
    expected = sum(p.timeout_s for p in full) + 6 * gpu_steps.QUICK_EXPORT_S + sum(gpu_steps.FACTS_S.values())
    assert gpu_steps.quick_budget_s(full, True) == expected


def test_every_cuda_study_is_in_one_further_step_that_fits():
    from dlperf.studies import shipped_studies

    names = gpu_steps.cuda_studies()
    assert names[:2] == ["peaks", "ops"] and "smoke" not in names
    planned = {p.name for p in gpu_check.plan_studies(ROOT / "build" / "unused") if p.action != "skip"}
    assert set(names) == planned and set(names) < set(shipped_studies())
    groups = gpu_steps.study_groups(names)
    assert sorted(n for g in groups for n in g) == sorted(names)
    for g in groups:
        total = sum(gpu_steps.study_budget_s(n) for n in g) + gpu_steps.facts_budget_s(True) + gpu_steps.PLAN_TIMEOUT_S
        assert total <= gpu_steps.STEP_BUDGET_S, g
    assert [g for g in groups if "ops" in g][0] != groups[0] or groups[0].index("peaks") < groups[0].index("ops")


def test_quick_study_files_are_cuda_cases_of_the_shipped_studies():
    from dlperf.studies import load_study

    counts = {}
    for part in (p for p in gpu_steps.QUICK if p.study):
        if part.study == "peaks":  # the shipped study's quick variant, narrowed by the options
            assert part.args == ("--quick", "--device", "cuda", "--framework", "torch")
            assert any(c.device == "cuda" and c.framework == "torch" for c in load_study("peaks", quick=True).cases)
            continue
        study = load_study(part.study)
        assert {c.device for c in study.cases} == {"cuda"}, part.name
        counts[part.name] = len(study.cases)
    assert counts["quick:mlp"] == counts["quick:cnn"] == counts["quick:transformer"] == 1
    (tf,) = load_study("scripts/gpu_quick/transformer.yaml").cases
    assert tf.params["precision"] == "bf16" and tf.params["task"] == "train"
    assert {c.framework for c in load_study("scripts/gpu_quick/nn.yaml").cases} == {"nn-cuda", "nn-cuda-cublas"}
    shipped = {json.dumps(c.params, sort_keys=True) for c in load_study("ops", quick=True).cases
               if c.framework == "torch"}
    mine = [json.dumps(c.params, sort_keys=True) for c in load_study("scripts/gpu_quick/ops.yaml").cases]
    gemm = json.dumps({"op": "dot", "size_mb": 384.0, "dtype": "bfloat16"}, sort_keys=True)  # 8192^3 in bf16
    assert gemm in mine and gemm not in shipped
    assert set(mine) - {gemm} <= shipped  # else the shipped quick grid's cases, at its largest size only
    assert len(set(mine) - {gemm}) >= 4


def _smi(tmp_path: Path) -> Path:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nprint('NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB')\n")
    smi.chmod(0o755)
    return smi


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_dry_run_prints_each_part_and_its_time_out_against_a_stand_in_nvidia_smi(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    res = _run("--nvidia-smi", str(_smi(tmp_path)), "--python", sys.executable, "--wheels", str(kit), "--step",
               "quick", "--step", "studies-2", "--dry-run", "--out", str(tmp_path / "ev"), "--timeout",
               "quick:ops=50")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    ncu = gpu_check.find_ncu() is not None
    # quick:ops given 50 s on the command line, planned at 85 s
    budget = gpu_steps.quick_budget_s(gpu_steps.quick_parts(wheels=True, ncu=ncu), ncu) - 35
    assert f"quick: {budget:g} s at most of 470 s" in lines
    assert "  quick:install: 15 s: the kit's wheels into a temporary folder (pip install --no-index --no-deps)" in lines
    assert any(ln.startswith("  quick:ops: 50 s (+ export 5 s)") for ln in lines)
    assert any(ln.startswith("  quick:transformer: 28 s") for ln in lines)
    assert lines[0].startswith("facts (every invocation, first): facts:nvidia-smi 5 s")
    assert any(ln.startswith("studies-2: ") for ln in lines) and "  study:ops: 320 s (+ 4 reports 15 s each)" in lines
    assert not (tmp_path / "ev").exists()
    # without a GPU the same command is still one line and exit 2
    res = _run("--nvidia-smi", str(tmp_path / "absent"), "--step", "quick", "--dry-run")
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1 and "no NVIDIA GPU" in res.stderr


def test_wheels_need_the_nodes_python_and_a_folder(tmp_path):
    res = _run("--wheels", str(tmp_path), "--nvidia-smi", str(_smi(tmp_path)))
    assert res.returncode == 2 and res.stderr.splitlines() == [
        f"gpu-check: error: --wheels {tmp_path}: needs --python (the node's interpreter)"]
    res = _run("--python", sys.executable, "--wheels", str(tmp_path / "none"), "--nvidia-smi", str(_smi(tmp_path)))
    assert res.returncode == 2 and "no such folder (make gpu-kit writes gpu-kit/cpXY)" in res.stderr


def _wheel(folder: Path, name: str, module: str) -> Path:
    """A minimal pure-Python wheel with one module that says its name."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{module}.py", f"NAME = {name!r}\n")
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def test_the_kit_installs_without_an_index_and_never_a_framework(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    _wheel(kit, "kitpkg", "kitpkg_mod")
    _wheel(kit, "torch", "torch_impostor")
    check = gpu_check.Check(tmp_path / "ev", sys.executable, "abc", dict(gpu_check.os.environ, PIP_INDEX_URL=
                                                                             "http://127.0.0.1:9/nothing-here"))
    target = tmp_path / "site"
    o = gpu_check.install_kit(check, kit, target)
    assert not o.failed, (o.note, (tmp_path / "ev" / "logs" / "install.log").read_text())
    assert "--no-index" in o.command and "--no-deps" in o.command and "torch-1.0" not in o.command
    assert (target / "kitpkg_mod.py").exists() and not (target / "torch_impostor.py").exists()
    assert o.details[1] == "refused (the node's own build is measured): torch-1.0-py3-none-any.whl"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert gpu_check.install_kit(check, empty, tmp_path / "site2").failed
