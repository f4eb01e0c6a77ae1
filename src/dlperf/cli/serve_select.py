"""Which cases `dlperf serve` runs: the `serving` study narrowed to the models and scenarios asked for, with the
case parameters the command line overrides, and every check on those words made before any store is opened.

A narrowed or overridden study is another study identity: its params are the selected points, so its hash
(`Study.study_hash`) differs and its runs are never resumed into, nor merged with, runs made without those words
(as `dlperf run` keeps runs with other --framework filters or setting overrides apart). A selection that leaves
the study's cases as they are keeps the study as it is, so `dlperf serve --quick` and `dlperf run serving --quick`
are the same run.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from dlperf.errors import DlperfError, StudyError

SCENARIOS = ("single-stream", "multi-stream", "server", "offline")
#: A scenario as LoadGen spells it (SingleStream) or as dlperf does (single-stream), compared without case,
#: hyphens or underscores.
_SPELLINGS = {s.replace("-", ""): s for s in SCENARIOS}

#: The case parameters the command line may set, and the scenarios where each means something (elsewhere the
#: case is left as it is: a SingleStream query is one sample, so a batch bound or a rate says nothing there).
OVERRIDES: dict[str, tuple[str, tuple[str, ...]]] = {
    "target_latency_ms": ("--target-latency-ms", ("server", "multi-stream")),
    "target_qps": ("--target-qps", ("server", "offline")),
    "max_batch": ("--max-batch", ("multi-stream", "server", "offline")),
    "min_duration_s": ("--min-duration-s", SCENARIOS),
    "min_query_count": ("--min-query-count", SCENARIOS),
}


class ScenarioType(click.ParamType):
    """One of MLPerf's four scenarios: single-stream, multi-stream, server, offline (LoadGen's SingleStream, ...
    too); converted to dlperf's spelling."""

    name = "SCENARIO"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        key = str(value).strip().lower().replace("-", "").replace("_", "").replace(" ", "")
        if key in _SPELLINGS:
            return _SPELLINGS[key]
        self.fail(f"unknown scenario {value!r} (MLPerf's four: {', '.join(SCENARIOS)})", param, ctx)


def check_frameworks(frameworks: list[str]) -> None:
    """Each named framework or runtime is one dlperf knows and one that is installed here (one line if not)."""
    from dlperf.frameworks import get_framework

    for name in frameworks:
        try:
            fw = get_framework(name)
        except KeyError as exc:
            raise StudyError(f"--framework: {exc.args[0]}") from None
        if not fw.available():
            raise DlperfError(f"{name} is not installed ({fw.install_hint})")


def model_workload(model: str) -> str:
    """The served workload of `model` (cnn or transformer); an unknown model is one line listing the known ones."""
    from dlperf.models import MODELS
    from dlperf.models.transformer import PRESETS

    if model in MODELS:
        return "cnn"
    if model in PRESETS:
        return "transformer"
    raise StudyError(f"unknown model {model!r} (cnn: {', '.join(MODELS)}; transformer: {', '.join(PRESETS)})")


def check_pairs(models: list[str], frameworks: list[str], study_models: dict[str, str]) -> None:
    """Each named framework builds an inference step of each named model's workload (with no model named: of one
    of the study's workloads at least): a pair with none is one line saying which frameworks serve it."""
    from dlperf.workloads import get_workload

    for fw in frameworks:
        if models:
            for model in models:
                workload = model_workload(model)
                serving = get_workload(workload).frameworks()
                if fw not in serving:
                    raise StudyError(f"{fw} has no {workload} inference step to serve {model} (the {workload} "
                                     f"models are served on {', '.join(serving)})")
        elif not any(fw in get_workload(w).frameworks() for w in set(study_models.values())):
            raise StudyError(f"{fw} has no inference step of the served workloads "
                             f"({', '.join(sorted(set(study_models.values())))})")


def points(study: Any) -> list[dict[str, Any]]:
    """The study's distinct case parameters, in its order."""
    seen: dict[str, dict[str, Any]] = {}
    for case in study.iter_cases(repetitions=False):
        seen.setdefault(json.dumps(case.params, sort_keys=True), case.params)
    return list(seen.values())


def select(study: Any, *, models: list[str], scenarios: list[str], frameworks: list[str],
           overrides: dict[str, Any]) -> Any:
    """`study` narrowed to `models` and `scenarios` (empty: all) with `overrides` (case parameter -> value; None:
    as the study has it) applied where they mean something: the same study when that leaves its cases as they
    are, else a study whose params are the selected points (another identity). Bad words are one line each."""
    from pydantic import ValidationError

    from dlperf.workloads.serve import ServeParams

    before = points(study)
    study_models = {p["model"]: p["workload"] for p in before}
    for model in models:
        model_workload(model)  # unknown anywhere: that line first
    check_pairs(models, frameworks, study_models)
    where = f"the {study.name} study's {study.variant} variant"
    missing = [m for m in models if m not in study_models]
    if missing:
        other = " (the full variant serves more: drop --quick)" if study.variant == "quick" else ""
        raise StudyError(f"{', '.join(missing)}: not served by {where} (its models: {', '.join(study_models)}){other}")
    chosen = [p for p in before if (not models or p["model"] in models)
              and (not scenarios or p["scenario"] in scenarios)]
    if not chosen:
        have = sorted({p["scenario"] for p in before if not models or p["model"] in models},
                      key=SCENARIOS.index)
        raise StudyError(f"{where} has no {' or '.join(scenarios)} case{' of ' + ', '.join(models) if models else ''} "
                         f"(its scenarios: {', '.join(have)})")
    given = {k: v for k, v in overrides.items() if v is not None}
    out: dict[str, dict[str, Any]] = {}
    for point in chosen:
        raw = dict(point)
        for key, value in given.items():
            if point["scenario"] in OVERRIDES[key][1]:
                raw[key] = value
        try:
            parsed = ServeParams.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            name = OVERRIDES[field][0] if field in OVERRIDES else field or "serve"
            raise StudyError(f"{name}: {err['msg'].removeprefix('Value error, ')} ({point['model']}, "
                             f"{point['scenario']})") from None
        canonical = parsed.canonical()
        out.setdefault(json.dumps(canonical, sort_keys=True), canonical)
    for key in given:
        option, applies = OVERRIDES[key]
        if not any(p["scenario"] in applies for p in chosen):
            raise StudyError(f"{option} sets the {' and '.join(applies)} scenarios' cases; none is selected "
                             f"(selected: {', '.join(sorted({p['scenario'] for p in chosen}, key=SCENARIOS.index))})")
    selected = list(out.values())
    if selected == before:
        return study
    return dataclasses.replace(study, settings=study.settings.with_overrides(params=selected), where="")


__all__ = ["OVERRIDES", "SCENARIOS", "ScenarioType", "check_frameworks", "check_pairs", "model_workload", "points",
           "select"]
