"""The pure half of `make gpu-check`: naming the device, summarising what the steps left, writing the README.

Nothing here runs a command or touches a file: every function takes what a step produced (an exit status, a
JUnit XML text, a `dlperf export --format json` document) and returns text, so it is tested with made-up
outcomes on a machine without a GPU. Standard library only: `scripts/gpu_check.py` runs before any install.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

#: Case statuses that make a study step fail: the harness or the code broke. `oom` and `unsupported` are
#: outcomes the store records with their reason (a framework built without CUDA is `unsupported`).
FAILED_CASE_STATUSES = ("error", "timeout", "crashed")


#: The node's frameworks and their CUDA libraries: what the check measures, so the kit never carries them and an
#: install from a kit never replaces them (names as `canonical_name` writes them). NVML's binding is not one.
PROTECTED = ("torch", "torchvision", "torchaudio", "triton", "jax", "jaxlib")
PROTECTED_PREFIXES = ("cupy-", "jax-cuda", "cuda-", "nvidia-cu", "nvidia-nccl", "nvidia-nvjitlink", "nvidia-nvshmem",
                      "nvidia-nvtx")


def canonical_name(name: str) -> str:
    """A project name as pip compares them: lower case, runs of '-', '_', '.' as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_protected(name: str) -> bool:
    """Whether a project is one of the node's frameworks or CUDA libraries (see PROTECTED)."""
    name = canonical_name(name)
    return name in PROTECTED or name.startswith(PROTECTED_PREFIXES)


def wheel_project(filename: str) -> str:
    """The canonical project name of a wheel file: the part of its name before the first '-'."""
    return canonical_name(filename.split("-", 1)[0])


def device_kind(gpu_name: str) -> str:
    """The folder name of a GPU: nvidia-smi's name, lower case, runs of other characters as one '-'.
    "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    if not slug:
        raise ValueError(f"GPU name {gpu_name!r} has no letter or digit to name a folder with")
    return slug


@dataclass
class StepOutcome:
    """How one step ended: its command as run (from the repository root), exit status, time, and findings."""

    name: str
    command: str
    started_utc: str
    duration_s: float
    exit_status: int | None  # None: it did not run (see note) or was killed at its time-out
    commit: str
    timeout_s: float | None = None
    timed_out: bool = False
    log: str | None = None  # the file holding its output, relative to the evidence folder
    note: str = ""  # why it failed or did not run, beyond the exit status
    details: list[str] = field(default_factory=list)
    failed_anyway: bool = False  # exit 0, yet what it produced shows a failure (e.g. cases that crashed)
    skipped: bool = False  # not run on purpose (the note says why): neither passed nor failed

    @property
    def failed(self) -> bool:
        return not self.skipped and (self.timed_out or self.exit_status != 0 or self.failed_anyway)

    def fail_with(self, note: str) -> None:
        """Mark the step failed though its command exited 0, adding `note` to its notes."""
        self.failed_anyway, self.note = True, (self.note + "; " if self.note else "") + note

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepOutcome:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class StudyPlan:
    """What the check does with one shipped study on cuda: `quick` (its quick variant has cuda cases),
    `quick-grid-on-cuda` (the quick variant lists only the CPU; its grid runs on cuda from a derived file),
    or `skip` (no cuda device at all, or no quick variant), with the reason."""

    name: str
    action: str
    reason: str
    study_arg: str = ""  # what `dlperf run` is given: the shipped name or the derived file's path
    devices: list[str] = field(default_factory=list)
    cuda_cases: int = 0
    counters: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def junit_summary(xml_text: str) -> tuple[list[str], int, int]:
    """Lines saying what pytest's JUnit XML holds (counts, then each failed test), how many failed and how
    many were skipped."""
    root = ET.fromstring(xml_text)
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    totals: Counter[str] = Counter()
    failed: list[str] = []
    for suite in suites:
        for key in ("tests", "failures", "errors", "skipped"):
            totals[key] += int(suite.get(key, 0))
        for case in suite.iter("testcase"):
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is not None:
                message = (bad.get("message") or "").strip().splitlines()
                failed.append(f"FAILED {case.get('classname')}::{case.get('name')}"
                              + (f": {message[0][:200]}" if message else ""))
    n_failed = totals["failures"] + totals["errors"]
    passed = totals["tests"] - n_failed - totals["skipped"]
    lines = [f"{totals['tests']} GPU tests: {passed} passed, {n_failed} failed, {totals['skipped']} skipped"]
    return lines + failed, n_failed, totals["skipped"]


def run_summary(export: dict[str, Any]) -> tuple[list[str], int]:
    """Lines saying what a run stored (`dlperf export --format json`): its status, the cases by status,
    whether energy and counters were measured, validity; and how many cases ended in a failed status."""
    run, results = export.get("run", {}), export.get("results", [])
    statuses = Counter(r.get("status") for r in results)
    lines = [f"run {run.get('id')}: {run.get('status')}, {len(results)} of {run.get('n_cases')} cases stored ("
             + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) + ")"]
    ok = [r for r in results if r.get("status") == "ok"]
    for r in results:
        if r.get("status") != "ok":
            lines.append(f"{r.get('status')}: {r.get('case_key')}: {str(r.get('reason') or '')[:200]}")
    energies = [(r.get("metrics") or {}).get("energy") or {} for r in ok]
    measured = sum(1 for e in energies if e.get("measured"))
    why_not = next((e.get("reason") for e in energies if not e.get("measured") and e.get("reason")), None)
    lines.append(f"energy measured in {measured} of {len(ok)} ok cases"
                 + (f"; not measured: {str(why_not)[:200]}" if why_not else ""))
    counters = [(r.get("metrics") or {}).get("counters") for r in ok]
    asked = [c for c in counters if c is not None]
    if asked:
        good = sum(1 for c in asked if "error" not in c)
        first_error = next((c["error"] for c in asked if "error" in c), None)
        lines.append(f"ncu counters in {good} of {len(ok)} ok cases"
                     + (f"; first error: {str(first_error)[:200]}" if first_error else ""))
    validity = Counter((r.get("metrics") or {}).get("validity") for r in ok)
    validity.pop(None, None)
    if validity:
        lines.append("validity: " + ", ".join(f"{n} {v}" for v, n in sorted(validity.items())))
    return lines, sum(statuses[s] for s in FAILED_CASE_STATUSES)


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _exit(o: StepOutcome) -> str:
    if o.skipped:
        return "skipped"
    if o.timed_out:
        return f"killed at its {o.timeout_s:g} s time-out"
    if o.exit_status is None:
        return "did not run"
    return str(o.exit_status) + (" (but see findings)" if o.failed_anyway and o.exit_status == 0 else "")


def render_readme(meta: dict[str, Any], outcomes: list[StepOutcome], plan: list[StudyPlan],
                  files: list[str]) -> str:
    """The evidence folder's README.md: machine, each step (command, exit status, duration, findings),
    the studies (run or skipped, and why), what failed, and the files."""
    failed = [o for o in outcomes if o.failed]
    verdict = (f"**{len(failed)} of {len(outcomes)} steps failed**: " + ", ".join(o.name for o in failed)
               if failed else f"all {len(outcomes)} steps passed")
    out = [f"# GPU evidence: {meta['gpu_name']} (`{meta['kind']}`)", "",
           "Written by `make gpu-check` (`scripts/gpu_check.py`); `results/evidence/README.md` says how to read "
           "and redo it. Nothing here is edited by hand.", "",
           f"- last invocation: {meta['date_utc']} at commit `{meta['commit']}`: `{meta['invocation']}`",
           f"- result: {verdict}",
           f"- GPUs: {'; '.join(meta.get('gpus', [])) or meta['gpu_name']}",
           f"- Nsight Compute: {meta.get('ncu') or 'not found, so no counters were collected'}",
           f"- every command ran from the repository root with {meta.get('env_note', 'PYTHONPATH=src')}", ""]
    out += ["## Steps", "", "| step | exit status | duration | started (UTC) | commit |", "|---|---|---|---|---|"]
    for o in outcomes:
        out.append(f"| {o.name} | {_exit(o)} | {_duration(o.duration_s)} | {o.started_utc} | `{o.commit[:12]}` |")
    out.append("")
    for o in outcomes:
        out += [f"### {o.name}", "", "```", o.command, "```", ""]
        if o.log:
            out.append(f"output: [`{o.log}`]({o.log})")
        if o.note:
            out.append(f"note: {o.note}")
        out += [f"- {line}" for line in o.details]
        out.append("")
    if plan:
        out += ["## Studies on cuda", "", "What the check runs of each shipped study (the steps above say what ran "
                "and how it ended).", "", "| study | planned | cuda cases | why |", "|---|---|---|---|"]
        for p in plan:
            what = {"quick": f"`--quick --device {','.join(p.devices)}`" + (", `--counters`" if p.counters else ""),
                    "quick-grid-on-cuda": f"quick grid on {','.join(p.devices)} from `{p.study_arg}`"
                                          + (", `--counters`" if p.counters else ""),
                    "skip": "skipped"}.get(p.action, p.action)
            out.append(f"| {p.name} | {what} | {p.cuda_cases} | {p.reason} |")
        out.append("")
    out += ["## What failed", ""]
    if not failed:
        out.append("Nothing: every step that ran exited 0, and no stored case ended in error, timeout or crashed.")
    for o in failed:
        out.append(f"- **{o.name}**: {_exit(o)}" + (f"; {o.note}" if o.note else "")
                   + (f" (output: `{o.log}`)" if o.log else ""))
        out += [f"  - {line}" for line in o.details if line.startswith(("FAILED", *FAILED_CASE_STATUSES))]
    out += ["", "## Files", ""] + [f"- `{f}`" for f in files] + [""]
    return "\n".join(out)


def load_state(text: str | None) -> dict[str, Any]:
    """The evidence folder's steps.json (the outcomes of earlier invocations), or an empty state."""
    state = json.loads(text) if text else {}
    return {"steps": state.get("steps", {}), "plan": state.get("plan", []), "meta": state.get("meta", {})}
