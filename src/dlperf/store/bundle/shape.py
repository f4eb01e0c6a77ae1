"""A bundle's content checked before anything is written: every field an import writes is there, typed as the
store's columns want it (their widths, read from the schema, included: PostgreSQL enforces them), every id
that may name a path strict (`dlperf.untrusted.ID_PATTERN`), names free of control characters, and readable by
the store's readers (a result's raw samples parse as a `Measurement`, and `CaseResult.from_row` reads the row
back), and each result's case key is the one its workload, framework, device and params give
(`core.result.case_key`, as the runner makes it). A checksum says only that the writer's content is unchanged,
not that the writer was dlperf."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import Column

from dlperf.core.result import CaseResult, case_key
from dlperf.core.status import CaseStatus, RunStatus
from dlperf.errors import exception_line
from dlperf.store.bundle.base import RESULT_FIELDS, BundleError, when
from dlperf.store.nonfinite import nonfinite, spelled
from dlperf.store.schema import environments, results, runs
from dlperf.timing import Measurement
from dlperf.untrusted import is_id

#: The largest value of an `Integer` column (PostgreSQL's is 32 bits).
_INT_MAX = 2**31 - 1


class Malformed(ValueError):
    """What is wrong with a bundle's content, in words (`loads` makes it the one line)."""


class _Row(BaseModel):
    """Strict: a string is not an integer, null is not a dict (nothing is coerced: the raw values are written)."""

    model_config = ConfigDict(strict=True)


def _width(column: Column[Any]) -> int:
    """The store's width of a String column (PostgreSQL enforces it): read from the schema, so that a migration
    that widens a column widens this check."""
    return int(column.type.length)  # type: ignore[attr-defined]


def _an_id(value: str) -> str:
    """An id that may name a file or a folder (`dlperf.untrusted.ID_PATTERN`: a run id, a study name, a
    fingerprint hash); its width is the Field's."""
    if not is_id(value, len(value) or 1):
        raise ValueError("not an id (letters, digits, '_', '.', '-'; not '.' or '..')")
    return value


def _plain(value: str) -> str:
    """Text without control characters (an escape sequence, a newline) where dlperf shows it as a name."""
    if not value.replace(" ", "x").isprintable():
        raise ValueError("holds a control character")
    return value


#: A device as dlperf names one (cpu, cuda, cuda:N): letters, digits, '_', '.', '-', ':'.
_DEVICE = re.compile(r"[A-Za-z0-9_.:-]+")


def _a_device(value: str) -> str:
    if _DEVICE.fullmatch(value) is None:
        raise ValueError("not a device name (letters, digits, '_', '.', '-', ':')")
    return value


Id = Annotated[str, AfterValidator(_an_id)]
Plain = Annotated[str, AfterValidator(_plain)]
Device = Annotated[str, AfterValidator(_a_device)]
#: The longest case key (a Text column): its workload, framework, device and every parameter.
CASE_KEY_MAX = 4096


class RunRow(_Row):
    id: Id = Field(min_length=1, max_length=_width(runs.c.id))
    study: Id = Field(min_length=1, max_length=_width(runs.c.study))
    variant: Plain = Field(min_length=1)  # text of any length since the store's schema version 4
    study_hash: Id = Field(min_length=1, max_length=_width(runs.c.study_hash))
    study_path: str
    filters: dict[str, Any]
    settings: dict[str, Any]
    status: RunStatus
    n_cases: int = Field(ge=0, le=_INT_MAX)
    dlperf_version: Plain = Field(max_length=_width(runs.c.dlperf_version))
    started_at: str
    finished_at: str | None
    derived: dict[str, Any] | None
    env_fingerprint_hash: Id = Field(max_length=_width(environments.c.fingerprint_hash))


class EnvironmentRow(_Row):
    fingerprint_hash: Id = Field(min_length=1, max_length=_width(environments.c.fingerprint_hash))
    data: dict[str, Any] = Field(min_length=1)  # a fingerprint; the CLI checks that it gives its hash
    created_at: str


class ResultRow(_Row):
    case_key: Plain = Field(min_length=1, max_length=CASE_KEY_MAX)
    repetition: int = Field(ge=0, le=_INT_MAX)
    workload: Id = Field(max_length=_width(results.c.workload))
    framework: Id = Field(max_length=_width(results.c.framework))
    device: Device = Field(max_length=_width(results.c.device))
    params: dict[str, Any]
    status: CaseStatus
    reason: str | None
    measurement: dict[str, Any] | None
    metrics: dict[str, Any] | None
    wall_s: float | None
    started_at: str
    finished_at: str
    env_fingerprint_hash: Id = Field(max_length=_width(environments.c.fingerprint_hash))


def _valid(model: type[_Row], data: Any, what: str) -> None:
    """`data` as `model` wants it, else Malformed naming `what` and the first wrong field."""
    if not isinstance(data, dict):
        raise Malformed(f"{what} is not an object")
    try:
        model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        got = "" if first["type"] == "missing" else f" (got {first['input']!r:.60})"
        raise Malformed(f"{what}'s {field}: {first['msg'].removeprefix('Value error, ')}{got}") from None


def _time(value: Any, what: str) -> None:
    try:
        when(value, what)
    except BundleError as exc:
        raise Malformed(str(exc)) from None


def _check_result(r: dict[str, Any], run_id: str, hashes: set[str]) -> None:
    what = f"result {r.get('case_key')!r} repetition {r.get('repetition')!r}"
    _valid(ResultRow, r, what)
    _time(r["started_at"], f"{what}'s started_at")
    _time(r["finished_at"], f"{what}'s finished_at")
    made = case_key(r["workload"], r["framework"], r["device"], r["params"])
    if r["case_key"] != made:  # results are matched by key: another case's key would replace or hide that case
        raise Malformed(f"{what} of run {run_id}: its case_key is not the one its workload, framework, device "
                        f"and params give ({made!r:.160})")
    if r["env_fingerprint_hash"] not in hashes:
        raise Malformed(f"the environment of {what} is not among the bundle's environments")
    if r["measurement"] is not None:
        try:
            Measurement.from_dict(r["measurement"])
        except (KeyError, TypeError, ValueError) as exc:
            raise Malformed(f"{what}'s measurement is not raw samples ({type(exc).__name__}: {exc})") from None
        bad = nonfinite(r["measurement"])
        if bad:  # a raw sample is never altered: refused, whatever the store (no timer gives one)
            raise Malformed(f"{what}'s measurement holds {spelled(bad[0][1])} at {bad[0][0]}: not a raw sample")
    try:  # what `dlperf show` does with it: statistics recomputed from the raw samples, the metrics typed
        CaseResult.from_row({**{k: r[k] for k in RESULT_FIELDS}, "id": None, "run_id": run_id, "env_id": 0})
    except Exception as exc:  # untrusted content: whatever the reader trips on is refused
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            detail = f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
        else:
            detail = exception_line(exc)
        raise Malformed(f"{what} cannot be read back ({detail:.160})") from None


def check_shape(content: dict[str, Any]) -> None:
    """Malformed (what is wrong, in words) unless every row is as the store and its readers want it."""
    for key, kind in (("run", dict), ("environments", list), ("results", list), ("study", dict)):
        if not isinstance(content.get(key), kind):
            raise Malformed(f"its {key} is not {'an object' if kind is dict else 'a list'}")
    run = content["run"]
    _valid(RunRow, run, "the run")
    _time(run["started_at"], "the run's started_at")
    _time(run["finished_at"], "the run's finished_at")
    for e in content["environments"]:
        _valid(EnvironmentRow, e, "an environment")
        _time(e["created_at"], f"environment {e['fingerprint_hash'][:12]}'s created_at")
    hashes = {e["fingerprint_hash"] for e in content["environments"]}
    if run["env_fingerprint_hash"] not in hashes:
        raise Malformed("the run's environment is not among the bundle's environments")
    seen: set[tuple[str, int]] = set()
    for r in content["results"]:
        _check_result(r, run["id"], hashes)
        once = (r["case_key"], r["repetition"])
        if once in seen:
            raise Malformed(f"result {once[0]!r} repetition {once[1]} appears twice")
        seen.add(once)
    study = content["study"]
    if not isinstance(study.get("yaml"), str | None) or not isinstance(study.get("note"), str | None):
        raise Malformed("its study's yaml or note is not text")
