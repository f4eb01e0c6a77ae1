"""compare: verdicts against a minimum effect (a significant 1% is no change, 30% is slower), repetitions pooled
per case, validity (contended or invalid never compared, noisy marked, unknown silent), the geometric mean and
the regressions a CI gate fails on."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from dlperf.analysis.compare import CaseComparison, compare_runs, one_process_a_side, regressions, summarize, verdict
from dlperf.analysis.drift import Drift
from dlperf.core.result import CaseResult, Metrics
from tests.factories import case


def per_call(scale: float, seed: int, n: int = 400, sigma: float = 0.05) -> list[float]:
    """Seeded synthetic per-call times around `scale` seconds (log-normal, as timings roughly are)."""
    return list(scale * np.random.default_rng(seed).lognormal(0.0, sigma, n))


def row(key: str, times: list[float] | None, rep: int = 0, status: str = "ok", validity: str | None = None,
        reason: str | None = None) -> CaseResult:
    metrics = Metrics(validity=validity, validity_reason=reason) if validity else Metrics()
    return case(key, times_s=times, rep=rep, status=status, metrics=metrics)


def one(a: list[CaseResult], b: list[CaseResult], **kw) -> CaseComparison:
    (c,) = compare_runs(a, b, **kw)
    return c


def test_verdict_thresholds_are_symmetric_on_the_log_scale():
    assert verdict(1.06, 1.2) == "slower" and verdict(1.0 / 1.2, 1.0 / 1.06) == "faster"
    assert verdict(0.96, 1.04) == "no change"
    assert verdict(1.02, 1.08) == "inconclusive"  # clear of 1, not clear of the 5% minimum effect
    assert verdict(0.9, 1.1) == "inconclusive"
    assert verdict(1.02, 1.08, min_effect=0.01) == "slower"
    assert verdict(None, None) == "too few samples"


def test_a_one_percent_shift_with_many_samples_is_significant_but_no_change():
    c = one([row("x", per_call(1e-3, 1, 2000))], [row("x", per_call(1.01e-3, 2, 2000))])
    assert c.p_value < 0.05  # the old rule would have called it slower
    assert c.ratio == pytest.approx(1.01, abs=0.005)
    assert c.verdict == "no change" and 1 / 1.05 <= c.ci_low < c.ratio < c.ci_high <= 1.05


def test_a_thirty_percent_shift_is_slower_and_the_reverse_is_faster():
    a, b = [row("x", per_call(1e-3, 1))], [row("x", per_call(1.3e-3, 2))]
    slower, faster = one(a, b), one(b, a)
    assert slower.verdict == "slower" and slower.ci_low > 1.05 and slower.ratio == pytest.approx(1.3, rel=0.02)
    assert faster.verdict == "faster" and faster.ratio == pytest.approx(1 / 1.3, rel=0.02)
    assert slower.label == "slower" and slower.method == "samples"


def test_same_distribution_is_no_change_and_few_samples_give_no_interval():
    assert one([row("x", per_call(1e-3, 1))], [row("x", per_call(1e-3, 2))]).verdict == "no change"
    few = one([row("x", [1.0, 1.1, 1.05])], [row("x", [1.3, 1.4, 1.35])])
    assert few.verdict == "too few samples" and few.ci_low is None and few.ratio == pytest.approx(1.3, rel=0.05)


def test_repetitions_are_pooled_into_one_comparison_per_case():
    a = [row("x", per_call(1e-3, s, 100), rep=s) for s in range(4)]
    b = [row("x", per_call(1.3e-3, 10 + s, 100), rep=s) for s in range(4)]
    c = one(a, b)
    assert (c.processes_a, c.processes_b, c.method, c.verdict) == (4, 4, "processes", "slower")
    two = one(a[:2], b[:2])
    assert (two.processes_a, two.method) == (2, "processes")  # the spread between two processes is measured
    assert one(a[:1], b[:1]).method == "samples"
    assert two.median_a_s == pytest.approx(float(np.median(per_call(1e-3, 0, 100) + per_call(1e-3, 1, 100))))


def test_contended_or_invalid_is_never_compared():
    a = [row("x", per_call(232e-6, 1))]
    b = [row("x", per_call(7.96e-3, 2), validity="contended", reason="load 3.1 on 2 cores")]
    c = one(a, b)
    assert c.verdict == "contended" and c.ratio is None and c.p_value is None
    assert c.label == "contended: not compared (B: load 3.1 on 2 cores)"
    assert c.median_b_s == pytest.approx(7.96e-3, rel=0.05)  # the figures are shown, not judged
    both = one([row("x", per_call(1e-3, 3), validity="invalid", reason="timer overhead 30%")], b)
    assert both.verdict == "invalid" and both.notes == ["A: timer overhead 30%", "B: load 3.1 on 2 cores"]
    assert regressions([c, both], 0.0) == []


def test_contended_processes_are_left_out_when_others_remain():
    a = [row("x", per_call(1e-3, s), rep=s) for s in range(2)]
    b = [row("x", per_call(1e-3, 5), rep=0), row("x", per_call(30e-3, 6), rep=1, validity="contended", reason="r")]
    c = one(a, b)
    assert c.verdict == "no change" and c.processes_b == 1
    assert c.notes == ["B: 1 of 2 processes left out (contended)"]


def test_noisy_is_compared_and_marked_unknown_validity_is_silent():
    noisy = one([row("x", per_call(1e-3, 1))], [row("x", per_call(1.3e-3, 2), validity="noisy", reason="bimodal")])
    assert noisy.verdict == "slower" and noisy.noisy and noisy.label == "slower (noisy B: bimodal)"
    assert noisy.validity_b == ["noisy"] and noisy.validity_a == [None]
    old = one([row("x", per_call(1e-3, 1))], [row("x", per_call(1.3e-3, 2))])  # validity None: stored before it
    assert not old.noisy and "valid" not in old.label and old.notes == []


def test_times_that_have_no_logarithm_are_invalid():
    c = one([row("x", [1e-3, 0.0, 1e-3, 1e-3, 1e-3])], [row("x", per_call(1e-3, 2))])
    assert c.verdict == "invalid" and c.ratio is None and c.notes == ["A: sample times not positive and finite"]


def test_gaps_and_failures():
    a = [row("x", per_call(1e-3, 1)), row("y", per_call(1e-3, 3)), row("only_a", per_call(1, 4))]
    b = [row("x", per_call(2e-3, 2)), row("y", None, status="oom"), row("only_b", per_call(1, 5))]
    out = {c.case_key: c for c in compare_runs(a, b)}
    assert out["x"].verdict == "slower" and abs(out["x"].ratio - 2) < 0.05
    assert out["y"].verdict == "not comparable" and out["y"].label == "not comparable (ok vs oom)"
    assert out["only_a"].label == "only in run A" and out["only_b"].label == "only in run B"


def test_geometric_mean_on_a_hand_computed_example():
    # B's samples are A's times c exactly, so every case's Hodges-Lehmann ratio is c (the pairwise differences
    # of log times are symmetric about log c) and the geometric mean is (1.3 * 0.8 * 1.0 * 1.25) ** (1/4).
    factors = {"a": 1.3, "b": 0.8, "c": 1.0, "d": 1.25}
    rows_a = [row(k, per_call(1e-3, i)) for i, k in enumerate(factors)]
    rows_b = [row(k, [f * t for t in per_call(1e-3, i)]) for i, (k, f) in enumerate(factors.items())]
    rows_b.append(row("e", per_call(1e-3, 9), validity="contended", reason="r"))
    rows_a.append(row("e", per_call(1e-3, 8)))
    out = compare_runs(rows_a, rows_b)
    assert [c.ratio for c in out[:4]] == pytest.approx(list(factors.values()), rel=1e-12)
    s = summarize(out)
    assert s.n_compared == 4 and s.geomean == pytest.approx(1.3 ** 0.25, rel=1e-12)
    assert s.counts == {"slower": 2, "faster": 1, "no change": 1, "contended": 1}
    assert s.ci_low <= s.geomean <= s.ci_high and 0.8 <= s.ci_low and s.ci_high <= 1.3
    assert summarize(out) == s  # the bootstrap is seeded
    assert summarize(out[:2]).ci_low is None and summarize(out[:2]).geomean == pytest.approx(math.sqrt(1.3 * 0.8))
    assert summarize(out[4:]).geomean is None
    # The machine's drift moves every case alike: the cases' spread does not show it, so it widens the interval.
    moved = summarize(out, Drift(1.02, 0.97, 1.04, 10, 10))
    assert moved.drift_widened and not s.drift_widened and moved.geomean == s.geomean
    assert moved.ci_low == pytest.approx(s.ci_low / 1.04) and moved.ci_high == pytest.approx(s.ci_high / 0.97)
    # Every case here had one process a side: their intervals hold one process's samples only.
    assert one_process_a_side(out) == out[:4] and all(c.method == "samples" for c in out[:4])


def test_regressions_need_the_whole_interval_beyond_the_threshold():
    def case(lo, hi, v="slower"):
        return CaseComparison("k", v, 1, 1, 1.0, 1.1, (lo * hi) ** 0.5, lo, hi, 0.01, "samples")

    clear, borderline = case(1.06, 1.10), case(1.04, 1.10, "inconclusive")
    assert regressions([clear, borderline], 5) == [clear]
    assert regressions([clear, borderline], 3) == [clear, borderline]
    assert regressions([clear], 6) == []  # 1.06 is not above 1.06
    assert regressions([case(1.06, 1.10, "contended")], 0) == []


def canaried(rows: list[CaseResult], canary_ms: float, seed: int) -> list[CaseResult]:
    """The rows with recorded canaries around each (seeded jitter of 1% around `canary_ms`), one per minute."""
    rng = np.random.default_rng(seed)
    times = canary_ms * 1e-3 * rng.lognormal(0.0, 0.01, len(rows) + 1)
    t0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp() + seed * 3600

    def canary(i: int) -> dict:
        return {"at": datetime.fromtimestamp(t0 + 60 * i, UTC).isoformat(), "time_s": float(times[i]),
                "memory_s": float(times[i]), "compute_s": 0.0, "kind": "test"}

    return [r.model_copy(update={"metrics": r.m.model_copy(update={"canary": {"before": canary(i),
                                                                               "after": canary(i + 1)}})})
            for i, r in enumerate(rows)]


def processes(scale: float, seed: int, n: int = 3) -> list[CaseResult]:
    return [row("k", per_call(scale * (1 + 0.01 * (i - 1)), seed + i, n=200, sigma=0.03), rep=i) for i in range(n)]


def test_a_change_the_machines_drift_explains_is_not_called_faster():
    a, b = processes(1e-3, 1), processes(0.75e-3, 10)  # B/A 0.75, as the A/A run on the noisy VM saw
    assert one(a, b).verdict == "faster"  # no canary: the processes alone call it faster
    # the canary says B's machine was 0.75x too: the same work took 3 ms in A and 2.25 ms in B
    c = one(canaried(a, 3.0, 1), canaried(b, 2.25, 2))
    assert c.verdict == "inconclusive" and any("drift" in n for n in c.notes)
    assert c.sample_ci_high < 1 / 1.05 and c.ci_high > 1 / 1.05  # widened past the threshold, not moved
    # the band: the canary's B/A interval (4 vs 4 times: from the smallest to the largest ratio), and 1
    assert 0.70 < c.drift_low < 0.75 < c.drift_high == 1.0
    assert c.ci_low == pytest.approx(c.sample_ci_low) and c.ci_high == pytest.approx(c.sample_ci_high / c.drift_low)


def test_a_real_change_beyond_the_drift_is_still_called_faster_and_a_steady_machine_changes_little():
    a, b = processes(1e-3, 1), processes(0.5e-3, 10)  # the code got 2x faster
    c = one(canaried(a, 3.0, 1), canaried(b, 2.25, 2))  # while the machine drifted by 0.75x
    assert c.verdict == "faster" and c.ci_high < 0.75
    # a steady machine (canary within 1%), 8 processes a side (9 canaries): the band stays narrow
    steady = one(canaried(processes(1e-3, 1, 8), 3.0, 1), canaried(processes(1e-3, 20, 8), 3.0, 2))
    assert steady.verdict == "no change" and 0.98 < steady.drift_low <= 1.0 <= steady.drift_high < 1.02


def test_runs_stored_before_the_canary_compare_as_before_with_a_note():
    from dlperf.analysis.drift import machine_drift

    a, b = processes(1e-3, 1), processes(0.75e-3, 10)
    why = machine_drift(a, canaried(b, 2.25, 2))
    assert isinstance(why, str) and why.startswith("no canary in run A")
    c = one(a, canaried(b, 2.25, 2))
    assert c.verdict == "faster" and c.ci_low == c.sample_ci_low and c.drift_low is None
    assert "A and B" in machine_drift(a, b)


def on_hosts(rows: list[CaseResult], hosts: list[str], speed: dict[str, float]) -> list[CaseResult]:
    """The rows with their canaries moved to `hosts` (one per row, the time scaled by that machine's speed), as a
    fleet stores them."""
    out = []
    for r, host in zip(rows, hosts, strict=True):
        c = r.m.canary
        moved = {side: c[side] | {"host": host, "time_s": c[side]["time_s"] * speed[host],
                                  "memory_s": c[side]["memory_s"] * speed[host]} for side in ("before", "after")}
        out.append(r.model_copy(update={"metrics": r.m.model_copy(update={"canary": moved})}))
    return out


def test_on_a_fleet_the_drift_is_each_machines_own_not_the_placement():
    """Two machines, one twice as slow, neither drifting: run A put most processes on the slow one, run B on the
    fast one. Pooled naively the canary would say B's machine was 0.5x; each machine over its own median says no
    drift. Machines the runs do not share give no drift, with the reason."""
    from dlperf.analysis.drift import machine_drift

    speed = {"slow": 2.0, "fast": 1.0}
    a = on_hosts(canaried(processes(1e-3, 1, 6), 3.0, 1), ["slow"] * 5 + ["fast"], speed)
    b = on_hosts(canaried(processes(1e-3, 20, 6), 3.0, 2), ["fast"] * 5 + ["slow"], speed)
    d = machine_drift(a, b)
    assert not isinstance(d, str), d
    assert d.low < 1.0 < d.high and 0.97 < d.ratio < 1.03 and d.high < 1.05 and d.low > 0.95
    apart = on_hosts(canaried(processes(1e-3, 20, 6), 3.0, 2), ["other"] * 6, {"other": 1.0})
    why = machine_drift(a, apart)
    assert isinstance(why, str) and "different machines" in why


def test_a_local_run_against_a_fleet_run_keeps_the_drift():
    """A local sweep's canaries name no machine; a fleet's do. Compared, they are pooled as before (the drift is
    kept), not dropped as if the runs shared no machine."""
    from dlperf.analysis.drift import machine_drift

    local = canaried(processes(1e-3, 1, 4), 3.0, 1)
    fleet = on_hosts(canaried(processes(1e-3, 20, 4), 3.3, 2), ["box"] * 4, {"box": 1.0})
    d = machine_drift(local, fleet)
    assert not isinstance(d, str), d
    assert 1.05 < d.ratio < 1.15  # the canary took 10% longer in B
