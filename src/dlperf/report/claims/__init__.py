"""The seeds' headline claims, written down once as data, and a verdict for each computed from a user's runs.

`evaluate(datas)` returns one `Verdict` per claim, always: a claim about hardware, software or a meter the
runs do not have is `cannot check here` with what is missing, never left out.
"""

from __future__ import annotations

from dlperf.report.claims.model import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS, VERDICTS, Verdict
from dlperf.report.study import ReportData

__all__ = ["CANNOT_CHECK", "DOES_NOT_HOLD", "HOLDS", "VERDICTS", "Verdict", "evaluate"]


def evaluate(datas: list[ReportData]) -> list[Verdict]:
    """A verdict for every claim, from the given runs (the rules land with the claims file)."""
    return []
