#!/usr/bin/env python3
"""`make gpu-check`: GPU evidence in one command, written under results/evidence/<device-kind>/.

Steps (each with a time-out; one failing is recorded and the next still runs; the exit status is 1 when
any step of this invocation failed):
  install  `make install-gpu` (the Makefile's venv); with --python, the node's interpreter is used as it is, and
           with --python --wheels DIR the kit of `make gpu-kit` is installed into a temporary folder
           (--no-index --no-deps --target) put on PYTHONPATH after src/
  quick    a short job's worth (gpu_steps.QUICK, under 8 minutes): the GPU tests, CUDA events against wall
           time, one ncu check, peaks and ops on cuda, one mlp/cnn/transformer/nn case, each with its time-out
  tests    `pytest -m gpu` with JUnit XML
  studies  every shipped study's quick variant on cuda into a fresh store (`dlperf run ... --quick --device
           cuda --new`, NVML energy where the meter exists, `--counters` for the ops and peaks studies where
           ncu exists), then `dlperf show`, `report` (text and Markdown) and `export --format json` per run;
           `studies-N` runs the N-th group of them that fits under 8 minutes, into the same store
The facts (nvidia-smi -q, the frameworks present, the environment fingerprint, `dlperf doctor`, pip's list) come
first in every invocation, and the README is rewritten after every step (steps.json keeps each step's latest
outcome), so a job cut short still leaves its evidence. `--dry-run` prints the plan. Without an NVIDIA GPU:
one line, exit 2, nothing written.

Runs with the standard library only (it starts before anything is installed); the study plan, which needs
dlperf, is computed by this file run again under the check's interpreter (`--plan-json`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling gpu_evidence.py, wherever run from
from gpu_evidence import (
    StepOutcome,
    StudyPlan,
    device_kind,
    is_protected,
    junit_summary,
    load_state,
    render_readme,
    run_summary,
    wheel_project,
)
from gpu_facts import facts, find_ncu
from gpu_runner import Check, detect_gpus, git_commit, guarded, now_utc, run_ids
from gpu_steps import (
    FACTS_S,
    INSTALL_TIMEOUT_S,
    PLAN_TIMEOUT_S,
    QUICK,
    QUICK_EXPORT_S,
    REPORT_TIMEOUT_S,
    STEP_BUDGET_S,
    STUDY_TIMEOUT_S,
    STUDY_TIMEOUTS_S,
    TESTS_TIMEOUT_S,
    cuda_studies,
    facts_budget_s,
    plan_studies,
    quick_budget_s,
    quick_parts,
    step_names,
    study_budget_s,
    study_groups,
)

ROOT = Path(__file__).resolve().parents[1]
#: Seconds each step or part may take before it is stopped (SIGTERM, then SIGKILL 30 s later): gpu_steps.py
#: plans them so that each step fits a 10-minute command. Chosen, not yet checked against durations on a GPU.
TIMEOUTS_S = {"install": INSTALL_TIMEOUT_S, "tests": TESTS_TIMEOUT_S, "report": REPORT_TIMEOUT_S, **FACTS_S,
              "studies:plan": PLAN_TIMEOUT_S,
              **{f"study:{k}": v for k, v in STUDY_TIMEOUTS_S.items()},
              **{p.name: p.timeout_s for p in QUICK}}
ENV_NOTE = "PYTHONPATH=src, COLUMNS=200, PYTHONUNBUFFERED=1"


COUNTERS_TEST = "tests/runner/test_counters.py::test_counters_on_a_real_gpu"
TIMING_TEST = "tests/cli/test_gpu_timing.py"


def tests(check: Check, absent: list[str] | tuple[str, ...] = (), *, name: str = "tests", where: Path | None = None,
          args: tuple[str, ...] = ()) -> None:
    """`pytest -m gpu` with JUnit XML, the tests of `absent` frameworks deselected by name; a GPU test skipped on
    a GPU machine is a failure of the check."""
    where = where or check.out
    stem = "pytest-gpu" if name == "tests" else f"pytest-{name.split(':')[-1]}"
    xml, txt = where / f"{stem}.xml", where / f"{stem}.txt"
    xml.unlink(missing_ok=True)
    # -k deselects the tests that name the framework; --ignore-glob skips the files named after it, whose import
    # fails at collection where it is absent (tests/models/test_transformer_model_tensorflow.py on the first H200 run)
    deselect = (["-k", " and ".join(f"not {n}" for n in absent)] + [f"--ignore-glob=*{n}*" for n in absent]
                if absent else [])
    env = dict(check.env, XLA_PYTHON_CLIENT_PREALLOCATE="false")  # JAX takes 75% of the GPU per process otherwise
    o = check.step(name, [check.python, "-m", "pytest", "-m", "gpu", "-rA", "-p", "no:cacheprovider",
                          f"--junitxml={check.rel(xml)}", *deselect, *args], TIMEOUTS_S[name],
                   where / "logs" / f"{stem}.log", stdout=txt, env=env)
    if o.exit_status == 5:
        o.note = "pytest collected no GPU test"
    if not xml.exists():
        o.fail_with("pytest wrote no JUnit XML")
        return
    lines, _, skipped = junit_summary(xml.read_text(encoding="utf-8"))
    o.details = lines + ([f"deselected by name (not installed): {', '.join(absent)}"] if absent else [])
    if skipped:
        o.failed_anyway = True
        o.note = f"{skipped} GPU tests were skipped on a GPU machine (see {check.rel(txt)} for the reasons)"


def install_kit(check: Check, wheels: Path, target: Path) -> StepOutcome:
    """The kit's wheels into `target` with the check's Python: no index, no dependencies, nothing compiled;
    a wheel of the node's frameworks (torch, JAX, CuPy, CUDA libraries) is refused, never installed."""
    found = sorted(wheels.glob("*.whl"))
    refused = [w.name for w in found if is_protected(wheel_project(w.name))]
    use = [check.rel(w) for w in found if w.name not in refused]
    cmd = [check.python, "-m", "pip", "install", "--no-index", "--no-deps", "--no-compile",
           "--disable-pip-version-check", "-q", "--target", str(target), *use]
    o = check.step("install", cmd, TIMEOUTS_S["quick:install"], check.out / "logs" / "install.log")
    o.details = [f"{len(use)} wheels from {check.rel(wheels)} into {target}, put on PYTHONPATH after src/"]
    if refused:
        o.details.append(f"refused (the node's own build is measured): {', '.join(refused)}")
    if not use:
        o.failed_anyway, o.note = True, f"no wheel to install in {check.rel(wheels)}"
    return o


def quick(check: Check, ncu: str | None, absent: list[str], only: list[str] | tuple[str, ...] = ()) -> None:
    """The quick step's parts (gpu_steps.QUICK): the GPU tests, the timing check, one ncu check where ncu is,
    then one run of each quick study into a fresh quick/store.db with its JSON export. `only` (part names, as
    `--part` gives them) reruns those parts alone and keeps the store's earlier runs."""
    where = check.out / "quick"
    wanted = {f"quick:{n.removeprefix('quick:')}" for n in only}

    def runs(name: str) -> bool:
        return not wanted or name in wanted

    if runs("quick:tests"):
        tests(check, absent, name="quick:tests", where=where,
              args=("-n", "6", "--deselect", COUNTERS_TEST, "--ignore", TIMING_TEST))
    if runs("quick:timing"):
        tests(check, name="quick:timing", where=where, args=(TIMING_TEST,))
    if ncu and runs("quick:counters"):
        tests(check, name="quick:counters", where=where, args=(COUNTERS_TEST,))
    store = where / "store.db"
    if not wanted:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
    for part in (p for p in quick_parts(wheels=False, ncu=bool(ncu)) if p.study and runs(p.name)):
        run_dir = where / "runs" / part.name.split(":")[1]
        before = run_ids(store)
        o = check.step(part.name, check.dlperf("run", part.study, *part.args, "--new", "--db", check.rel(store)),
                       TIMEOUTS_S[part.name], run_dir / "run.log", stdout=run_dir / "run.txt")
        new = sorted(run_ids(store) - before)
        if not new:
            o.fail_with("no run was stored")
        for run_id in new:
            export_findings(check, f"{part.name}:export", run_id, check.rel(store), run_dir / "results.json",
                            QUICK_EXPORT_S, run_dir / "export.log", o)
        check.saver and check.saver()


def studies(check: Check, selected: list[str], counters: bool) -> tuple[list[StudyPlan], str | None]:
    """The study plan, then each planned study's run into the store, and its show/report/export files."""
    out = check.out
    plan_file = out / "plan.json"
    o = check.step("studies:plan", [check.python, str(Path(__file__).resolve().relative_to(ROOT)), "--plan-json",
                                    check.rel(out / "studies")], TIMEOUTS_S["studies:plan"], out / "logs" / "plan.log",
                   stdout=plan_file)
    if o.failed:
        return [], None
    got = json.loads(plan_file.read_text(encoding="utf-8"))
    plan, ncu = [StudyPlan(**p) for p in got["plans"]], got["ncu"]
    unknown = sorted(set(selected) - {p.name for p in plan})
    if unknown:
        o.failed_anyway = True
        o.note = f"no shipped study named {', '.join(unknown)} (shipped: {', '.join(p.name for p in plan)})"
    store = out / "store.db"
    if not selected:  # the whole check: a fresh store
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
    for p in plan:
        if p.action != "skip" and (not selected or p.name in selected):
            run_planned(check, p, store, counters=counters and p.counters and ncu is not None)
    return plan, ncu


def run_planned(check: Check, p: StudyPlan, store: Path, *, counters: bool) -> StepOutcome:
    """`dlperf run` of one planned study into `store` (a new run), then the reports of the run it stored."""
    where = check.out / "runs" / p.name
    before = run_ids(store)
    cmd = check.dlperf("run", p.study_arg, "--quick", *(a for d in p.devices for a in ("--device", d)), "--new",
                       "--db", check.rel(store), *(["--counters"] if counters else []))
    o = check.step(f"study:{p.name}", cmd, TIMEOUTS_S.get(f"study:{p.name}", STUDY_TIMEOUT_S), where / "run.log",
                   stdout=where / "run.txt")
    new = sorted(run_ids(store) - before)
    if not new:
        o.fail_with("no run was stored")
    for run_id in new:
        reports(check, p.name, run_id, store, where, o)
    return o


def reports(check: Check, name: str, run_id: str, store: Path, where: Path, study: StepOutcome) -> None:
    """`dlperf show`, `report` as text and Markdown, and `export --format json` of one run; the export's
    summary goes into the study step's findings (cases that errored, timed out or crashed fail it)."""
    db, t, logs = check.rel(store), TIMEOUTS_S["report"], where / "logs"
    check.step(f"report:{name}:show", check.dlperf("show", run_id, "--db", db), t, logs / "show.log",
               stdout=where / "show.txt")
    plots = check.rel(where / "plots")
    check.step(f"report:{name}:text", check.dlperf("report", run_id, "--db", db, "--plot-dir", plots), t,
               logs / "report.log", stdout=where / "report.txt")
    check.step(f"report:{name}:markdown", check.dlperf("report", run_id, "--db", db, "--plot-dir", plots,
                                                       "--format", "markdown", "-o", check.rel(where / "report.md")),
               t, logs / "report-md.log")
    export_findings(check, f"report:{name}:export", run_id, db, where / "results.json", t, logs / "export.log",
                    study)


def export_findings(check: Check, step: str, run_id: str, db: str, export: Path, timeout_s: float, log: Path,
                    into: StepOutcome) -> None:
    """`dlperf export --format json` of one run as the step `step`; its summary goes into the findings of the
    step `into` (cases that errored, timed out or crashed fail it)."""
    e = check.step(step, check.dlperf("export", run_id, "--db", db, "--format", "json", "-o", check.rel(export)),
                   timeout_s, log)
    if e.failed or not export.exists():
        return
    lines, n_failed = run_summary(json.loads(export.read_text(encoding="utf-8")))
    into.details += lines
    if n_failed:
        into.fail_with(f"{n_failed} cases ended in error, timeout or crashed")


def parse_args(argv: list[str], steps: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--step", action="append", choices=steps,
                    help="run only this step (repeatable; default: install, tests, studies: everything)")
    ap.add_argument("--part", action="append", default=[], metavar="NAME",
                    choices=[p.name.split(":")[1] for p in QUICK if p.name != "quick:install"],
                    help="only this part of the quick step (repeatable), e.g. to rerun what failed; the quick "
                         "store then keeps earlier runs")
    ap.add_argument("--study", action="append", default=[], metavar="NAME",
                    help="only this study in the studies step (repeatable); the store then keeps earlier runs")
    ap.add_argument("--python", help="use this interpreter (the node's, with torch, JAX, CuPy) instead of the venv")
    ap.add_argument("--wheels", metavar="DIR", help="with --python: install this kit (`make gpu-kit`) into a "
                                                    "temporary folder with --no-index --no-deps and use it")
    ap.add_argument("--venv", default=".venv", help="the Makefile's venv (default: .venv)")
    ap.add_argument("--out", default="results/evidence", help="evidence root; the device kind is added")
    ap.add_argument("--nvidia-smi", default=shutil.which("nvidia-smi"), help="nvidia-smi's path (default: PATH)")
    ap.add_argument("--timeout", action="append", default=[], metavar="STEP=S",
                    help=f"a step's time-out in seconds, e.g. study:ops=600 (defaults: {TIMEOUTS_S})")
    ap.add_argument("--no-counters", action="store_true", help="no ncu counters even where ncu exists")
    ap.add_argument("--dry-run", action="store_true", help="print the steps' parts and time-outs; run nothing")
    ap.add_argument("--commit", help="the commit of this tree where it is no git checkout (a copied tree)")
    ap.add_argument("--plan-json", metavar="DIR", help=argparse.SUPPRESS)  # internal: print the plan (needs dlperf)
    return ap.parse_args(argv)


def dry_run(steps: list[str], groups: list[list[str]], *, wheels: bool, ncu: bool) -> str:
    """The plan of `steps` as lines: each part with its time-out, and each step's total against the budget."""
    facts_s = ", ".join(f"{k} {v:g} s" for k, v in FACTS_S.items() if ncu or k != "facts:ncu")
    lines = [f"facts (every invocation, first): {facts_s}"]
    for step in steps:
        if step == "quick":
            parts = quick_parts(wheels=wheels, ncu=ncu)
            # the plan's figure, with the time-outs as given on the command line
            total = quick_budget_s(parts, ncu) + sum(TIMEOUTS_S[p.name] - p.timeout_s for p in parts) + sum(
                TIMEOUTS_S[k] - v for k, v in FACTS_S.items() if ncu or k != "facts:ncu")
            lines.append(f"quick: {total:g} s at most of {STEP_BUDGET_S:g} s"
                         + (" (OVER: shorten a time-out)" if total > STEP_BUDGET_S else ""))
            lines += [f"  {p.name}: {TIMEOUTS_S[p.name]:g} s"
                      + (f" (+ export {QUICK_EXPORT_S:g} s)" if p.study else "") + f": {p.what}" for p in parts]
        elif step.startswith("studies-"):
            names = groups[int(step.split("-")[1]) - 1]
            total = sum(study_budget_s(n) for n in names) + facts_budget_s(ncu) + PLAN_TIMEOUT_S
            lines.append(f"{step}: {total:g} s at most of {STEP_BUDGET_S:g} s")
            lines.append(f"  studies:plan: {PLAN_TIMEOUT_S:g} s")
            lines += [f"  study:{n}: {STUDY_TIMEOUTS_S.get(n, STUDY_TIMEOUT_S):g} s (+ 4 reports "
                      f"{REPORT_TIMEOUT_S:g} s each)" for n in names]
        else:
            lines.append(f"{step}: {TIMEOUTS_S.get(step, 0):g} s" if step != "studies"
                         else "studies: every study, no budget (the studies-N steps cut it into parts)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    groups = study_groups(cuda_studies())
    args = parse_args(sys.argv[1:] if argv is None else argv, step_names(groups))
    if args.plan_json:
        from dlperf.profiling.ncu import find_ncu as dlperf_find_ncu

        plans = plan_studies(Path(args.plan_json).resolve())
        print(json.dumps({"plans": [p.as_dict() for p in plans], "ncu": dlperf_find_ncu()}, indent=2))
        return 0
    for item in args.timeout:
        name, _, seconds = item.partition("=")
        try:
            if not (name in TIMEOUTS_S or name.startswith("study:")) or float(seconds) <= 0:
                raise ValueError(name)
            TIMEOUTS_S[name] = float(seconds)
        except ValueError:
            print(f"gpu-check: error: --timeout {item}: expected STEP=SECONDS, STEP one of "
                  f"{', '.join(TIMEOUTS_S)} or study:NAME", file=sys.stderr)
            return 2
    wheels = Path(args.wheels).resolve() if args.wheels else None
    if wheels and (not args.python or not wheels.is_dir()):
        print(f"gpu-check: error: --wheels {args.wheels}: " + ("needs --python (the node's interpreter)"
              if not args.python else "no such folder (make gpu-kit writes gpu-kit/cpXY)"), file=sys.stderr)
        return 2
    gpus, why = detect_gpus(args.nvidia_smi)
    if not gpus:
        print(f"gpu-check: no NVIDIA GPU on this machine ({why}); no evidence written", file=sys.stderr)
        return 2
    steps = args.step or (["quick"] if args.part else ["install", "tests", "studies"])
    if args.part and "quick" not in steps:
        print("gpu-check: error: --part picks parts of the quick step: add --step quick", file=sys.stderr)
        return 2
    ncu = None if args.no_counters else find_ncu()
    if args.dry_run:
        print(dry_run(steps, groups, wheels=wheels is not None, ncu=ncu is not None))
        return 0
    gpu_name = gpus[0].split(",")[0].strip()
    out = (ROOT / args.out / device_kind(gpu_name)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    if args.commit and commit.startswith("unknown"):
        commit = f"{args.commit} (given with --commit: no git checkout here)"
    kit_dir = Path(tempfile.mkdtemp(prefix="dlperf-kit-")) if wheels else None
    path = [str(ROOT / "src"), *([str(kit_dir)] if kit_dir else []), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, COLUMNS="200", PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(p for p in path if p))
    check = Check(out, args.python or str(Path(args.venv) / "bin" / "python"), commit, env)
    print(f"gpu-check: {gpu_name} -> {check.rel(out)}; steps: {', '.join(steps)}", flush=True)
    state_file = out / "steps.json"
    state = load_state(state_file.read_text(encoding="utf-8") if state_file.exists() else None)
    meta = {"gpu_name": gpu_name, "gpus": gpus, "kind": out.name, "date_utc": now_utc(), "commit": check.commit,
            "invocation": shlex.join([Path(sys.executable).name, check.rel(Path(__file__)), *sys.argv[1:]]),
            "ncu": ncu, "env_note": ENV_NOTE + (", the kit's folder after src/" if wheels else "")}
    plan = [StudyPlan(**p) for p in state["plan"]]

    def save() -> None:
        for o in check.outcomes:
            state["steps"][o.name] = o.as_dict()
        state.update(meta=meta, plan=[p.as_dict() for p in plan] or state["plan"])
        state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) + ["README.md"]
        outcomes = [StepOutcome.from_dict(d) for d in state["steps"].values()]
        (out / "README.md").write_text(render_readme(meta, outcomes, plan, sorted(set(files))), encoding="utf-8")

    check.saver = save
    try:
        if wheels and kit_dir:
            install_kit(check, wheels, kit_dir)
        elif "install" in steps and args.python:
            check.record(StepOutcome("install", "(none: --python given)", now_utc(), 0.0, None, check.commit,
                                     skipped=True, note=f"used {args.python} as it is"))
        elif "install" in steps:
            check.step("install", ["make", "--no-print-directory", "install-gpu", f"VENV={args.venv}",
                                   f"PYTHON={sys.executable}"], TIMEOUTS_S["install"], out / "logs" / "install.log")
        absent = guarded(check, "facts", facts, ncu, args.nvidia_smi, TIMEOUTS_S) or []
        if "quick" in steps:
            guarded(check, "quick", quick, ncu, absent, args.part)
        if "tests" in steps:
            guarded(check, "tests", tests, absent)
        selected = list(args.study) + [n for s in steps if s.startswith("studies-")
                                       for n in groups[int(s.split("-")[1]) - 1]]
        if "studies" in steps or selected:
            plan[:], found_ncu = guarded(check, "studies", studies, selected, ncu is not None) or ([], None)
            meta["ncu"] = found_ncu or meta["ncu"]
            if not selected:  # a fresh store: the earlier runs and their reports are gone
                state["steps"] = {k: v for k, v in state["steps"].items() if not k.startswith(("study:", "report:"))}
        save()
    finally:
        if kit_dir:
            shutil.rmtree(kit_dir, ignore_errors=True)
    failed = [o.name for o in check.outcomes if o.failed]
    print(f"gpu-check: wrote {check.rel(out / 'README.md')}: "
          + (f"{len(failed)} of {len(check.outcomes)} steps failed: {', '.join(failed)}" if failed
             else f"all {len(check.outcomes)} steps passed"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
