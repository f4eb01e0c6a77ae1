"""Errors that reach the user as one line and a non-zero exit (see cli.main)."""

from __future__ import annotations

import re

#: A line that only says where in a library's C++ source an error passed, not what went wrong: OpenVINO puts
#: one before its message for each layer the error crossed ("Exception from src/inference/src/cpp/core.cpp:117:",
#: "Check '...' failed at src/plugins/intel_cpu/src/node.cpp:345:").
_SOURCE_LOCATION = re.compile(r"^(?:Exception from |Check .* failed at )?\S+\.(?:c|cc|cpp|cxx|h|hpp):\d+:?$")


def exception_line(exc: BaseException) -> str:
    """`Type: message` on one line, as a case's reason stores it: the message's first line that says what went
    wrong, past lines that only name a C++ source location (the first line where every line does)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    said = next((line for line in lines if not _SOURCE_LOCATION.match(line)), lines[0] if lines else "")
    return f"{type(exc).__name__}: {said}".rstrip(": ")


class DlperfError(Exception):
    """A problem the user can fix; its message is printed alone, without a traceback."""

    exit_code = 2


class StudyError(DlperfError):
    """A study file that cannot be read or does not validate."""


class StoreError(DlperfError):
    """A database that cannot be opened, is too new, or lacks what was asked for."""


class NoStoreError(StoreError):
    """A read-only command pointed at a store that does not exist (nothing has been run into it)."""

    def __init__(self, path: object) -> None:
        super().__init__(f"no results store at {path}: nothing has been run into it (check --db or DLPERF_DB; "
                         f"`dlperf run` creates one)")
        self.path = path


class UnknownRunError(StoreError):
    """A run id that is not in the store."""


class ConfigError(DlperfError):
    """A setting dlperf cannot use: an environment variable (DLPERF_CPU_CLOCK_GHZ, ...) that is not a finite
    positive number, or not a whole number where one is needed."""


class RunBusyError(DlperfError):
    """A run another live process is executing (it holds the run's lease): it is not resumed a second time."""


class LeaseLostError(DlperfError):
    """This process no longer holds the lease of the run it was executing (another process took it over):
    it stops and stores nothing more."""



class InfrastructureError(StoreError):
    """Something under dlperf failed, not the user's input: a database that cannot be reached or opened, a full
    disk, a permission the system refused (store.failures makes them from the database's and the system's
    errors). What was stored is kept; the same command run again resumes. Exit codes follow sysexits.h."""

    exit_code = 69


class DatabaseUnavailableError(InfrastructureError):
    """The database cannot be reached or opened: a server down or gone mid-run, a database or role that does
    not exist, a refused login (exit 69, EX_UNAVAILABLE)."""

    exit_code = 69


class DiskFullError(InfrastructureError):
    """No room to write: a database or disk that is full, a file over its size limit, a disk I/O error
    (exit 74, EX_IOERR)."""

    exit_code = 74


class PermissionDeniedError(InfrastructureError):
    """The system or the database server refused access: a file, a folder, a table (exit 77, EX_NOPERM)."""

    exit_code = 77
