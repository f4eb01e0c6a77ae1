"""The offline kit end to end on the CPU: a fresh venv of this Python gets a stand-in GPU image (dlperf's
dependencies that the lent image has, and the local torch wheel) with --no-index, then the kit that
scripts/gpu_kit.py computed against that image, installed as gpu_check.py --wheels installs it (--no-index
--no-deps --target); dlperf then runs from the source tree with the kit on PYTHONPATH: `dlperf doctor` and
`dlperf run smoke --quick` on torch. `make gpu-kit-test` (a prerequisite of `make test`) makes both sets of wheels
while an index is reachable; this test reaches none (pip's configuration and PIP_* variables are cleared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MADE = ROOT / "gpu-kit" / "test-local"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "DLPERF_", "VIRTUAL_ENV"))}
    return dict(env, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd[:4]} exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.mark.e2e
def test_the_kit_installs_offline_into_a_fresh_venv_and_dlperf_runs(tmp_path):
    if not (MADE / ".done").exists():
        if os.environ.get("DLPERF_REQUIRE_GPU_KIT"):
            pytest.fail(f"{MADE} is missing: `make gpu-kit-test` makes it")
        pytest.skip(f"{MADE} is missing: `make gpu-kit-test` makes it (make test does)")
    manifest = json.loads((MADE / "kit" / "manifest.json").read_text())
    assert manifest["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    kit = sorted((MADE / "kit").glob("*.whl"))
    assert {w["file"] for w in manifest["wheels"]} == {w.name for w in kit}
    assert {"pydantic", "sqlalchemy", "ruptures"} <= {w["name"] for w in manifest["wheels"]}
    venv, site = tmp_path / "venv", tmp_path / "kit-site"
    env = _env()
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 120)
    py = str(venv / "bin" / "python")
    image = sorted(p.name.split("-")[0] for p in (MADE / "image").glob("*.whl"))
    _run([py, "-m", "pip", "install", "-q", "--no-index", "--no-compile", "--find-links", str(MADE / "image"),
          *image], tmp_path, env, 600)
    missing = subprocess.run([py, "-c", "import pydantic"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert missing.returncode != 0  # the image alone lacks what the kit brings
    _run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target", str(site),
          *map(str, kit)], tmp_path, env, 300)
    run_env = _env(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(site)]), COLUMNS="200")
    doctor = _run([py, "-m", "dlperf", "doctor"], tmp_path, run_env, 300)
    assert "torch" in doctor.stdout
    smoke = _run([py, "-m", "dlperf", "run", "smoke", "--quick", "--framework", "torch", "--db",
                  str(tmp_path / "r.sqlite")], tmp_path, run_env, 600)  # the image's torch: numpy's cases add no path
    assert "results: run smoke-" in smoke.stdout
    where = _run([py, "-c", "import dlperf, pydantic, torch; print(dlperf.__file__, pydantic.__file__, "
                            "torch.__version__)"], tmp_path, run_env, 120).stdout.split()
    assert where[0].startswith(str(ROOT / "src")) and where[1].startswith(str(site))
    assert where[2] == "2.13.0+cpu"  # the image's torch, not one of the kit's
