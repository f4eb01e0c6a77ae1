"""One published claim and how it is judged: the claims file's entry (`loader` reads the file; the rules take it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dlperf.report.verdict import STUDY_WORKLOADS


class Claim(BaseModel):
    """One headline claim of one seed study, with how it is judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^00[0-4]-[a-z0-9-]+$")
    seed: str = Field(pattern=r"^00[0-4]_[0-9a-f]{16}\.txt$")
    study: str
    text: str = Field(min_length=10)
    quantity: str = Field(min_length=5)
    #: The paper's figure exactly as printed (its language, its number format).
    paper: str = Field(min_length=1)
    #: Where the paper prints it: table, figure, section.
    where: str = Field(min_length=3)
    condition: str = Field(min_length=3)
    tolerance: str = Field(min_length=3)
    #: Why that tolerance, in a sentence or two.
    argument: str = Field(min_length=20)
    #: The rule that judges it (`rules.RULES`), and what the rule needs to know.
    rule: str
    params: dict[str, Any] = {}
    #: The command that gives the figures the claim needs.
    run: str = Field(min_length=5)

    @field_validator("study")
    @classmethod
    def _known_study(cls, value: str) -> str:
        if value not in STUDY_WORKLOADS:
            raise ValueError(f"study must be one of {sorted(STUDY_WORKLOADS)}, not {value!r}")
        return value

    @property
    def workload(self) -> str | None:
        """The workload of the runs this claim is judged on (None for a claim on the catalog)."""
        return STUDY_WORKLOADS[self.study]
