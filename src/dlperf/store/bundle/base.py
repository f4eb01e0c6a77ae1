"""What every part of a bundle shares: the format's name and version, the fields carried, the checksum, the
error, and the `Bundle` read back (the format itself is described in `dlperf.store.bundle`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict, overload

from dlperf.core.status import CaseStatus, RunStatus
from dlperf.errors import DlperfError

FORMAT_NAME = "dlperf-bundle"
FORMAT_VERSION = 1
SUFFIX = ".dlperf.json.gz"
#: The run row's fields in a bundle (the store's `runs` columns but env_id) and the results' (`results` but
#: id, run_id and env_id); a schema change that adds a column decides here whether bundles carry it.
RUN_FIELDS = ("id", "study", "variant", "study_hash", "study_path", "filters", "settings", "status", "n_cases",
              "dlperf_version", "started_at", "finished_at", "derived")
RESULT_FIELDS = ("case_key", "repetition", "workload", "framework", "device", "params", "status", "reason",
                 "measurement", "metrics", "wall_s", "started_at", "finished_at")
TIMES = ("started_at", "finished_at", "created_at")
#: The most a bundle may inflate to, in MB (10^6 bytes; a run of 10,000 cases with 1,000 raw samples each is
#: about 220 MB): a bundle is parsed whole (about 3x its size in memory) before it is checked.
#: DLPERF_BUNDLE_MAX_MB or `dlperf bundle import --max-mb` raise it.
MAX_MB = 256
MAX_MB_ENV = "DLPERF_BUNDLE_MAX_MB"


class BundleError(DlperfError):
    """A bundle that cannot be written, read or imported: one line, nothing written."""


#: A JSON value as a bundle holds it (the file is JSON; the store's JSON columns give the same).
JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
#: A JSON object: a run's filters and settings, a fingerprint, a case's params, measurement and metrics.
JSONObject = dict[str, JSONValue]


class BundleRun(TypedDict):
    """The run row in a bundle: the store's `runs` columns (`RUN_FIELDS`; times ISO 8601 in UTC) and its
    environment's fingerprint hash instead of its id (`shape.RunRow` checks one read back)."""

    id: str
    study: str
    variant: str
    study_hash: str
    study_path: str
    filters: JSONObject
    settings: JSONObject
    status: RunStatus
    n_cases: int
    dlperf_version: str
    started_at: str
    finished_at: str | None
    derived: JSONObject | None
    env_fingerprint_hash: str


class BundleEnvironment(TypedDict):
    """An environment in a bundle: its fingerprint's hash and data, when it was first stored (ISO 8601)."""

    fingerprint_hash: str
    data: JSONObject
    created_at: str


class BundleResult(TypedDict):
    """A result row in a bundle: the store's `results` columns (`RESULT_FIELDS`; times ISO 8601 in UTC) and its
    environment's fingerprint hash (`shape.ResultRow` checks one read back)."""

    case_key: str
    repetition: int
    workload: str
    framework: str
    device: str
    params: JSONObject
    status: CaseStatus
    reason: str | None
    measurement: JSONObject | None
    metrics: JSONObject | None
    wall_s: float | None
    started_at: str
    finished_at: str
    env_fingerprint_hash: str


class BundleStudy(TypedDict, total=False):
    """The run's study file in a bundle: its path, its text (None: not read at export) and why not (a bundle
    read back is checked to hold an object here, not its keys)."""

    path: str
    yaml: str | None
    note: str


class BundleContent(TypedDict):
    """What a bundle carries (`file.bundle_content`), as `shape.check_shape` accepts it back."""

    run: BundleRun
    environments: list[BundleEnvironment]
    results: list[BundleResult]
    study: BundleStudy


@dataclass(frozen=True)
class Bundle:
    """A bundle read and checked: its content, and who wrote it when."""

    content: BundleContent
    format_version: int
    written_by: str
    written_at: str

    @property
    def run(self) -> BundleRun:
        return self.content["run"]

    @property
    def partial(self) -> bool:
        """Whether the run had not ended well when exported (running, interrupted, failed): cases may be missing."""
        return bool(self.run["status"] != "complete")


def canonical(content: BundleContent | dict[str, Any]) -> bytes:
    """The bytes the checksum covers: compact JSON, keys in their own order, floats in shortest round-trip form."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode()


def checksum(content: BundleContent | dict[str, Any]) -> str:
    """The checksum of a bundle's content, or of one read from a file before its shape is checked."""
    return "sha256:" + hashlib.sha256(canonical(content)).hexdigest()


@overload
def iso(value: datetime) -> str: ...


@overload
def iso(value: None) -> None: ...


def iso(value: datetime | None) -> str | None:
    """A stored datetime as ISO 8601 in UTC (SQLite hands back naive UTC, PostgreSQL aware)."""
    if value is None:
        return None
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)).isoformat()


def when(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise BundleError(f"{what} is not an ISO 8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise BundleError(f"{what} has no time zone: {value!r}")
    return parsed.astimezone(UTC)
