"""A study file is read with PyYAML's C parser where PyYAML has one (the same safe constructor), and a file past
STUDY_MAX_BYTES is refused before it is parsed: a list of a million values took 59 s and 864 MB in the
pure-Python parser before it was refused (issue 29, finding 10)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dlperf.errors import StudyError
from dlperf.studies import load_study
from dlperf.studies.loader import STUDY_MAX_BYTES, _StrictLoader, read_study_file

HEAD = "name: t\nworkload: ops\nframeworks: [numpy]\nparams:\n  op: add\n"


def test_the_c_parser_is_used_where_pyyaml_has_it():
    assert issubclass(_StrictLoader, yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)


def test_a_million_values_are_refused_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    study = tmp_path / "big.yaml"
    study.write_text(HEAD + "  size_mb: [" + ",".join(["1"] * 10**6) + "]\n")

    def never(*args, **kwargs):
        raise AssertionError("a file over the limit was parsed")

    monkeypatch.setattr(yaml, "load", never)
    with pytest.raises(StudyError, match=rf"big.yaml: larger than a study file may be \({STUDY_MAX_BYTES // 1024} "
                                         r"KiB\)"):
        load_study(str(study))


def test_a_file_at_the_limit_is_read(tmp_path: Path):
    study = tmp_path / "t.yaml"
    text = HEAD + "  size_mb: [1, 2]\n"
    study.write_text(text + "#" * (STUDY_MAX_BYTES - len(text) - 1) + "\n")
    assert study.stat().st_size == STUDY_MAX_BYTES
    assert read_study_file(study).name == "t"


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system ['true']", "!!python/name:os.system ''"])
def test_the_c_parser_is_as_safe(tmp_path: Path, tag: str):
    study = tmp_path / "t.yaml"
    study.write_text(HEAD + f"  size_mb: 1\ndescription: {tag}\n")
    with pytest.raises(StudyError, match="YAML syntax error"):
        read_study_file(study)


def test_a_key_given_twice_is_still_refused(tmp_path: Path):
    study = tmp_path / "t.yaml"
    study.write_text(HEAD + "  size_mb: 1\nname: u\n")
    with pytest.raises(StudyError, match="duplicate key 'name'"):
        read_study_file(study)
