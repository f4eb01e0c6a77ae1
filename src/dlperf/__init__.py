"""dlperf: a deep-learning performance lab.

Importing dlperf imports no framework: frameworks are imported only inside their
adapters, when a case runs on them. `dlperf.measure` and `dlperf.Measurement`
(from `dlperf.timing`, pure standard library) are the timer's public face.
"""

from __future__ import annotations

__version__ = "0.1.0"

from dlperf.timing import Measurement, measure

__all__ = ["Measurement", "__version__", "measure"]
