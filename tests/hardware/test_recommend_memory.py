"""Issue 14: `recommend` checks memory wherever it can (a catalog device's memory, this machine's RAM for its own
CPU) and never lets a device whose memory is unknown "qualify" unchecked; the count line says 1 device / N devices."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dlperf.cli import cli
from dlperf.hardware import recommend as R
from dlperf.hardware.catalog import find
from dlperf.models import get_spec
from dlperf.models.memory import train_memory

HUGE = R.Request("alexnet", 10**8, 227)  # about 1.7 PB of training memory: nothing has that
SMALL = R.Request("alexnet", 8, 227)


def recommend(tmp_path, *args: str):
    """`dlperf recommend ARGS` on no store (catalog estimates only), 200 columns, figures to tmp_path."""
    env = {"COLUMNS": "200", "DLPERF_DB": str(tmp_path / "none.sqlite")}
    res = CliRunner().invoke(cli, ["recommend", "--workload", "cnn:alexnet", *args], env=env)
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "none.sqlite").exists()
    return res.stdout


def test_memory_capacity_comes_from_the_catalog_or_this_machines_ram():
    gtx, epyc, igpu = find("gtx-1070"), find("epyc-9654"), find("hd-graphics-4400")
    assert R.memory_capacity(gtx, {}) == (8e9, "catalog")
    cap, why = R.memory_capacity(epyc, {})
    assert cap is None and "host's RAM" in why  # a catalog CPU: its memory is whatever host it sits in
    assert R.memory_capacity(igpu, {}) == (None, "the catalog has no memory size for it")
    assert R.memory_capacity(epyc, {"epyc-9654": 64e9}) == (64e9, R.HOST_RAM)  # the catalog entry is this machine


def test_this_machines_cpu_is_checked_against_its_ram(monkeypatch):
    import psutil

    from dlperf.hardware import probe

    class Ram:
        total = 32 * 2**30

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Ram())
    epyc = find("epyc-9654")
    assert R.memory_here(epyc) == {"epyc-9654": float(Ram.total)}  # `here` given: this machine's CPU as seen here
    monkeypatch.setattr(probe, "cpu_model", lambda: "AMD EPYC 9654 96-Core Processor")
    assert R.memory_here(None) == {"epyc-9654": float(Ram.total)}  # the catalog entry describes this machine whole
    monkeypatch.setattr(probe, "cpu_model", lambda: "Some CPU no catalog knows")
    assert R.memory_here(None) == {}


def test_nothing_qualifies_for_a_batch_no_memory_holds():
    devices = [find(x) for x in ("gtx-1070", "h200", "epyc-9654", "xeon-e5620", "hd-graphics-4400")]
    here = {"epyc-9654": 512e9}  # as if this machine were that EPYC with 512 GB of RAM
    ranked, excluded, _ = R.rank(devices, [], HUGE, here=here)
    assert ranked == []
    why = {e["device"].id: w for e, w in excluded}
    need = train_memory(get_spec("alexnet"), 10**8, 227, where="host").total_bytes
    assert need > 1e15
    assert why["epyc-9654"] == f"needs {need / 1e9:,.2f} GB > 512 GB ({R.HOST_RAM})"
    assert why["gtx-1070"].endswith("> 8 GB") and why["h200"].endswith("> 141 GB")
    for unknown in ("xeon-e5620", "hd-graphics-4400"):
        assert why[unknown].startswith(f"{R.CANNOT_CHECK_MEMORY}: needs "), why[unknown]
    assert "host's RAM" in why["xeon-e5620"] and "no memory size" in why["hd-graphics-4400"]


def test_a_cpu_with_known_ram_qualifies_and_says_it_fits():
    devices = [find("epyc-9654"), find("xeon-e5620")]
    ranked, excluded, _ = R.rank(devices, [], SMALL, here={"epyc-9654": 64e9})
    assert [e["device"].id for e in ranked] == ["epyc-9654"]
    assert ranked[0]["fits"] is True and f"of 64 GB ({R.HOST_RAM})" in ranked[0]["reason"]
    assert [(e["device"].id, w.split(":")[0]) for e, w in excluded] == [("xeon-e5620", R.CANNOT_CHECK_MEMORY)]


@pytest.mark.parametrize(("args", "count"), [
    (["--batch", "8", "--kind", "gpu", "--kind", "soc", "--budget-usd", "200"], "1 device qualifies"),
    (["--batch", "300", "--kind", "soc", "--max-power-w", "16"], "2 devices qualify"),
])
def test_the_count_line_says_device_or_devices(tmp_path, args, count):
    out = recommend(tmp_path, "--no-plot", *args)
    assert f"fp32: {count}, top" in out, out


def test_recommend_at_an_impossible_batch_ranks_nothing_and_says_why(tmp_path):
    out = recommend(tmp_path, "--batch", str(10**8), "--no-plot")
    assert "no device qualifies" in out and "qualify," not in out
    lines = out.splitlines()
    unchecked = next(x for x in lines if x.startswith(f"{R.CANNOT_CHECK_MEMORY} (so not ranked): "))
    assert "xeon-e5620 (needs" in unchecked and "host's RAM" in unchecked
    left_out = next(x for x in lines if x.startswith("left out: "))
    assert "h200 (needs" in left_out and "> 141 GB" in left_out

    doc = json.loads(recommend(tmp_path, "--batch", str(10**8), "--format", "json"))
    assert doc["ranked"] == []
    reasons = {d["device"]["id"]: d["reason"] for d in doc["left_out"]}
    assert reasons["xeon-e5620"].startswith(R.CANNOT_CHECK_MEMORY)
    gtx = next(d for d in doc["left_out"] if d["device"]["id"] == "gtx-1070")["estimate"]
    assert (gtx["fits"], gtx["memory_capacity_bytes"], gtx["memory_capacity_source"]) == (False, 8e9, "catalog")
