"""Bundles: one file with everything a run is, for a machine that cannot reach the store (a Jetson on a bench):
`export_bundle` there, `import_bundle` into any store here (SQLite or PostgreSQL), idempotently.

The file (`FORMAT_NAME`, `FORMAT_VERSION`) is gzip-compressed JSON, named `*.dlperf.json.gz` (`zcat F | jq .`
reads it; an uncompressed copy imports too)::

    {"format": "dlperf-bundle", "format_version": 1, "written_by": "dlperf 0.1.0",
     "written_at": "2026-11-23T14:28:22.123456+00:00",
     "checksum": "sha256:<hex of the canonical content>",
     "content": {"run": {...}, "environments": [...], "results": [...], "study": {...}}}

- `run`: the run row (`RUN_FIELDS`, the store's column order), its environment named by `env_fingerprint_hash`;
  the run's study name, variant, hash, path and resolved settings are these fields (what the store holds).
- `environments`: each environment the run or any of its results refers to (a fleet run's results span the
  machines that ran them): `fingerprint_hash`, `data` (the fingerprint as first stored), `created_at`.
- `results`: every result row (`RESULT_FIELDS`) as the store holds it, raw samples (`measurement`) and metrics
  untouched (not recomputed), oldest first, each with its environment's `env_fingerprint_hash`; no store ids.
- `study`: `path` (as the run stored it), `yaml` (the file's text where it was readable at export, else null)
  and `note` (where it was read, or why not). The store has no place for the text: it travels in the bundle.

JSON objects keep the store's own key order; datetimes are ISO 8601 in UTC with their offset; floats are
written as Python's shortest round-trip form, so raw samples come back bit-identical. The checksum is the
SHA-256 of `content` serialized canonically (`canonical`): a truncated or edited file is refused, while
re-indenting it changes nothing. A later format adds a step that reads the one before (asv's
`util.update_json`); a bundle newer than `FORMAT_VERSION` is refused with one line.

An import is one transaction: environments are matched by fingerprint hash (reused, never duplicated), the
run keeps its own id, results missing from the store are added (case key and repetition name a result; a
later re-run of a stored case, as `--retry-failed` makes, replaces it), and the run's status and finish time
follow the bundle when it brought something new. Nothing is written when anything is refused.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from dlperf import __version__
from dlperf.core.result import CaseResult
from dlperf.core.status import check_run_status
from dlperf.errors import DlperfError
from dlperf.store.db import Store
from dlperf.store.schema import environments, results, runs

FORMAT_NAME = "dlperf-bundle"
FORMAT_VERSION = 1
SUFFIX = ".dlperf.json.gz"
#: The run row's fields in a bundle (the store's `runs` columns but env_id) and the results' (`results` but
#: id, run_id and env_id); a schema change that adds a column decides here whether bundles carry it.
RUN_FIELDS = ("id", "study", "variant", "study_hash", "study_path", "filters", "settings", "status", "n_cases",
              "dlperf_version", "started_at", "finished_at", "derived")
RESULT_FIELDS = ("case_key", "repetition", "workload", "framework", "device", "params", "status", "reason",
                 "measurement", "metrics", "wall_s", "started_at", "finished_at")
_TIMES = ("started_at", "finished_at", "created_at")
_GZIP_MAGIC = b"\x1f\x8b"


class BundleError(DlperfError):
    """A bundle that cannot be written, read or imported: one line, nothing written."""


@dataclass(frozen=True)
class Bundle:
    """A bundle read and checked: its content, and who wrote it when."""

    content: dict[str, Any]
    format_version: int
    written_by: str
    written_at: str

    @property
    def run(self) -> dict[str, Any]:
        return self.content["run"]

    @property
    def partial(self) -> bool:
        """Whether the run had not ended well when exported (running, interrupted, failed): cases may be missing."""
        return self.run["status"] != "complete"


@dataclass(frozen=True)
class ImportOutcome:
    """What an import did to the store."""

    run_id: str
    new: int  # results added
    already: int  # results the store held already (left as they were)
    replaced: int  # stored results replaced by a later re-run of the same case
    created_run: bool
    envs_new: int
    envs_reused: int
    status_before: str | None  # None: the run was new to the store
    status_after: str

    def line(self) -> str:
        """`run X: N new results (M already stored)` and what else changed."""
        text = f"run {self.run_id}: {self.new} new results ({self.already} already stored)"
        if self.replaced:
            text += f"; {self.replaced} replaced by a later re-run of the same case"
        if self.created_run:
            text += f"; a new run ({self.status_after})"
        elif self.status_before != self.status_after:
            text += f"; status {self.status_before} -> {self.status_after}"
        if self.envs_new or self.created_run:
            text += f"; environments: {self.envs_new} new, {self.envs_reused} already stored"
        return text


def canonical(content: dict[str, Any]) -> bytes:
    """The bytes the checksum covers: compact JSON, keys in their own order, floats in shortest round-trip form."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode()


def checksum(content: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(content)).hexdigest()


def _iso(value: datetime | None) -> str | None:
    """A stored datetime as ISO 8601 in UTC (SQLite hands back naive UTC, PostgreSQL aware)."""
    if value is None:
        return None
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)).isoformat()


def _when(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise BundleError(f"{what} is not an ISO 8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise BundleError(f"{what} has no time zone: {value!r}")
    return parsed.astimezone(UTC)


# -- export ------------------------------------------------------------
def read_study_text(study_path: str) -> tuple[str | None, str]:
    """(the study file's text, a note saying where it was read) or (None, why it could not be)."""
    path = Path(study_path).expanduser()
    if not study_path or not path.is_file():
        return None, (f"the study file {study_path!r} was not readable at export (not a file here); the run row "
                      f"holds what the store has: the study's name, variant, hash and resolved settings")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"the study file {path} could not be read at export ({exc}); the run row holds the rest"
    return text, (f"read from {path.resolve()} at export; the run's study hash names what the run ran, this text "
                  f"is the file as it was at export")


def bundle_content(store: Store, run_ref: str) -> dict[str, Any]:
    """Everything run `run_ref` is, read from `store` (the run row first, then its results, then the
    environments they name: a run still being executed gives a consistent, partial bundle)."""
    row = store.run(run_ref)
    with store.engine.connect() as conn:
        rows = conn.execute(select(results).where(results.c.run_id == row["id"])
                            .order_by(results.c.id)).mappings().all()
        env_ids = list(dict.fromkeys([row["env_id"], *(r["env_id"] for r in rows)]))
        envs = {e.id: e for e in conn.execute(select(environments).where(environments.c.id.in_(env_ids)))}
    hash_of = {i: envs[i].fingerprint_hash for i in env_ids}
    run = {k: _iso(row[k]) if k in _TIMES else row[k] for k in RUN_FIELDS}
    run["env_fingerprint_hash"] = hash_of[row["env_id"]]
    text, note = read_study_text(row["study_path"])
    return {
        "run": run,
        "environments": [{"fingerprint_hash": envs[i].fingerprint_hash, "data": envs[i].data,
                          "created_at": _iso(envs[i].created_at)} for i in env_ids],
        "results": [{**{k: _iso(r[k]) if k in _TIMES else r[k] for k in RESULT_FIELDS},
                     "env_fingerprint_hash": hash_of[r["env_id"]]} for r in rows],
        "study": {"path": row["study_path"], "yaml": text, "note": note},
    }


def dumps(content: dict[str, Any], *, written_at: datetime | None = None) -> bytes:
    """The file's bytes: the versioned header, the checksum and the content, gzip-compressed."""
    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "written_by": f"dlperf {__version__}",
           "written_at": _iso(written_at or datetime.now(UTC)), "checksum": checksum(content), "content": content}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return gzip.compress(text.encode(), mtime=0)


def export_bundle(store: Store, run_ref: str, path: Path) -> Bundle:
    """Write run `run_ref`'s bundle to `path` (whole or not at all: a temporary file renamed into place)."""
    content = bundle_content(store, run_ref)
    data = dumps(content)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as exc:
        raise BundleError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BundleError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return loads(data, str(path))


# -- read --------------------------------------------------------------
def read_bundle(path: Path) -> Bundle:
    """The bundle at `path`, checked (format, version, checksum, shape); BundleError (one line) otherwise."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BundleError(f"{path}: no such file") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return loads(data, str(path))


def loads(data: bytes, name: str) -> Bundle:
    """A bundle from the file's bytes (gzip-compressed or plain JSON); `name` for the messages."""
    nothing = "; nothing was imported"
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except EOFError:
            raise BundleError(f"{name}: the bundle is truncated (its compressed data ends early){nothing}") from None
        except (OSError, zlib.error) as exc:
            raise BundleError(f"{name}: the bundle's compressed data is damaged ({exc}){nothing}") from None
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise BundleError(f"{name} is not a dlperf bundle (not JSON, nor gzip-compressed JSON; "
                          f"`dlperf bundle export` writes one){nothing}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise BundleError(f"{name} is not a dlperf bundle (its format is not {FORMAT_NAME!r}: `dlperf export "
                          f"--format json` writes a report, not a bundle){nothing}")
    version = doc.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"{name}: unreadable bundle format version {version!r}{nothing}")
    if version > FORMAT_VERSION:
        raise BundleError(f"{name}: bundle format {version} is newer than this dlperf reads ({FORMAT_VERSION}): "
                          f"upgrade dlperf{nothing}")
    content = doc.get("content")
    if not isinstance(content, dict) or doc.get("checksum") != checksum(content):
        raise BundleError(f"{name}: the bundle's checksum does not match its content (it was edited or damaged "
                          f"after it was written){nothing}")
    try:
        _check_shape(content)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BundleError(f"{name}: the bundle's content is malformed (a result's {'.'.join(map(str, first['loc']))}: "
                          f"{first['msg']}){nothing}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BundleError(f"{name}: the bundle's content is malformed ({type(exc).__name__}: {exc}){nothing}") \
            from None
    return Bundle(content, version, str(doc.get("written_by")), str(doc.get("written_at")))


def _check_shape(content: dict[str, Any]) -> None:
    """Every field an import writes is there and typed as the store wants it (a checksum only says that the
    writer's content is unchanged, not that the writer was dlperf)."""
    run = content["run"]
    missing = [k for k in (*RUN_FIELDS, "env_fingerprint_hash") if k not in run]
    if missing:
        raise KeyError(f"the run lacks {', '.join(missing)}")
    check_run_status(run["status"])
    _when(run["started_at"], "the run's started_at")
    _when(run["finished_at"], "the run's finished_at")
    hashes = {e["fingerprint_hash"] for e in content["environments"]}
    for e in content["environments"]:
        if not isinstance(e["fingerprint_hash"], str) or not isinstance(e["data"], dict):
            raise TypeError("an environment's fingerprint_hash or data has the wrong type")
        _when(e["created_at"], "an environment's created_at")
    if run["env_fingerprint_hash"] not in hashes:
        raise KeyError("the run's environment is not among the bundle's environments")
    seen: set[tuple[str, int]] = set()
    for r in content["results"]:
        if r["env_fingerprint_hash"] not in hashes:
            raise KeyError(f"the environment of result {r['case_key']!r} is not among the bundle's environments")
        CaseResult.model_validate({**{k: r[k] for k in RESULT_FIELDS}, "run_id": run["id"], "env_id": 0})
        key = (r["case_key"], r["repetition"])
        if key in seen:
            raise ValueError(f"result {key[0]!r} repetition {key[1]} appears twice")
        seen.add(key)


# -- import ------------------------------------------------------------
def import_bundle(store: Store, bundle: Bundle) -> ImportOutcome:
    """Load `bundle` into `store` in one transaction (see the module's docstring); BundleError where the store
    holds a run of that id from another study or environment. Retried once where another process inserted
    the same environment or results at the same moment."""
    for attempt in (1, 2):
        try:
            with store.engine.begin() as conn:
                return _import(conn, bundle)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _import(conn: Connection, bundle: Bundle) -> ImportOutcome:
    content, run = bundle.content, bundle.run
    env_ids: dict[str, int] = {}
    envs_new = 0
    for e in content["environments"]:
        found = conn.execute(select(environments.c.id)
                             .where(environments.c.fingerprint_hash == e["fingerprint_hash"])).scalar()
        if found is None:
            found = conn.execute(insert(environments).values(
                fingerprint_hash=e["fingerprint_hash"], data=e["data"],
                created_at=_when(e["created_at"], "created_at"))).inserted_primary_key[0]
            envs_new += 1
        env_ids[e["fingerprint_hash"]] = int(found)
    stored = conn.execute(select(runs.c.study_hash, runs.c.status, environments.c.fingerprint_hash)
                          .select_from(runs.join(environments, runs.c.env_id == environments.c.id))
                          .where(runs.c.id == run["id"])).first()
    if stored is not None and stored.study_hash != run["study_hash"]:
        raise BundleError(f"run {run['id']} is already in this store with another study hash ({stored.study_hash}; "
                          f"the bundle's: {run['study_hash']}): not the same run; nothing was imported")
    if stored is not None and stored.fingerprint_hash != run["env_fingerprint_hash"]:
        raise BundleError(f"run {run['id']} is already in this store from another environment (fingerprint "
                          f"{stored.fingerprint_hash[:12]}, the bundle's: {run['env_fingerprint_hash'][:12]}): "
                          f"not the same run; nothing was imported")
    if stored is None:
        conn.execute(insert(runs).values(**_row(run, RUN_FIELDS), env_id=env_ids[run["env_fingerprint_hash"]]))
    have = {(r.case_key, int(r.repetition)): r for r in conn.execute(
        select(results.c.id, results.c.case_key, results.c.repetition, results.c.finished_at)
        .where(results.c.run_id == run["id"]))}
    new = already = replaced = 0
    for r in content["results"]:
        values = {**_row(r, RESULT_FIELDS), "run_id": run["id"], "env_id": env_ids[r["env_fingerprint_hash"]]}
        old = have.get((r["case_key"], r["repetition"]))
        if old is None:
            conn.execute(insert(results).values(**values))
            new += 1
        elif _when(_iso(old.finished_at), "stored") < values["finished_at"]:
            conn.execute(update(results).where(results.c.id == old.id).values(**values))
            replaced += 1
        else:
            already += 1
    status_before = None if stored is None else str(stored.status)
    status_after = run["status"] if stored is None else str(stored.status)
    if stored is not None and (new or replaced or (stored.status == "running" and run["status"] != "running")):
        status_after = run["status"]
        conn.execute(update(runs).where(runs.c.id == run["id"]).values(
            status=run["status"], finished_at=_when(run["finished_at"], "finished_at")))
    return ImportOutcome(run["id"], new, already, replaced, stored is None, envs_new,
                         len(env_ids) - envs_new, status_before, status_after)


def _row(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """A bundle's row as the store's columns want it (datetimes parsed)."""
    return {k: _when(data[k], k) if k in _TIMES else data[k] for k in fields}
