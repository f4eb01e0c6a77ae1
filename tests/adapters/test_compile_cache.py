"""The warm-compile process's ending (`frameworks.compile_cache.warm_main`), as `run_warm` reads it back: its
figures as one JSON line and exit 0, or what it raised as one stderr line and exit 1, which the case stores as
`warm_error` (no process, no compiler: a stand-in figures function)."""

from __future__ import annotations

import json
import sys

import pytest

from dlperf.frameworks.compile_cache import run_warm, warm_main


def test_the_figures_are_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert warm_main(lambda argv: {"warm_s": 0.25, "argv": argv}, ["prog", "x"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out.strip().splitlines()[-1]) == {"warm_s": 0.25, "argv": ["prog", "x"]}
    assert out.err == ""


def test_a_warm_compile_that_raises_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(argv: list[str]) -> dict[str, float]:
        raise OSError("no space\nleft on device")

    assert warm_main(broken, ["prog"]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == "the warm compile raised OSError: no space left on device\n"


def test_run_warm_reads_either_ending_back() -> None:
    code = ("import sys; from dlperf.frameworks.compile_cache import warm_main; "
            "sys.exit(warm_main(lambda a: {{'warm_s': 1.5}} if a[1] == 'ok' else 1 / 0, sys.argv))")
    ok = run_warm([sys.executable, "-c", code.format(), "ok"], env={}, timeout_s=60)
    assert ok == {"warm_s": 1.5}
    failed = run_warm([sys.executable, "-c", code.format(), "no"], env={}, timeout_s=60)
    assert failed == {"warm_error": "the warm compile raised ZeroDivisionError: division by zero"}
