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
