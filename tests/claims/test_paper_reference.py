"""The seed studies' transcribed figures (studies/reference/*.csv) and the report sections that set them beside a run.

Each hand-checked cell quotes the seed text it was read from (shared/seeds/, decimal commas as printed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlperf.core.result import CaseResult
from dlperf.report import backends_report, cnn_report, mlp_report
from dlperf.report.ops_report import reference_efficiency
from dlperf.report.sections import Note, Table
from dlperf.studies import paper
from tests.factories import case, report_data

SEEDS = {"study000": "000_ef7a82a99f126d98.txt", "study001": "001_3732e78a6c7f3a68.txt",
         "study002": "002_193418cc60d7ad6c.txt", "study003": "003_e89191de456f4043.txt"}


def test_every_reference_file_loads_with_rows_and_cites_its_seed_file() -> None:
    assert {"study000_sizes", "study000_quoted", "study001_sgemm", "study001_quoted", "study002",
            "study003_speedups"} <= set(paper.names())
    for name in paper.names():
        table = paper.load(name)
        assert table.rows, name
        assert SEEDS[name.split("_")[0]] in table.citation, name
        assert all(all(v is not None for v in row.values()) for row in table.rows), f"{name}: a short row"
    with pytest.raises(KeyError, match="no reference file"):
        paper.load("study999")


def test_study000_cells_match_the_seed() -> None:
    # "Grande	384	40000	600	400" (Tabela 1)
    (large,) = paper.load("study000_sizes").where(size="large")
    assert (large["n"], large["d_in"], large["h"], large["d_out"]) == ("384", "40000", "600", "400")
    # "Pequeno	64	15000	100	150"
    (small,) = paper.load("study000_sizes").where(size="small")
    assert (small["n"], small["d_in"], small["h"], small["d_out"]) == ("64", "15000", "100", "150")
    # "com melhora de 87,6 vezes no seu tempo de execução" (section 3, the first algorithm, Figure 2(c): large)
    (speedup,) = paper.load("study000_quoted").rows
    assert (speedup["variant"], speedup["size"], float(speedup["value"])) == ("tensors", "large", 87.6)


def test_study001_cells_match_the_seed() -> None:
    sgemm = paper.load("study001_sgemm")
    # "128x64_nn	6,90060	75264	0,016219	21	0,14928	26"
    (caffe,) = sgemm.where(kernel="128x64_nn", framework="caffe", kind="plain")
    assert (float(caffe["time_s"]), int(caffe["calls"])) == (6.90060, 75264)
    (tf_batched,) = sgemm.where(kernel="128x64_nn", framework="tensorflow", kind="batched")
    assert (float(tf_batched["time_s"]), int(tf_batched["calls"])) == (0.14928, 26)
    # "64x64_nt					0,39549	64": TensorFlow batched only
    assert [(r["framework"], r["kind"]) for r in sgemm.where(kernel="64x64_nt")] == [("tensorflow", "batched")]
    # "128x64_tn	5,02266	71701": Caffe only
    assert [r["framework"] for r in sgemm.where(kernel="128x64_tn")] == ["caffe"]
    quoted = paper.load("study001_quoted")
    # "tempos até 49% menores em GPU e até 70% menores em CPU em relação ao Caffe" (Resumo)
    assert quoted.where(quantity="tf_time_reduction_vs_caffe_max", device="gpu")[0]["value"] == "49"
    assert quoted.where(quantity="tf_time_reduction_vs_caffe_max", device="cpu")[0]["value"] == "70"


def test_study002_cells_match_the_seed() -> None:
    rows = paper.load("study002")
    # Tabela 2, 96 MB: "GTX980	12.842,37	0,26	12.862,04	0,28		3.869.462,63	86,94" (dot: 65 MB)
    (dot,) = rows.where(op="dot", device="GTX980", size_mb="65")
    assert (float(dot["mflops_per_s"]), float(dot["efficiency_pct"])) == (3869462.63, 86.94)
    # Tabela 3, 1024 MB: "K40	13.206,51	0,30	95.429,36	2,20	83.635,90	1,93"
    (tanh,) = rows.where(op="tanh", device="K40", size_mb="1024")
    assert (float(tanh["mflops_per_s"]), float(tanh["efficiency_pct"])) == (83635.9, 1.93)
    assert (65.0, 38.43) in reference_efficiency()["dot"]["K40"]  # "65	1.652.063,72	38,43"


def test_study003_cells_match_the_seed_and_agree_with_each_other() -> None:
    # "sequential/GPU = 25.6, sequential/vectorized = 77 e vectorized/GPU = 0.33" (Figura 5); "vectorized/GPU = 62.5"
    ref = paper.load("study003_speedups")
    got = {(r["model"], r["numerator"], r["denominator"]): float(r["speedup"]) for r in ref.rows}
    assert got == {("mlp", "sequential", "vectorized"): 77.0, ("mlp", "sequential", "cuda"): 25.6,
                   ("mlp", "vectorized", "cuda"): 0.33, ("cnn", "vectorized", "cuda"): 62.5}
    product = got[("mlp", "sequential", "vectorized")] * got[("mlp", "vectorized", "cuda")]
    assert product == pytest.approx(got[("mlp", "sequential", "cuda")], rel=0.02)


# --- the report sections: the paper's table is always there, with this run's figures or why they are missing

def _r(workload: str, framework: str, device: str, params: dict[str, Any], status: str = "ok",
       **metrics: Any) -> CaseResult:
    return case(f"{workload}/{framework}/{device}/{params}", workload=workload, framework=framework, device=device,
                params=params, status=status, metrics=metrics if status == "ok" else None)


def _table(sections: list[Any], title_part: str) -> Table:
    (table,) = [s for s in sections if isinstance(s, Table) and title_part in s.title]
    return table


def _row(table: Table, *first: str) -> list[str]:
    (row,) = [r for r in table.rows if tuple(r[:len(first)]) == first]
    return row


def _mlp(device: str, median_s: float, variant: str = "tensors", size: str = "large") -> CaseResult:
    return _r("mlp", "torch", device, {"variant": variant, "size": size, "iterations": 500, "dtype": "float32"},
              median_s=median_s)


def test_study000_table_sets_the_papers_speedup_beside_this_runs(tmp_path: Path) -> None:
    data = report_data([_mlp("cpu", 0.5), _mlp("cuda", 0.01)], plot_dir=tmp_path)
    table = _table(mlp_report.sections(data), "study 000 as published")
    row = _row(table, "tensors", "large")
    assert row[2] == "87.6x" and row[3] == "50.0x (cuda)"
    assert row[5].startswith("missing here: energy not measured")  # no meter in the synthetic run
    assert _row(table, "autograd", "small")[2] == "not printed (Fig. 2, a chart)"
    sizes = _table(mlp_report.sections(data), "Table 1 (input sizes)")
    assert _row(sizes, "large")[1:] == ["384", "40,000", "600", "400", "384", "40,000", "600", "400"]
    assert _row(sizes, "small")[5] == "missing here: size not in this run"


def test_study000_table_says_why_this_runs_figure_is_missing_without_a_gpu(tmp_path: Path) -> None:
    data = report_data([_mlp("cpu", 0.5)], plot_dir=tmp_path)
    sections = mlp_report.sections(data)
    row = _row(_table(sections, "study 000 as published"), "tensors", "large")
    assert row[2] == "87.6x" and row[3] == "missing here: this run has no GPU case"
    assert any(isinstance(s, Note) and "only as bar charts" in s.text for s in sections)


def _nn(framework: str, model: str, median_s: float) -> CaseResult:
    return _r("backends", framework, "cpu" if framework != "nn-cuda" else "cuda", {"model": model, "batch_size": 32},
              median_s=median_s)


def test_study003_matrix_sets_the_papers_speedups_beside_this_runs(tmp_path: Path) -> None:
    results = [_nn("nn-sequential", "mlp", 7.7), _nn("nn-vectorized", "mlp", 0.1), _nn("nn-cuda", "mlp", 0.4)]
    sections = backends_report.sections(report_data(results, plot_dir=tmp_path))
    table = _table(sections, "study 003 speedups as published")
    assert _row(table, "mlp", "sequential / vectorized")[2:5:2] == ["77", "77"]
    assert _row(table, "mlp", "vectorized / cuda")[2:5:2] == ["0.33", "0.25"]
    assert _row(table, "cnn", "vectorized / cuda")[4] == "missing here: no nn-vectorized case in this run"
    assert (tmp_path / "speedups-r.svg").is_file() and (tmp_path / "speedups-r.png").is_file()


def test_study003_matrix_says_why_cuda_is_missing(tmp_path: Path) -> None:
    results = [_nn("nn-sequential", "mlp", 7.7), _nn("nn-vectorized", "mlp", 0.1)]
    sections = backends_report.sections(report_data(results, plot_dir=tmp_path))
    row = _row(_table(sections, "study 003 speedups as published"), "mlp", "sequential / cuda")
    assert row[2] == "25.6" and row[4] == "missing here: no nn-cuda case in this run (it needs a GPU)"


def _cnn(framework: str, batch: int, t_per_image_s: float, model: str = "alexnet") -> CaseResult:
    return _r("cnn", framework, "cpu", {"model": model, "batch": batch, "image_size": 112},
              median_s=t_per_image_s * batch, time_per_sample_s=t_per_image_s, samples_per_s=1 / t_per_image_s)


def test_study001_and_004_tables_beside_a_cnn_run(tmp_path: Path) -> None:
    results = [_cnn("tensorflow", 8, 0.03), _cnn("caffe", 8, 0.1), _cnn("tensorflow", 16, 0.02),
               _cnn("caffe", 16, 0.05), _cnn("torch", 4, 0.2, model="caffenet")]
    sections = cnn_report.sections(report_data(results, plot_dir=tmp_path))
    quoted = _table(sections, "study 001 as published")
    assert _row(quoted, "TensorFlow's time per image below Caffe's, at best (CPU)")[1:4:2] == [
        "70%", "70% (alexnet, batch 8)"]
    assert _row(quoted, "TensorFlow's time per image below Caffe's, at best (GPU)")[3] == (
        "missing here: no cnn case on the GPU in this run (it needs a GPU)")
    sgemm = _table(sections, "Table 1 as published")
    assert _row(sgemm, "128x64_nn", "caffe")[3:] == ["6.90060", "75264", "missing here: no CUDA kernel profile in "
                                                     "this run (needs a GPU and --profile)"]
    assert any(isinstance(s, Note) and "Figure 1" in s.text and "picture" in s.text for s in sections)
    caffenet = _table(sections, "CaffeNet training speed")
    assert caffenet.rows == [["torch", "cpu", "4", "5", "-"]]
    datasheet = _table(sections, "study 004 datasheet")
    rx580 = [r for r in datasheet.rows if "RX 580" in r[0]][0]
    assert rx580[1] == "1,389" and "peak fp32 GFLOP/s" in rx580[-1]  # the study's "1,389 Gflops", not the vendor's


def test_study001_says_why_caffe_figures_are_missing(tmp_path: Path) -> None:
    sections = cnn_report.sections(report_data([_cnn("tensorflow", 8, 0.03)], plot_dir=tmp_path))
    quoted = _table(sections, "study 001 as published")
    assert _row(quoted, "TensorFlow's time per image below Caffe's, at best (CPU)")[3] == (
        "missing here: no caffe case on the CPU to pair (Caffe needs pycaffe)")
    assert _row(quoted, "largest batch that trained, Caffe")[3] == "missing here: no caffe case in this run"
    assert any(isinstance(s, Note) and s.text.startswith("CaffeNet: missing here") for s in sections)
