"""Find, read and validate a study file; expand it into cases. Every error is one line."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dlperf.core.result import case_key
from dlperf.core.settings import RunSettings
from dlperf.errors import StudyError
from dlperf.studies.schema import Settings, StudyFile
from dlperf.untrusted import MAX_DEPTH, deeper_than
from dlperf.workloads import get_workload

SHIPPED_DIR = Path(__file__).parent

#: Loading a study counts (and so validates) its cases up to this many case-repetitions, and `dlperf run`
#: counts up to it to name the count of a study over its limit: each distinct point of the grid that a
#: count meets is validated, about 3 us each, so a 10^6-point grid is refused in a fraction of a second.
COUNT_CAP = 20_000


def shipped_studies() -> dict[str, Path]:
    """Studies that come with dlperf, by name."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("*.yaml"))}


@dataclass(frozen=True)
class Case:
    """One point of a study's matrix, run `repetition` times in fresh workers."""

    workload: str
    framework: str
    device: str
    params: dict[str, Any]
    repetition: int = 0

    @property
    def key(self) -> str:
        """Stable, readable identity of the case (without the repetition)."""
        return case_key(self.workload, self.framework, self.device, self.params)


@dataclass(frozen=True)
class CaseCount:
    """How many case-repetitions a study expands to: `n` exactly, or (not `exact`) more than `n` when counting
    stopped there; `at_most` is the grid's product, before duplicates and excludes are taken out."""

    n: int
    exact: bool
    at_most: int


@dataclass(frozen=True)
class Study:
    """A validated study with its variant (full or quick) resolved. Its cases are expanded lazily:
    `count_cases` counts them without keeping them, `iter_cases` yields them, `cases` is the whole list."""

    name: str
    description: str
    workload: str
    variant: str
    path: str
    settings: RunSettings
    where: str = ""  # "quick." when the params come from the quick variant (for error messages)

    @property
    def study_hash(self) -> str:
        """Changes whenever anything that defines the cases or their settings changes."""
        blob = json.dumps(
            {"workload": self.workload, "variant": self.variant, "settings": self.settings.stored()},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @cached_property
    def cases(self) -> list[Case]:
        """Every case, in order (framework, device, point, repetition); kept once built."""
        return list(self.iter_cases())

    def iter_cases(self, frameworks: Sequence[str] = (), devices: Sequence[str] = (), *,
                   repetitions: bool = True) -> Iterator[Case]:
        """The cases on these frameworks / devices (empty: all), in the order `cases` has them (`repetitions`
        False: only each case's first). The grid's points are kept for the next (framework, device) when
        there are at most `COUNT_CAP`, else made again for it."""
        rules = self.settings.exclude
        kept = list(self._points()) if self._grid_size() <= COUNT_CAP else None
        for fw, dev in self._pairs(frameworks, devices):
            for point in kept if kept is not None else self._points():
                if any(_matches(rule, fw, dev, self._omitted | point) for rule in rules):
                    continue
                for rep in range(self.settings.repetitions if repetitions else 1):
                    yield Case(self.workload, fw, dev, point, rep)

    def count_cases(self, frameworks: Sequence[str] = (), devices: Sequence[str] = (), *,
                    stop_after: int | None = None) -> CaseCount:
        """Case-repetitions on these frameworks / devices, counted point by point without building cases;
        with `stop_after`, counting stops once the count passes it (a 10^6-point grid stays cheap)."""
        memo = (tuple(frameworks), tuple(devices))
        known = self._counts.get(memo)
        if known is not None and (known.exact or (stop_after is not None and stop_after <= known.n)):
            return known if known.exact or stop_after == known.n else CaseCount(stop_after, False, known.at_most)
        count = self._count(frameworks, devices, stop_after)
        self._counts[memo] = count
        return count

    @cached_property
    def _omitted(self) -> dict[str, Any]:
        """The defaults a case's stored params leave out (`WorkloadParams.OMIT_AT_DEFAULT`): an exclude entry that
        names one (`variant: eager`) still matches a case at that default."""
        params = get_workload(self.workload).Params
        return {k: params.model_fields[k].default for k in params.OMIT_AT_DEFAULT}

    @cached_property
    def _counts(self) -> dict[tuple[tuple[str, ...], tuple[str, ...]], CaseCount]:
        return {}

    def _count(self, frameworks: Sequence[str], devices: Sequence[str], stop_after: int | None) -> CaseCount:
        pairs = self._pairs(frameworks, devices)
        reps = self.settings.repetitions
        at_most = self._grid_size() * len(pairs) * reps
        rules = [r for r in self.settings.exclude if set(r) - {"framework", "device"}]
        n = 0
        points = self._points() if pairs else iter(())
        for point in points:
            full = self._omitted | point
            n += reps * sum(1 for fw, dev in pairs if not any(_matches(r, fw, dev, full) for r in rules))
            if stop_after is not None and n > stop_after:
                if next(points, None) is None:  # that was the last point: the count is exact after all
                    return CaseCount(n, True, at_most)
                return CaseCount(stop_after, False, at_most)
        return CaseCount(n, True, at_most)

    def _pairs(self, frameworks: Sequence[str], devices: Sequence[str]) -> list[tuple[str, str]]:
        """(framework, device) pairs of the study on these filters that no framework/device-only exclude drops."""
        rules = [r for r in self.settings.exclude if not set(r) - {"framework", "device"}]
        return [(fw, dev) for fw, dev in itertools.product(self.settings.frameworks, self.settings.devices)
                if (not frameworks or fw in frameworks) and (not devices or dev in devices)
                and not any(_matches(rule, fw, dev, {}) for rule in rules)]

    def _grids(self) -> list[dict[str, Any]]:
        return self.settings.params if isinstance(self.settings.params, list) else [self.settings.params]

    def _grid_size(self) -> int:
        """Points of the grids before duplicates are taken out: the product of each grid's axis lengths."""
        return sum(math.prod(len(v) if isinstance(v, list) else 1 for v in grid.values()) for grid in self._grids())

    def _points(self) -> Iterator[dict[str, Any]]:
        """The grid's distinct points, validated and canonical (aliases resolved, defaults in), one at a time."""
        workload = get_workload(self.workload)
        grids = self._grids()
        seen: set[str] = set()
        for gi, grid in enumerate(grids):
            keys = list(grid)
            values = [v if isinstance(v, list) else [v] for v in grid.values()]
            for combo in itertools.product(*values):
                try:
                    parsed = workload.parse(dict(zip(keys, combo, strict=True)))
                except ValidationError as exc:
                    where = f"params[{gi}]." if len(grids) > 1 else "params."
                    raise _first_error(Path(self.path), exc, self.where + where) from None
                canonical = parsed.canonical()
                key = json.dumps(canonical, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    yield canonical


def resolve_path(name_or_path: str) -> Path:
    """A shipped study name, or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists() or "/" in name_or_path:
        if p.is_dir():
            raise StudyError(f"{name_or_path}: is a directory; give a study file (.yaml) or a shipped study's name")
        if not p.exists():
            raise StudyError(f"{name_or_path}: study file not found")
        if not p.is_file():
            raise StudyError(f"{name_or_path}: not a regular file (a device, pipe or socket); give a .yaml study file")
        return p
    shipped = shipped_studies()
    if name_or_path in shipped:
        return shipped[name_or_path]
    raise StudyError(
        f"{name_or_path}: no such study (shipped: {', '.join(shipped) or 'none'}; or give a path to a .yaml file)"
    )


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _first_error(path: Path, exc: ValidationError, prefix: str = "") -> StudyError:
    err = exc.errors()[0]
    loc = _loc(tuple(err["loc"]))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return StudyError(f"{path}: {prefix}{loc}: {msg}{more}")


#: The largest study file read (bytes): a study is a page of YAML; a file past this is refused before it is
#: parsed (a list of a million values took a minute and 860 MB in the pure-Python parser).
STUDY_MAX_BYTES = 256 * 1024


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (its C parser, libyaml, where PyYAML has it: the same safe constructor, about ten
    times faster), refusing a key given twice in one mapping (PyYAML keeps the last silently)."""


def _no_duplicate_keys(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (the file gives it twice; say it once)", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


#: What the parser's RecursionError stands for (lists nested hundreds deep, as an `exclude` can be written).
_TOO_DEEP = object()


def read_study_file(path: Path) -> StudyFile:
    """Parse and validate the YAML; raise StudyError naming file, key and expectation."""
    try:
        with path.open("rb") as f:
            data = f.read(STUDY_MAX_BYTES + 1)  # never more than the limit in memory, whatever the file's size
    except OSError as exc:
        raise StudyError(f"{path}: cannot read study file ({exc.strerror})") from None
    if len(data) > STUDY_MAX_BYTES:
        raise StudyError(f"{path}: larger than a study file may be ({STUDY_MAX_BYTES // 1024} KiB): a study lists "
                         f"a few values per key, it does not enumerate a grid")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StudyError(f"{path}: not a UTF-8 text file (byte {exc.start}): a study file is YAML text") from None
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass that refuses duplicate keys
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise StudyError(f"{path}{where}: YAML syntax error: {problem}") from None
    except RecursionError:  # the parser nests a call per level: far past any study's depth
        raw = _TOO_DEEP
    if raw is _TOO_DEEP or deeper_than(raw, MAX_DEPTH):
        raise StudyError(f"{path}: lists and mappings nested more than {MAX_DEPTH} deep: not a study file")
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: expected a mapping of study keys at the top level")
    try:
        return StudyFile.model_validate(raw)
    except ValidationError as exc:
        raise _first_error(path, exc) from None


def load_study(name_or_path: str, *, quick: bool = False) -> Study:
    """Load and validate; the variant resolved. A study that expands to no case is an error; its points are
    validated here up to `COUNT_CAP` case-repetitions (a huge grid is counted, never built, here)."""
    path = resolve_path(name_or_path)
    sf = read_study_file(path)
    if quick and sf.quick is None:
        raise StudyError(f"{path}: this study has no 'quick' variant")
    settings = resolve_settings(sf, sf.quick if quick else None)
    if not settings.frameworks:
        raise StudyError(f"{path}: frameworks: missing (list the frameworks to run)")
    variant = sf.quick if quick else None
    study = Study(
        name=sf.name,
        description=sf.description,
        workload=sf.workload,
        variant="quick" if quick else "full",
        path=str(path),
        settings=settings,
        where="quick." if variant is not None and variant.params is not None else "",
    )
    _check_grid(study)
    _check_excludes(study, "quick." if variant is not None and variant.exclude is not None else "")
    return study


def _check_grid(study: Study) -> None:
    """An empty list in the grid means no case at all: say where, rather than "no case matches" later."""
    grids = study._grids()
    if not grids:
        raise StudyError(f"{study.path}: {study.where}params: an empty list, so the study has no case "
                         f"(give at least one grid)")
    for gi, grid in enumerate(grids):
        for key, values in grid.items():
            if values == []:
                where = f"params[{gi}]." if len(grids) > 1 else "params."
                raise StudyError(f"{study.path}: {study.where}{where}{key}: an empty list, so the grid has no "
                                 f"case (give at least one value)")


def _check_excludes(study: Study, where: str) -> None:
    """Exclude entries name known keys and leave at least one case; the points met counting up to `COUNT_CAP`
    case-repetitions are validated on the way."""
    workload = get_workload(study.workload)
    known = {"framework", "device", *workload.Params.model_fields}
    for i, rule in enumerate(study.settings.exclude):
        unknown = sorted(set(rule) - known)
        if unknown:
            raise StudyError(f"{study.path}: {where}exclude[{i}]: unknown key {', '.join(map(repr, unknown))} (an "
                             f"exclude entry names framework, device or the {study.workload} parameters: "
                             f"{', '.join(sorted(workload.Params.model_fields))})")
    count = study.count_cases(stop_after=COUNT_CAP)  # validates the points it meets
    if count.n == 0:
        s = study.settings
        before = len(s.frameworks) * len(s.devices) * study._grid_size() * s.repetitions
        raise StudyError(f"{study.path}: {where}exclude: the entries leave no case (each of the {before:,} "
                         f"case-repetitions of frameworks x devices x params matches one); remove or narrow an entry")


def resolve_settings(*layers: Settings | None) -> RunSettings:
    """The defaults, overridden by each layer's keys that are set, in order (the file, then its variant)."""
    settings = RunSettings()
    for layer in layers:
        if layer is not None:
            settings = settings.with_overrides(**{key: getattr(layer, key) for key in Settings.model_fields})
    return settings


def _matches(rule: dict[str, Any], framework: str, device: str, point: dict[str, Any]) -> bool:
    """An `exclude` entry matches when every key it names has the case's value (or one of a list)."""
    values = {"framework": framework, "device": device, **point}
    for key, wanted in rule.items():
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if values.get(key) not in allowed:
            return False
    return True
