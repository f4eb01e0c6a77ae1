"""A bundle's file: written from a store (`export_bundle`), read and checked (`read_bundle`, `loads`)."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tempfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import select

from dlperf import __version__
from dlperf.store.bundle.base import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_MB,
    MAX_MB_ENV,
    RESULT_FIELDS,
    RUN_FIELDS,
    TIMES,
    Bundle,
    BundleContent,
    BundleError,
    BundleResult,
    BundleRun,
    checksum,
    iso,
)
from dlperf.store.bundle.shape import Malformed, check_shape
from dlperf.store.db import Store
from dlperf.store.schema import environments, results
from dlperf.untrusted import MAX_DEPTH, deeper_than, not_regular

_GZIP_MAGIC = b"\x1f\x8b"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 1 << 20


# -- export ------------------------------------------------------------
#: Reads the study file of a run row (its columns, `RunRow.to_dict`): (its text, where it was read) or (None, why
#: not). The CLI's checks the file against the run's study hash (`dlperf.cli.bundle.checked_study_text`: the store
#: cannot load a study).
StudyReader = Callable[[dict[str, Any]], tuple[str | None, str]]
NOT_READ = ("the study file was not read at export (`dlperf bundle export` reads it, where it still gives the run's "
            "study hash); the run row holds what the store has: the study's name, variant, hash and resolved settings")


def bundle_content(store: Store, run_ref: str, study_reader: StudyReader | None = None) -> BundleContent:
    """Everything run `run_ref` is, read from `store` (the run row first, then its results, then the
    environments they name: a run still being executed gives a consistent, partial bundle), and the study
    file's text where `study_reader` gives it."""
    row = store.run(run_ref)
    with store.engine.connect() as conn:
        rows = conn.execute(select(results).where(results.c.run_id == row.id)
                            .order_by(results.c.id)).mappings().all()
        env_ids = list(dict.fromkeys([row.env_id, *(r["env_id"] for r in rows)]))
        envs = {e.id: e for e in conn.execute(select(environments).where(environments.c.id.in_(env_ids)))}
    hash_of = {i: envs[i].fingerprint_hash for i in env_ids}
    columns = row.to_dict()
    run = cast(BundleRun, {k: iso(columns[k]) if k in TIMES else columns[k] for k in RUN_FIELDS})  # the runs columns
    run["env_fingerprint_hash"] = hash_of[row.env_id]
    text, note = study_reader(columns) if study_reader is not None else (None, NOT_READ)
    return {
        "run": run,
        "environments": [{"fingerprint_hash": envs[i].fingerprint_hash, "data": envs[i].data,
                          "created_at": iso(envs[i].created_at)} for i in env_ids],
        "results": [cast(BundleResult, {**{k: iso(r[k]) if k in TIMES else r[k] for k in RESULT_FIELDS},
                                        "env_fingerprint_hash": hash_of[r["env_id"]]}) for r in rows],
        "study": {"path": row.study_path, "yaml": text, "note": note},
    }


def dumps(content: BundleContent, *, written_at: datetime | None = None) -> bytes:
    """The file's bytes: the versioned header, the checksum and the content, gzip-compressed."""
    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "written_by": f"dlperf {__version__}",
           "written_at": iso(written_at or datetime.now(UTC)), "checksum": checksum(content), "content": content}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return gzip.compress(text.encode(), mtime=0)


def export_bundle(store: Store, run_ref: str, path: Path, *, study_reader: StudyReader | None = None,
                  force: bool = False) -> Bundle:
    """Write run `run_ref`'s bundle to `path` (whole or not at all: a temporary file in the same folder, renamed
    into place, removed on any failure). What is at `path` is replaced only where it is a bundle and `force` is
    given; never a device, a FIFO, a link to one, an SQLite database (the store itself by any URL) or any
    other file."""
    own = _own_file(store, path)
    if own is not None:
        raise BundleError(f"{path} is this store's own database file ({own}): the bundle would replace the store; "
                          f"write it elsewhere")
    target = _replaceable(path, force)
    content = bundle_content(store, run_ref, study_reader)
    data = dumps(content)
    written = loads(data, f"{path} (not written: run {content['run']['id']!r} in this store)", nothing="")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    except OSError as exc:
        raise BundleError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as exc:  # a full disk, Ctrl-C: nothing left behind
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise BundleError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise
    return written


def _replaceable(path: Path, force: bool) -> Path:
    """The file to write for `path` (a link's target: the link stays); BundleError where what is there must
    not be replaced."""
    why = not_regular(path)
    if why is not None:
        raise BundleError(f"{path} {why}: a bundle replaces only a bundle; give a file name")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if not target.exists():
        return target
    try:
        with open(target, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise BundleError(f"{path}: cannot read what is there ({exc.strerror or exc}); not replaced") from None
    if head.startswith(_SQLITE_MAGIC):
        raise BundleError(f"{path} is an SQLite database (a results store?): not replaced; write the bundle "
                          f"elsewhere")
    if not _is_bundle(target):
        raise BundleError(f"{path} exists and is not a dlperf bundle: not replaced (remove it, or write elsewhere)")
    if not force:
        raise BundleError(f"{path} already exists (a bundle): give --force to replace it")
    return target


def _is_bundle(path: Path) -> bool:
    """Whether the file at `path` reads as a bundle's header (its format name in the first KiB, inflated)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if head == _GZIP_MAGIC else raw
            start = stream.read(1024)
    except (OSError, EOFError, zlib.error):
        return False
    return f'"format":"{FORMAT_NAME}"'.encode() in start.replace(b" ", b"").replace(b"\n", b"")


def _own_file(store: Store, path: Path) -> Path | None:
    """The store's SQLite file where `path` is it (by any name: a link, a relative path, the read-only `file:`
    URL form) or its journal."""
    database = store.engine.url.database if store.engine.dialect.name == "sqlite" else None
    if database and database.startswith("file:"):  # sqlite:///file:PATH?mode=ro&uri=true
        database = database.removeprefix("file:").split("?", 1)[0]
    if not database or database == ":memory:":
        return None
    own = Path(database).resolve()
    if path.resolve() in {own, *(own.with_name(own.name + s) for s in ("-wal", "-shm", "-journal"))}:
        return own
    try:
        return own if path.exists() and os.path.samefile(path, own) else None  # a hard link
    except OSError:
        return None


# -- read --------------------------------------------------------------
def max_bundle_bytes(max_mb: float | None = None) -> int:
    """The most a bundle may inflate to, in bytes: `max_mb` (an option), else DLPERF_BUNDLE_MAX_MB, else
    `MAX_MB` (MB = 10^6 bytes)."""
    raw = os.environ.get(MAX_MB_ENV) if max_mb is None else max_mb
    if raw is None or raw == "":
        return int(MAX_MB * 1e6)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise BundleError(f"{MAX_MB_ENV} must be a positive number of MB, got {raw!r}")
    return int(value * 1e6)


def read_bundle(path: Path, max_bytes: int | None = None) -> Bundle:
    """The bundle at `path`, checked (a regular file, its size inflated at most `max_bytes` (default
    `max_bundle_bytes()`), its nesting, format, version, checksum, shape); BundleError (one line) otherwise."""
    limit = max_bundle_bytes() if max_bytes is None else max_bytes
    why = not_regular(path)
    if why is not None:
        raise BundleError(f"{path} {why}; nothing was imported")
    try:  # O_NONBLOCK: a FIFO put there since the check does not block the open; fstat then refuses it
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise BundleError(f"{path} is not a regular file; nothing was imported")
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise BundleError(f"{path}: no such file") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise BundleError(f"{path} is more than {_mb(limit)} ({_RAISE}); nothing was imported")
    return loads(data, str(path), max_bytes=limit)


_RAISE = f"the limit: `dlperf bundle import --max-mb N` or {MAX_MB_ENV}; default {MAX_MB:g} MB"


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:g} MB"


def _inflate(data: bytes, limit: int, name: str, nothing: str) -> bytes:
    """`data` decompressed, chunk by chunk, refused as soon as it passes `limit` bytes (a decompression bomb
    never inflates in memory)."""
    out, size = [], 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise BundleError(f"{name}: the bundle inflates to more than {_mb(limit)} ({_RAISE}){nothing}")
                out.append(chunk)
    except EOFError:
        raise BundleError(f"{name}: the bundle is truncated (its compressed data ends early){nothing}") from None
    except (OSError, zlib.error) as exc:
        raise BundleError(f"{name}: the bundle's compressed data is damaged ({exc}){nothing}") from None
    return b"".join(out)


def loads(data: bytes, name: str, nothing: str = "; nothing was imported", max_bytes: int | None = None) -> Bundle:
    """A bundle from the file's bytes (gzip-compressed or plain JSON, inflated at most `max_bytes`, default
    `max_bundle_bytes()`); `name` and `nothing` for the messages."""
    limit = max_bundle_bytes() if max_bytes is None else max_bytes
    if data.startswith(_GZIP_MAGIC):
        data = _inflate(data, limit, name, nothing)
    elif len(data) > limit:
        raise BundleError(f"{name} is more than {_mb(limit)} ({_RAISE}){nothing}")
    deep = f"{name}: the bundle is nested more than {MAX_DEPTH} deep (lists and objects): not a dlperf bundle{nothing}"
    try:
        doc = json.loads(data)
    except RecursionError:
        raise BundleError(deep) from None
    except (UnicodeDecodeError, ValueError):
        raise BundleError(f"{name} is not a dlperf bundle (not JSON, nor gzip-compressed JSON; "
                          f"`dlperf bundle export` writes one){nothing}") from None
    if deeper_than(doc, MAX_DEPTH):
        raise BundleError(deep)
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
    return Bundle(cast(BundleContent, content),  # as `check_shape` accepted it
                  version, str(doc.get("written_by")), str(doc.get("written_at")))
