"""The torch `export` variant (torch.export, compiled ahead of time by AOTInductor into a `.pt2` package and loaded
back), built in this process on a tiny module: the package is written in the case's own cache folder, the loaded
program computes what eager does (the gate passes), and its compile record has the first call's time and the
inductor cache it filled. One AOTInductor compile (a C++ build, seconds); the warm process is not started here
(tests/cli/test_bench_compile.py checks the warm compile on `compile`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

MODEL = '''
import torch
from torch import nn

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """(the case's cache folder, the case's extra metrics) after one timed-path call of the export variant."""
    from dlperf.frameworks import get_framework
    from dlperf.workloads import get_workload
    from dlperf.workloads.model import torch_compiled

    folder = tmp_path_factory.mktemp("export-case")
    (folder / "models.py").write_text(MODEL)
    cache = folder / "cache"
    cache.mkdir()
    import torch._inductor.config as inductor_config

    with pytest.MonkeyPatch.context() as mp:
        # one compile thread: Inductor's default on this 2-core machine starts a pool of compile workers, each a
        # Python importing torch (about 12 s of CPU, twice the compile itself), for a module of two Linear layers;
        # the package, its cache files and the program are the same
        mp.setattr(inductor_config, "compile_threads", 1)
        for name in torch_compiled.cache_env(cache):
            mp.setenv(name, "unset")  # put back after the test (the builder sets them)
        mp.setattr(torch_compiled, "cache_folder", lambda: cache)
        mp.setattr(torch_compiled, "warm", lambda *a: {"warm_error": "not run in this test"})
        fw = get_framework("torch")
        fw.import_module()
        workload = get_workload("model")
        params = workload.parse({"source": f"{folder}/models.py:Tiny", "input": ["x:float32[B,16]"],
                                 "batch": 4, "task": "infer", "variant": "export"})
        step = workload.build(fw, "cpu", params)
        for _ in range(3):
            step.fn()
        metrics = workload.extra_metrics(params, step)
    return cache, dict(metrics)


def test_the_export_variant_writes_its_package_in_the_cases_own_folder(exported) -> None:
    cache, _ = exported
    packages = sorted(cache.rglob("*.pt2"))
    assert len(packages) == 1 and packages[0].stat().st_size > 0, packages


def test_the_exported_program_computes_what_eager_does(exported) -> None:
    _, metrics = exported
    verdict = metrics["correctness"]
    assert verdict["status"] == "pass", verdict
    assert verdict["rel_err"] <= verdict["tolerance_rel"] == 1e-4


def test_the_export_variant_records_its_compile(exported) -> None:
    _, metrics = exported
    record = metrics["compile"]
    assert record["warm_error"] == "not run in this test"  # the stand-in: no second process here
    assert record["cold_s"] > 0, record
    # AOTInductor compiled into the case's own, empty inductor cache (the package is built from it)
    assert record["cold_cache_files_before"] == 0 and record["cold_cache_files_after"] > 0, record
