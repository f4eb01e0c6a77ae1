"""A bundle's file: written from a store (`export_bundle`), read and checked (`read_bundle`, `loads`)."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from dlperf import __version__
from dlperf.store.bundle.base import (
    FORMAT_NAME,
    FORMAT_VERSION,
    RESULT_FIELDS,
    RUN_FIELDS,
    TIMES,
    Bundle,
    BundleError,
    checksum,
    iso,
)
from dlperf.store.bundle.shape import Malformed, check_shape
from dlperf.store.db import Store
from dlperf.store.schema import environments, results

_GZIP_MAGIC = b"\x1f\x8b"


# -- export ------------------------------------------------------------
#: Reads the study file of a run row: (its text, where it was read) or (None, why not). The CLI's checks the
#: file against the run's study hash (`dlperf.cli.bundle.checked_study_text`: the store cannot load a study).
StudyReader = Callable[[dict[str, Any]], tuple[str | None, str]]
NOT_READ = ("the study file was not read at export (`dlperf bundle export` reads it, where it still gives the run's "
            "study hash); the run row holds what the store has: the study's name, variant, hash and resolved settings")


def bundle_content(store: Store, run_ref: str, study_reader: StudyReader | None = None) -> dict[str, Any]:
    """Everything run `run_ref` is, read from `store` (the run row first, then its results, then the
    environments they name: a run still being executed gives a consistent, partial bundle), and the study
    file's text where `study_reader` gives it."""
    row = store.run(run_ref)
    with store.engine.connect() as conn:
        rows = conn.execute(select(results).where(results.c.run_id == row["id"])
                            .order_by(results.c.id)).mappings().all()
        env_ids = list(dict.fromkeys([row["env_id"], *(r["env_id"] for r in rows)]))
        envs = {e.id: e for e in conn.execute(select(environments).where(environments.c.id.in_(env_ids)))}
    hash_of = {i: envs[i].fingerprint_hash for i in env_ids}
    run = {k: iso(row[k]) if k in TIMES else row[k] for k in RUN_FIELDS}
    run["env_fingerprint_hash"] = hash_of[row["env_id"]]
    text, note = study_reader(row) if study_reader is not None else (None, NOT_READ)
    return {
        "run": run,
        "environments": [{"fingerprint_hash": envs[i].fingerprint_hash, "data": envs[i].data,
                          "created_at": iso(envs[i].created_at)} for i in env_ids],
        "results": [{**{k: iso(r[k]) if k in TIMES else r[k] for k in RESULT_FIELDS},
                     "env_fingerprint_hash": hash_of[r["env_id"]]} for r in rows],
        "study": {"path": row["study_path"], "yaml": text, "note": note},
    }


def dumps(content: dict[str, Any], *, written_at: datetime | None = None) -> bytes:
    """The file's bytes: the versioned header, the checksum and the content, gzip-compressed."""
    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "written_by": f"dlperf {__version__}",
           "written_at": iso(written_at or datetime.now(UTC)), "checksum": checksum(content), "content": content}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return gzip.compress(text.encode(), mtime=0)


def export_bundle(store: Store, run_ref: str, path: Path, *, study_reader: StudyReader | None = None) -> Bundle:
    """Write run `run_ref`'s bundle to `path` (whole or not at all: a temporary file renamed into place);
    never over the store's own database file, which the rename would replace."""
    own = _own_file(store, path)
    if own is not None:
        raise BundleError(f"{path} is this store's own database file ({own}): the bundle would replace the store; "
                          f"write it elsewhere")
    content = bundle_content(store, run_ref, study_reader)
    data = dumps(content)
    written = loads(data, f"{path} (not written: run {content['run']['id']} in this store)", nothing="")
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
    return written


def _own_file(store: Store, path: Path) -> Path | None:
    """The store's SQLite file where `path` is it (by any name: a link, a relative path) or its journal."""
    database = store.engine.url.database if store.engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    own = Path(database).resolve()
    if path.resolve() in {own, *(own.with_name(own.name + s) for s in ("-wal", "-shm", "-journal"))}:
        return own
    try:
        return own if path.exists() and os.path.samefile(path, own) else None  # a hard link
    except OSError:
        return None


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


def loads(data: bytes, name: str, nothing: str = "; nothing was imported") -> Bundle:
    """A bundle from the file's bytes (gzip-compressed or plain JSON); `name` and `nothing` for the messages."""
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
        check_shape(content)
    except Malformed as exc:
        raise BundleError(f"{name}: the bundle's content is malformed ({exc}){nothing}") from None
    return Bundle(content, version, str(doc.get("written_by")), str(doc.get("written_at")))
