"""The claims file (`claims.yaml`, package data), read and validated: every claim has every field."""

from __future__ import annotations

import functools
from importlib import resources

import yaml

from dlperf.claims.claim import Claim
from dlperf.claims.rules import RULES


def parse_claims(text: str) -> tuple[Claim, ...]:
    """Claims from YAML text; ValueError on a malformed entry, a duplicate id or an unknown rule."""
    raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # safe; libyaml's where built
    if not isinstance(raw, list):
        raise ValueError("the claims file must be a list of claims")
    claims = tuple(Claim.model_validate(entry) for entry in raw)
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate claim ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    for c in claims:
        if c.rule not in RULES:
            raise ValueError(f"claim {c.id}: unknown rule {c.rule!r} (known: {', '.join(sorted(RULES))})")
    return claims


@functools.cache
def load_claims() -> tuple[Claim, ...]:
    """The claims that ship with dlperf, in file order."""
    return parse_claims(resources.files("dlperf.claims").joinpath("claims.yaml").read_text())
