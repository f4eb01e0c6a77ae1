"""Compare two runs case by case: ratio of medians and a Mann-Whitney U test on the raw samples."""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.core.result import CaseResult
from dlperf.timing import Measurement

ALPHA = 0.05
#: Fewer samples than this on either side cannot show a difference at ALPHA.
MIN_SAMPLES = 4


@dataclass
class CaseComparison:
    case_key: str
    repetition: int
    median_a_s: float | None
    median_b_s: float | None
    ratio: float | None  # median_b / median_a: < 1 means B is faster
    p_value: float | None
    verdict: str  # faster | slower | within noise | too few samples | not comparable (...)


def compare_measurements(a: Measurement, b: Measurement) -> tuple[float, float | None, str]:
    """(ratio B/A of medians, two-sided Mann-Whitney p, verdict) on per-call sample times."""
    ratio = b.median_s / a.median_s
    if a.n_samples < MIN_SAMPLES or b.n_samples < MIN_SAMPLES:
        return ratio, None, "too few samples"
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(a.times_s, b.times_s, alternative="two-sided").pvalue)
    if p >= ALPHA:
        return ratio, p, "within noise"
    return ratio, p, "faster" if ratio < 1 else "slower"


def compare_runs(results_a: list[CaseResult], results_b: list[CaseResult]) -> list[CaseComparison]:
    """Match results by (case key, repetition); cases present in only one run are listed as such."""
    index_a = {(r.case_key, r.repetition): r for r in results_a}
    index_b = {(r.case_key, r.repetition): r for r in results_b}
    out = []
    for key in sorted(set(index_a) | set(index_b)):
        ra, rb = index_a.get(key), index_b.get(key)
        if ra is None or rb is None:
            out.append(CaseComparison(key[0], key[1], None, None, None, None,
                                      f"only in run {'A' if rb is None else 'B'}"))
            continue
        if not ra.ok or not rb.ok or ra.measurement is None or rb.measurement is None:
            out.append(CaseComparison(key[0], key[1], None, None, None, None,
                                      f"not comparable ({ra.status} vs {rb.status})"))
            continue
        ma, mb = Measurement.from_dict(ra.measurement), Measurement.from_dict(rb.measurement)
        ratio, p, verdict = compare_measurements(ma, mb)
        out.append(CaseComparison(key[0], key[1], ma.median_s, mb.median_s, ratio, p, verdict))
    return out

