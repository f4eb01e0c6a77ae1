"""What a verdict on one published claim is: the data `claims/` computes and the HTML report renders (it sits
here, below both, so that the page never imports the claims above it); shared by `dlperf verdicts` and the tests."""

from __future__ import annotations

from dataclasses import dataclass

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
CANNOT_CHECK = "cannot check here"
VERDICTS = (HOLDS, DOES_NOT_HOLD, CANNOT_CHECK)

#: The dlperf study that re-runs each seed (or `catalog` for a datasheet claim), and the workload its runs hold.
STUDY_WORKLOADS = {"mlp": "mlp", "cnn": "cnn", "ops": "ops", "backends": "backends", "catalog": None}


@dataclass(frozen=True)
class Verdict:
    """One claim of one seed study, put to the test on the user's runs."""

    #: Stable id, e.g. "003-seq-over-vec".
    claim_id: str
    #: The seed file the claim comes from (../shared/seeds/NNN_*.txt), e.g. "003_e89191de456f4043.txt".
    seed: str
    #: The dlperf study that re-runs it (mlp, cnn, ops, backends, catalog).
    study: str
    #: The claim in English, one sentence.
    text: str
    #: What is compared, with its unit (e.g. "time per epoch, sequential / vectorized").
    quantity: str
    #: The paper's figure as printed (e.g. "77x", "35-89 %").
    paper: str
    #: The user's figure for display; None where it cannot be checked.
    measured: str | None
    #: One of VERDICTS.
    verdict: str
    #: By how much it does not hold, the tolerance it was judged with, or what is missing here.
    detail: str
    #: The runs the figure came from.
    run_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {self.verdict!r}")
