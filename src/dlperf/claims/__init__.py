"""The seeds' headline claims, written down once as data, and a verdict for each computed from a user's runs.

`evaluate(datas)` returns one `Verdict` per claim, always: a claim about hardware, software or a meter the
runs do not have is `cannot check here` with what is missing, never left out.
"""

from __future__ import annotations

from dlperf.claims.loader import load_claims
from dlperf.claims.rules import RULES
from dlperf.report.study import ReportData
from dlperf.report.verdict import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS, VERDICTS, Verdict

__all__ = ["CANNOT_CHECK", "DOES_NOT_HOLD", "HOLDS", "VERDICTS", "Verdict", "evaluate"]


def evaluate(datas: list[ReportData]) -> list[Verdict]:
    """A verdict for every claim of `claims.yaml`, in file order, from the given runs (any order: where
    several runs could decide a claim, the first given that can is used; pass the newest first)."""
    out = []
    for claim in load_claims():
        got = RULES[claim.rule](claim, datas)
        out.append(Verdict(claim_id=claim.id, seed=claim.seed, study=claim.study, text=claim.text,
                           quantity=claim.quantity, paper=f"{claim.paper} ({claim.where})", measured=got.measured,
                           verdict=got.verdict, detail=got.detail, run_ids=got.run_ids))
    return out
