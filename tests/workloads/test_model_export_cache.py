"""The runtimes' ONNX export of a torch source (`workloads.model.export.prepared`) in a cache that processes share:
two asking for the same entry at once export it once, the second waits and reads the first's files, and an entry
left incomplete is exported again. The export process is a stand-in that writes the entry's files (no torch), slow
enough that the two requests overlap."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dlperf.workloads.model import ModelParams, export

PARAMS = ModelParams.model_validate({"source": "dlperf:mlp-small", "task": "infer", "batch": 2})


@pytest.fixture
def exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The start time of each stand-in export process; the cache is this test's folder."""
    monkeypatch.setenv("DLPERF_CACHE_DIR", str(tmp_path))
    started: list[float] = []

    def fake_run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert argv[1:3] == ["-m", "dlperf.workloads.model.export"]
        started.append(time.monotonic())
        time.sleep(0.3)  # the other request arrives while this export runs
        entry = export.cache_dir() / f"model-{export.key(PARAMS, int(argv[4]))}"
        tmp = entry.with_name(f".{entry.name}.tmp")
        tmp.mkdir(parents=True)
        (tmp / "model.onnx").write_bytes(b"stand-in")
        np.savez(tmp / "arrays.npz", in_0=np.zeros(2, np.float32), ref_0=np.ones(2, np.float32))
        (tmp / "meta.json").write_text(json.dumps({"inputs": ["x"], "n_outputs": 1}))
        if entry.exists():  # as `_export` does: an incomplete entry is replaced
            shutil.rmtree(entry)
        tmp.rename(entry)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(export.subprocess, "run", fake_run)
    return started


def test_two_requests_for_one_entry_export_it_once(exports: list[float]) -> None:
    got: list[Path] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            got.append(export.prepared(PARAMS, 0)[0])
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors, errors
    assert len(exports) == 1, f"{len(exports)} export processes for one entry"
    assert len(got) == 2 and got[0] == got[1] and got[0].read_bytes() == b"stand-in"


def test_an_incomplete_entry_is_exported_again(exports: list[float]) -> None:
    entry = export.cache_dir() / f"model-{export.key(PARAMS, 0)}"
    entry.mkdir(parents=True)
    (entry / "model.onnx").write_bytes(b"cut short")  # a killed export's: no arrays, no meta
    model, feeds, refs, meta = export.prepared(PARAMS, 0)
    assert len(exports) == 1 and export.complete(entry) and model.read_bytes() == b"stand-in"
    assert list(feeds) == ["x"] and refs()[0].tolist() == [1.0, 1.0] and meta["n_outputs"] == 1
    export.prepared(PARAMS, 0)
    assert len(exports) == 1, "a complete entry is read, not exported again"


def test_a_killed_exports_temporary_folder_is_removed_by_the_next_export(exports: list[float]) -> None:
    """A SIGKILLed export leaves `.model-<key>.<random>` beside the entry; the next export of that entry (under
    its lock, so the killed one's holder is gone) removes it. Another entry's temporary folder is left alone."""
    entry = export.cache_dir() / f"model-{export.key(PARAMS, 0)}"
    entry.parent.mkdir(parents=True)
    killed = entry.with_name(f".{entry.name}.k1ll3d")
    killed.mkdir()
    (killed / "model.onnx").write_bytes(b"half")
    other = entry.with_name(".model-otherkey.abc")
    other.mkdir()
    export.prepared(PARAMS, 0)
    assert len(exports) == 1 and not killed.exists() and other.is_dir() and export.complete(entry)
