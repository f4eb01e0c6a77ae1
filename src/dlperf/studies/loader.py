"""Find, read and validate a study file; expand it into cases. Every error is one line."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dlperf.core.settings import RunSettings
from dlperf.errors import StudyError
from dlperf.studies.schema import Settings, StudyFile
from dlperf.workloads import get_workload

SHIPPED_DIR = Path(__file__).parent


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
        kv = ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))
        return f"{self.workload}/{self.framework}/{self.device}/{kv}"


@dataclass(frozen=True)
class Study:
    """A validated study with its variant (full or quick) resolved."""

    name: str
    description: str
    workload: str
    variant: str
    path: str
    settings: RunSettings
    cases: list[Case] = field(default_factory=list)

    @property
    def study_hash(self) -> str:
        """Changes whenever anything that defines the cases or their settings changes."""
        blob = json.dumps(
            {"workload": self.workload, "variant": self.variant, "settings": self.settings.stored()},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve_path(name_or_path: str) -> Path:
    """A shipped study name, or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists() or "/" in name_or_path:
        if p.is_dir():
            raise StudyError(f"{name_or_path}: is a directory; give a study file (.yaml) or a shipped study's name")
        if not p.is_file():
            raise StudyError(f"{name_or_path}: study file not found")
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


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently)."""


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


def read_study_file(path: Path) -> StudyFile:
    """Parse and validate the YAML; raise StudyError naming file, key and expectation."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StudyError(f"{path}: cannot read study file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise StudyError(f"{path}: not a UTF-8 text file (byte {exc.start}): a study file is YAML text") from None
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass that refuses duplicate keys
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise StudyError(f"{path}{where}: YAML syntax error: {problem}") from None
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: expected a mapping of study keys at the top level")
    try:
        return StudyFile.model_validate(raw)
    except ValidationError as exc:
        raise _first_error(path, exc) from None


def load_study(name_or_path: str, *, quick: bool = False) -> Study:
    """Load, validate, resolve the variant and expand into cases."""
    path = resolve_path(name_or_path)
    sf = read_study_file(path)
    if quick and sf.quick is None:
        raise StudyError(f"{path}: this study has no 'quick' variant")
    settings = resolve_settings(sf, sf.quick if quick else None)
    if not settings.frameworks:
        raise StudyError(f"{path}: frameworks: missing (list the frameworks to run)")
    cases = _expand(path, sf.workload, settings, "quick." if quick and sf.quick and sf.quick.params else "")
    return Study(
        name=sf.name,
        description=sf.description,
        workload=sf.workload,
        variant="quick" if quick else "full",
        path=str(path),
        settings=settings,
        cases=cases,
    )


def resolve_settings(*layers: Settings | None) -> RunSettings:
    """The defaults, overridden by each layer's keys that are set, in order (the file, then its variant)."""
    settings = RunSettings()
    for layer in layers:
        if layer is not None:
            settings = settings.with_overrides(**{key: getattr(layer, key) for key in Settings.model_fields})
    return settings


def _grid_points(grid: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(grid)
    values = [v if isinstance(v, list) else [v] for v in grid.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


def _expand(path: Path, workload_name: str, settings: RunSettings, prefix: str) -> list[Case]:
    workload = get_workload(workload_name)
    grids = settings.params if isinstance(settings.params, list) else [settings.params]
    points: list[dict[str, Any]] = []
    for gi, grid in enumerate(grids):
        for point in _grid_points(grid):
            try:
                parsed = workload.parse(point)
            except ValidationError as exc:
                where = f"params[{gi}]." if len(grids) > 1 else "params."
                raise _first_error(path, exc, prefix + where) from None
            canonical = parsed.model_dump(mode="json", exclude_none=True)
            if canonical not in points:
                points.append(canonical)
    known = {"framework", "device", *workload.Params.model_fields}
    for i, rule in enumerate(settings.exclude):
        unknown = sorted(set(rule) - known)
        if unknown:
            raise StudyError(f"{path}: {prefix}exclude[{i}]: unknown key {', '.join(map(repr, unknown))} (an exclude "
                             f"entry names framework, device or the {workload_name} parameters: "
                             f"{', '.join(sorted(workload.Params.model_fields))})")
    cases = []
    for fw, dev, point in itertools.product(settings.frameworks, settings.devices, points):
        if any(_matches(rule, fw, dev, point) for rule in settings.exclude):
            continue
        for rep in range(settings.repetitions):
            cases.append(Case(workload_name, fw, dev, point, rep))
    return cases


def _matches(rule: dict[str, Any], framework: str, device: str, point: dict[str, Any]) -> bool:
    """An `exclude` entry matches when every key it names has the case's value (or one of a list)."""
    values = {"framework": framework, "device": device, **point}
    for key, wanted in rule.items():
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if values.get(key) not in allowed:
            return False
    return True
