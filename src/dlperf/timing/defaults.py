"""The one set of timing defaults: a case's settings (`RunSettings`) and `measure()` both read them here.

Plain constants importing nothing, in the lowest layer, so that `core.settings` above it and the timer
share them without an import circle.
"""

from __future__ import annotations

#: Untimed calls after the first call, before sampling.
WARMUP = 2
#: Sampling goes on at least this long (seconds), CI or not.
MIN_RUN_TIME_S = 0.2
#: The timer's budget (seconds): sampling stops here even if the CI is still wide (`measure(max_time_s=...)`).
BUDGET_S = 5.0
#: The adaptive stop: the 95% CI of the median narrower than this fraction of the median.
TARGET_REL_CI = 0.02
#: Per-call mode (`measure(per_call=True)`): the fewest samples (single calls) before the usual stop rules apply.
#: 100 gives p50 and p90 their distribution-free 95% intervals (p90's needs >= 36 calls) with ~6 calls beyond p90
#: to see the tail; p99's interval needs >= 368 calls, so it comes with longer runs (a study's `steps`, a larger
#: budget) and is None below that, while the max is always reported.
PER_CALL_MIN_SAMPLES = 100
