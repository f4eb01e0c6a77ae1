"""The plan of `make gpu-check`: which parts each step runs, each part's time-out, and each step's budget.

A device session, or a cluster's short job, allows one command of at most 10 minutes: every step is planned so
that its parts' time-outs add up to under 8 minutes (STEP_BUDGET_S), the facts that each invocation writes
included. `quick` is the first thing to run on a bare node (the kit's install included); the studies' quick
grids on cuda follow in steps `studies-1`, `studies-2`, ... (`study_groups`). Standard library only, and pure
but for `cuda_studies` (which lists the shipped study files) and `plan_studies` (which needs dlperf).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpu_evidence import StudyPlan

ROOT = Path(__file__).resolve().parents[1]
QUICK_DIR = Path(__file__).resolve().parent / "gpu_quick"
STUDY_DIR = ROOT / "src" / "dlperf" / "studies"
STEP_BUDGET_S = 470.0  # 8 minutes less 10 s for the check itself
#: The facts each invocation writes first (so that a job cut short still has them), with their time-outs.
#: Measured on the first H200 run (results/evidence/nvidia-h200): 0.2, 0.1, 6-9, 8-9, 1 and 0 s.
FACTS_S = {"facts:nvidia-smi": 5.0, "facts:frameworks": 3.0, "facts:fingerprint": 12.0, "facts:doctor": 15.0,
           "facts:pip": 3.0, "facts:ncu": 3.0}
#: The study files of a shipped study's run, and the time-out of each report command (show, text, Markdown,
#: export): seconds each, the same for all.
REPORTS = ("show", "text", "markdown", "export")
REPORT_TIMEOUT_S = 15.0
#: Seconds a study's `dlperf run --quick` on cuda may take in a `studies-N` step (chosen, not yet checked against
#: real durations on a GPU); a shipped study not named here gets STUDY_TIMEOUT_S.
STUDY_TIMEOUTS_S = {"peaks": 120.0, "ops": 320.0, "backends": 140.0, "mlp": 130.0, "cnn": 240.0}
STUDY_TIMEOUT_S = 130.0
#: Run first: the ops report's roofline reads the measured peaks of the same store.
FIRST = ("peaks", "ops")
#: Studies run with `--counters` where ncu exists: their cost models (FLOPs, DRAM bytes per call) are what
#: ncu checks. The training studies (cnn, mlp, backends) launch many kernels per step and ncu replays each
#: several times, which would not fit the time budget: run them with `--counters` by hand.
COUNTER_STUDIES = ("ops", "peaks")
#: The old whole-grid steps: `tests` (every GPU test) and `studies` (every study), for a machine without a limit.
TESTS_TIMEOUT_S = 480.0
PLAN_TIMEOUT_S = 30.0  # `studies:plan`: which studies run on cuda (loads every study file with dlperf)
INSTALL_TIMEOUT_S = 1800.0  # `make install-gpu` from an index (not part of any budget: a download)


@dataclass(frozen=True)
class Part:
    """One command of a step: its name in the evidence, its time-out, and what it checks."""

    name: str
    timeout_s: float
    what: str
    study: str = ""  # the study file of a `dlperf run` part (from the repository root)
    args: tuple[str, ...] = ()  # more options of that `dlperf run`


#: The quick step's parts after the facts; the install (with --wheels) and the counters (where ncu exists) come
#: and go with the node. Each `quick:NAME` run is followed by its export (REPORT_TIMEOUT_S is not used here:
#: the export alone, QUICK_EXPORT_S, feeds the summary; `dlperf report --db` makes the rest anywhere later).
#: The time-outs are about 1.3x what each part took on the first H200 run (results/evidence/nvidia-h200, its
#: README's steps table), where a case in its own worker took 6-9 s whatever its budget (start, CUDA context,
#: energy and activity windows), ~13 s a case in a run with the canary between cases: ops has 5 cases, after 10
#: ran past 55 s and 7 past 75 s (the second H200 run).
QUICK_EXPORT_S = 5.0  # 1.0-1.6 s on the H200
QUICK = (
    Part("quick:install", 15.0, "the kit's wheels into a temporary folder (pip install --no-index --no-deps)"),
    Part("quick:tests", 85.0, "pytest -m gpu in 6 processes: every GPU test but the two below, none of an absent "
                              "framework"),  # 58 and 67 s in 4 processes, without the fleet's test
    Part("quick:timing", 12.0, "CUDA-event time against the wall time of the same synchronised GEMMs"),  # 6.5 s
    # 37 s on the H200 (pytest included), with ncu working
    Part("quick:counters", 50.0, "one ncu counter check: FLOPs counted against the cost model (where ncu exists)"),
    Part("quick:peaks", 50.0, "GEMM FLOP/s and copy/triad bandwidth, PyTorch on cuda, NVML energy",
         "peaks", ("--quick", "--device", "cuda", "--framework", "torch")),  # 39 s
    Part("quick:ops", 85.0, "add, sigmoid, dot and attention in PyTorch on cuda at 32 MB, and the 8192^3 bf16 "
                            "GEMM, NVML energy", "scripts/gpu_quick/ops.yaml"),  # 6 cases in 76 s
    Part("quick:mlp", 20.0, "one mlp training case (PyTorch tensors, small)", "scripts/gpu_quick/mlp.yaml"),  # 15 s
    Part("quick:cnn", 28.0, "one cnn training case (AlexNet, batch 32)", "scripts/gpu_quick/cnn.yaml"),  # 19 s
    Part("quick:transformer", 28.0, "one transformer training case (GPT-2 tiny, bf16)",
         "scripts/gpu_quick/transformer.yaml"),  # 21 s
    Part("quick:nn", 24.0, "dlperf.nn's cuda backend, and with cuBLAS", "scripts/gpu_quick/nn.yaml"),  # 18 s
)


def quick_parts(*, wheels: bool, ncu: bool) -> list[Part]:
    """The quick step's parts on this node: the install only with a kit, the counters only where ncu is."""
    return [p for p in QUICK if (p.name != "quick:install" or wheels) and (p.name != "quick:counters" or ncu)]


def quick_budget_s(parts: list[Part], ncu: bool) -> float:
    """The longest the quick step can take: its parts, their exports and the facts, each at its time-out."""
    runs = sum(1 for p in parts if p.study)
    return sum(p.timeout_s for p in parts) + runs * QUICK_EXPORT_S + facts_budget_s(ncu)


def facts_budget_s(ncu: bool) -> float:
    return sum(t for k, t in FACTS_S.items() if ncu or k != "facts:ncu")


def study_budget_s(name: str) -> float:
    """A study's run and its four reports, each at its time-out."""
    return STUDY_TIMEOUTS_S.get(name, STUDY_TIMEOUT_S) + len(REPORTS) * REPORT_TIMEOUT_S


def cuda_studies(study_dir: Path = STUDY_DIR) -> list[str]:
    """The shipped studies whose top-level `devices:` lists cuda, peaks and ops first (read as text: this runs
    before dlperf's dependencies are installed; plan_studies decides with dlperf which of them run)."""
    names = []
    for path in sorted(study_dir.glob("*.yaml")):
        m = re.search(r"^devices:\s*\[([^\]]*)\]", path.read_text(encoding="utf-8"), re.MULTILINE)
        if m and any(d.strip().startswith("cuda") for d in m.group(1).split(",")):
            names.append(path.stem)
    return [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]


def study_groups(names: list[str], ncu: bool = True) -> list[list[str]]:
    """The studies cut into steps whose runs, reports and facts fit STEP_BUDGET_S each: each study goes into the
    first step with room for it (first fit), so peaks, first, lands in the step before ops or in the same one."""
    room = STEP_BUDGET_S - facts_budget_s(ncu) - PLAN_TIMEOUT_S
    groups: list[list[str]] = []
    for name in names:
        need = study_budget_s(name)
        if need > room:
            raise ValueError(f"study {name} needs {need:g} s with its reports, over one step's {room:g} s")
        fits = [g for g in groups if sum(study_budget_s(n) for n in g) + need <= room]
        if fits:
            fits[0].append(name)
        else:
            groups.append([name])
    return groups


def step_names(groups: list[list[str]]) -> list[str]:
    return ["install", "quick", "tests", "studies"] + [f"studies-{i}" for i in range(1, len(groups) + 1)]


def plan_studies(derived_dir: Path) -> list[StudyPlan]:
    """Every shipped study, in run order, with what the check does with it on cuda and why (needs dlperf)."""
    import yaml

    from dlperf.errors import StudyError
    from dlperf.studies import load_study, shipped_studies

    shipped = shipped_studies()
    order = [n for n in FIRST if n in shipped] + sorted(n for n in shipped if n not in FIRST)
    plans = []
    for name in order:
        full = load_study(name)
        full_cuda = sorted({c.device for c in full.cases if c.device.startswith("cuda")})
        if not full_cuda:
            plans.append(StudyPlan(name, "skip", f"no cuda device in the study (devices: "
                                                 f"{', '.join(full.settings.devices)})"))
            continue
        try:
            quick = load_study(name, quick=True)
        except StudyError:
            plans.append(StudyPlan(name, "skip", "the study has no quick variant"))
            continue
        counters = name in COUNTER_STUDIES
        cuda = [c for c in quick.cases if c.device.startswith("cuda")]
        if cuda:
            plans.append(StudyPlan(name, "quick", "its quick variant has cuda cases", name,
                                   sorted({c.device for c in cuda}), len(cuda), counters))
            continue
        raw = yaml.safe_load(shipped[name].read_text(encoding="utf-8"))
        raw["quick"] = {**(raw.get("quick") or {}), "devices": full_cuda}
        derived_dir.mkdir(parents=True, exist_ok=True)
        path = derived_dir / f"{name}-quick-cuda.yaml"
        path.write_text(f"# Derived by scripts/gpu_check.py from src/dlperf/studies/{name}.yaml: its quick variant\n"
                        f"# with quick.devices: {full_cuda} (the shipped quick variant lists "
                        f"{', '.join(quick.settings.devices)} only).\n" + yaml.safe_dump(raw, sort_keys=False),
                        encoding="utf-8")
        derived = load_study(str(path), quick=True)
        rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        plans.append(StudyPlan(name, "quick-grid-on-cuda",
                               f"its quick variant lists devices {', '.join(quick.settings.devices)} only; the "
                               f"study has {', '.join(full_cuda)}, so the quick grid runs there from a derived file",
                               rel, full_cuda, len(derived.cases), counters))
    return plans
