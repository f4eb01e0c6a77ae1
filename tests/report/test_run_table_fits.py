"""The run table on a terminal too narrow for it: what every case shares moves under it, nothing is lost."""

from __future__ import annotations

import io

from rich.console import Console

from dlperf.core.result import CaseResult, Metrics
from dlperf.report.tables import render_terminal
from tests.factories import case, run_row

RUN = run_row("r1", study="ddp", n_cases=3)
ENV = {"cpu_model": "Test CPU", "cpu_physical_cores": 2, "cpu_logical_cores": 2, "threads": 2, "ram_bytes": 2**34,
       "os": "Linux", "kernel": "6", "python": "3.11", "frameworks": {}, "gpus": []}


def _result(world: int, scaling: str, median_s: float) -> CaseResult:
    params = {"workload": "cnn", "model": "lenet5", "world_size": world, "scaling": scaling, "batch": 64,
              "threads_per_rank": 1, "nodes": 1, "bucket_cap_mb": 25.0, "profile_steps": 5}
    metrics = Metrics.model_validate({"median_s": median_s, "iqr_rel": 0.05, "n_samples": 30,
                                      "samples_per_s": 64 * world / median_s, "validity": "contended",
                                      "validity_reason": f"other processes used 1.{world} cores while it ran"})
    return case(f"ddp/{world}/{scaling}", run_id="r1", workload="ddp", framework="torch", params=params,
                metrics=metrics, wall_s=1.0)


def _render(width: int, results: list[CaseResult]) -> str:
    out = io.StringIO()
    render_terminal(RUN, ENV, results, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def test_a_table_too_wide_keeps_every_figure_and_says_what_every_case_shares() -> None:
    results = [_result(1, "strong", 0.030), _result(2, "strong", 0.016), _result(2, "weak", 0.040)]
    text = _render(120, results)
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line.rstrip()) for line in table) <= 120  # the lines under it wrap as text does
    head = text.split("\n┃")[1].splitlines()[0]
    assert "params" in head and "framework" not in head and "status" not in head  # shared: moved under the table
    assert "every case: framework torch, device cpu, status ok, validity contended; workload=cnn model=lenet5" in text
    assert "no value in any case, so not shown:" in text and "energy/call" in text
    for world, scaling in ((1, "strong"), (2, "strong"), (2, "weak")):  # the varying parameters stay per row
        assert f"world_size={world} scaling={scaling}" in text
    for median in ("30 ms", "16 ms", "40 ms"):
        assert median in text
    for world in (1, 2):  # the notes become marks with their whole text under the table
        assert f"other processes used 1.{world} cores while it ran" in text
    assert "[1]" in text and "[2]" in text


def test_a_table_that_fits_is_drawn_as_it_always_was() -> None:
    results = [_result(1, "strong", 0.030), _result(2, "strong", 0.016)]
    text = _render(400, results)
    assert "every case:" not in text and "not shown" not in text
    head = text.split("\n┃")[1].splitlines()[0]
    assert "framework" in head and "status" in head and "energy/call" in head
