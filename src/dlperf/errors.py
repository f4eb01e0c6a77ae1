"""Errors that reach the user as one line and a non-zero exit (see cli.main)."""

from __future__ import annotations


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

