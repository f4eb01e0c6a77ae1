"""The one place where failures of what is under dlperf become user-facing errors (errors.InfrastructureError):
a database that cannot be reached, opened or logged into, one that is full, a disk that is full, a permission
the system refused. Each is one line naming what failed and what to do, never SQL text or SQLAlchemy's
background link, with its own exit code (README.md: Exit codes; docs/trust.md).

The store's engines call `database_error` from their `handle_error` event (store.engines); the CLI's top-level
handler calls `user_facing` on whatever else reaches it (an OSError of an output file, a database error
raised outside an engine). Runs are committed case by case, so a run stopped by any of these keeps what it
stored, and the same command resumes it.
"""

from __future__ import annotations

import errno
import re

from dlperf.errors import (
    DatabaseUnavailableError,
    DiskFullError,
    DlperfError,
    InfrastructureError,
    PermissionDeniedError,
)

#: What every database failure ends with: nothing stored is lost, and how to go on.
RESUME = "what was stored is kept, and the same command run again resumes an unfinished run"
#: PostgreSQL's SQLSTATE classes of a connection that failed or was ended by the server (08: connection
#: exception; 57: operator intervention, e.g. 57P01 admin_shutdown) and of too many connections (53300).
_UNREACHABLE_STATES = ("08", "57", "53300")
#: What the drivers say where the server cannot be reached or went away (their sqlstate is often unset then).
_UNREACHABLE = ("connection failed", "connection is bad", "server closed the connection", "terminating connection",
                "could not connect", "connection refused", "is the server running", "connection timed out",
                "consuming input failed", "the connection is closed", "connection already closed",
                "no connection to the server")


def where(url: str) -> str:
    """The store as messages name it: a SQLite file's path, else the URL without its password."""
    from dlperf.store.urls import sqlite_path

    path = sqlite_path(url)
    if path is not None:
        return str(path)
    try:
        from urllib.parse import unquote

        from sqlalchemy import make_url

        return unquote(make_url(url).render_as_string(hide_password=True))  # a socket's folder: host=/tmp/x
    except Exception:  # not a URL SQLAlchemy parses: said as given (no password can be told apart)
        return url


def _detail(exc: BaseException) -> str:
    """The driver's reason, short: its first line, after libpq's 'connection to server ... failed:'."""
    text = (str(exc) or type(exc).__name__).strip().splitlines()[0]
    text = text.rsplit(" failed: ", 1)[-1]
    text = re.sub(r"^(FATAL|ERROR):\s*", "", text)
    return " ".join(text.split())[:160]


def database_error(exc: BaseException, url: str, *, is_disconnect: bool = False) -> InfrastructureError | None:
    """The user-facing error of a database driver's exception `exc` (sqlite3's, psycopg's) from the store at
    `url`; None where it is not an infrastructure failure (a constraint, a bug: those stay what they are)."""
    low = str(exc).lower()
    state = str(getattr(exc, "sqlstate", None) or "")
    db, detail = where(url), _detail(exc)
    if "database or disk is full" in low or state == "53100" or "no space left" in low or "could not extend" in low:
        return DiskFullError(f"database {db} is full ({detail}): free space on its disk (or raise its size "
                             f"limit), or give another --db; {RESUME}")
    if "disk i/o error" in low:
        return DiskFullError(f"database {db}: the disk failed to read or write it ({detail}): check that disk "
                             f"(full? failing?); {RESUME}")
    if state == "3D000" or re.search(r'database ".*" does not exist', low):
        return DatabaseUnavailableError(f"database {db} does not exist on its server ({detail}): create it "
                                        f"(createdb) or fix --db / DLPERF_DB")
    if state.startswith("28") or re.search(r'role ".*" does not exist', low) or "authentication failed" in low:
        return DatabaseUnavailableError(f"the server of database {db} refused the login ({detail}): fix the user "
                                        f"or password in --db / DLPERF_DB, or create that role on the server")
    if state == "42501" or "permission denied" in low:
        return PermissionDeniedError(f"database {db}: permission denied ({detail}): grant this user access, or "
                                     f"give another --db; {RESUME}")
    if is_disconnect or state.startswith(_UNREACHABLE_STATES) or any(s in low for s in _UNREACHABLE):
        return DatabaseUnavailableError(f"cannot reach database {db} ({detail}): start its server, or check the "
                                        f"host and port in --db; {RESUME}")
    if "unable to open database file" in low:
        return DatabaseUnavailableError(f"cannot open database {db} ({detail}): check that its folder exists and "
                                        f"can be written, or give another --db")
    return None


def os_error(exc: OSError, what: str) -> InfrastructureError | None:
    """The user-facing error of an OSError met writing or reading `what` (a file's path, in words); None where
    it is not a full disk, an I/O failure or a refused permission."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(f"{what}: cannot write ({reason}): free space on its disk, or write elsewhere; "
                             f"nothing was left half-written")
    if exc.errno == errno.EFBIG:
        return DiskFullError(f"{what}: cannot write ({reason}): raise the file size limit (ulimit -f), or write "
                             f"elsewhere; nothing was left half-written")
    if exc.errno == errno.EIO:
        return DiskFullError(f"{what}: the disk failed ({reason}): check that disk, or write elsewhere")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PermissionDeniedError(f"{what}: permission denied ({reason}): write elsewhere, or make it "
                                     f"writable")
    return None


def user_facing(exc: BaseException) -> DlperfError | None:
    """What the CLI prints for an exception that reached it unhandled, where it is an infrastructure failure
    (a database error outside an engine's handler, an OSError); None otherwise."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return database_error(exc.orig, "the results store", is_disconnect=exc.connection_invalidated)
    if isinstance(exc, sqlite3.Error):
        return database_error(exc, "the results store")
    if type(exc).__module__.startswith("psycopg"):
        return database_error(exc, "the results store")
    if isinstance(exc, OSError):
        return os_error(exc, str(exc.filename) if exc.filename else "a file")
    return None
