"""dlperf: a deep-learning performance lab.

Importing dlperf imports no framework (and nothing heavy): frameworks are imported
only inside their adapters, when a case runs on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from dlperf.measure import Measurement, measure

__all__ = ["Measurement", "__version__", "measure"]


def __getattr__(name: str) -> Any:
    # Lazy so that `dlperf --help` does not pay for anything it does not use.
    if name in ("measure", "Measurement"):
        import dlperf.measure as m

        return getattr(m, name)
    raise AttributeError(f"module 'dlperf' has no attribute {name!r}")
