"""Tests that need a program this machine may lack (a PostgreSQL server, Chromium): skipped with the reason
where it is missing, except where `make test` (and so CI) sets the variable that requires it, and then failed:
CI must never skip them quietly."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str, require_var: str) -> NoReturn:
    """Skip with `reason`; fail instead where the environment variable `require_var` is "1"."""
    if os.environ.get(require_var) == "1":
        pytest.fail(f"{require_var}=1 but {reason}", pytrace=False)
    pytest.skip(reason)
