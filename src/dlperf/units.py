"""The one place that writes and reads units: time, energy, bytes, rates and percentages.

Every table and line dlperf prints formats its figures through these functions, so one figure is
spelled one way everywhere. Imports nothing of dlperf (any layer may use it) and nothing heavy at
module level (pydantic is imported only when a size is parsed), so `dlperf --help` stays fast.

A value that is not there prints as `MISSING`; a catalog figure nobody published prints as
`UNKNOWN`; where a text can say why a figure is missing it says so instead (`NOT_MEASURED`).
"""

from __future__ import annotations

import math
import re
from typing import Any

#: How every table spells a value that is not there.
MISSING = "-"
#: How the hardware tables spell a figure that is unknown (the catalog has none, or none could be derived).
UNKNOWN = "?"
#: A memory or energy figure that no meter measured (the cell says why it is empty).
NOT_MEASURED = "not measured"

#: Bytes per binary mebibyte and gibibyte, and per decimal gigabyte.
MIB_BYTES = 2**20
GIB_BYTES = 2**30
GB_BYTES = 10**9


# -- time and energy -------------------------------------------------------------------------------------------


def format_time(t_s: float | None) -> str:
    """Human time with a unit, 3 significant digits: `1.23 ms`, `850 ns`; MISSING for None or NaN."""
    if t_s is None or (isinstance(t_s, float) and math.isnan(t_s)):
        return MISSING
    a = abs(t_s)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if a >= scale:
            return f"{t_s / scale:.3g} {unit}"
    return f"{t_s / 1e-9:.3g} ns"


def format_energy(e_j: float | None) -> str:
    """Human energy with a scaled unit, 3 significant digits: `3.2 J`, `41 mJ`, `7 uJ`; MISSING for None."""
    if e_j is None:
        return MISSING
    if abs(e_j) >= 1:
        return f"{e_j:.3g} J"
    if abs(e_j) >= 1e-3:
        return f"{e_j * 1e3:.3g} mJ"
    return f"{e_j * 1e6:.3g} uJ"


def format_joules(e_j: float | None, *, estimate: bool = False) -> str:
    """Energy always in joules, 3 significant digits: `0.0123 J`; an estimate reads `~0.0123 J est.`."""
    if e_j is None:
        return MISSING
    return f"~{e_j:.3g} J est." if estimate else f"{e_j:.3g} J"


# -- plain numbers and rates ------------------------------------------------------------------------------------


def format_number(x: float | None, spec: str = ".3g", *, scale: float = 1.0, missing: str = MISSING) -> str:
    """`x / scale` in the format spec `spec` (`".3g"`, `",.2f"`, ...), or `missing` for None.

    E.g. GFLOP/s from FLOP/s: `format_number(flops_per_s, ".3g", scale=1e9)`."""
    if x is None:
        return missing
    return format(x if scale == 1 else x / scale, spec)


def format_rate(x: float | None, scale: float = 1.0) -> str:
    """`x / scale` in 3 significant digits with an SI suffix: `5.81M`, `156`, `0.0121`; MISSING for None."""
    if x is None:
        return MISSING
    v = x / scale
    for suffix, s in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= s:
            return f"{v / s:.3g}{suffix}"
    return f"{v:.3g}"


def format_figure(v: Any, spec: str = ",.4g") -> str:
    """A catalog figure: a number in `spec` (default 4 significant digits with thousands commas), text as it
    is, UNKNOWN for None or the catalog's `"unknown"`."""
    if v in (None, "unknown"):
        return UNKNOWN
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


# -- fractions ---------------------------------------------------------------------------------------------------


def format_pct(fraction: float | None, spec: str = ".0f", *, missing: str = MISSING) -> str:
    """A fraction as a percentage: `format_pct(0.123, ".1f")` is `12.3%`; `spec="+.0f"` signs it (`+12%`).
    The same string as Python's `f"{fraction:.1%}"` for the same precision."""
    if fraction is None:
        return missing
    return f"{100 * fraction:{spec}}%"


def format_iqr(iqr_rel: float | None, *, missing: str = MISSING) -> str:
    """The spread of a timing: IQR over median as a percentage with one decimal, `4.2%`."""
    return format_pct(iqr_rel, ".1f", missing=missing)


# -- memory sizes ------------------------------------------------------------------------------------------------


def format_mib(n_bytes: float | None, *, missing: str = MISSING) -> str:
    """Bytes as whole binary mebibytes with thousands commas, named: `1,234 MiB`; `missing` for None.
    A caller that means "0 = not measured" passes `n_bytes or None`."""
    if n_bytes is None:
        return missing
    return f"{n_bytes / MIB_BYTES:,.0f} MiB"


def format_size(n_bytes: float) -> str:
    """Bytes in the largest binary unit they reach, three significant digits: `48 KiB`, `1.5 MiB`, `512 B`."""
    for unit, scale in (("GiB", GIB_BYTES), ("MiB", MIB_BYTES), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} B"


def format_gib(n_bytes: float | None, spec: str = ".1f", *, missing: str = MISSING) -> str:
    """Bytes as binary gibibytes, named: `15.5 GiB`."""
    if n_bytes is None:
        return missing
    return f"{n_bytes / GIB_BYTES:{spec}} GiB"


def format_gb(n_bytes: float | None, spec: str = ".2f", *, named: bool = True, missing: str = MISSING) -> str:
    """Bytes as decimal gigabytes (1e9, as vendors count memory): `2.35 GB`, or `2.35` with `named=False`
    (for a column whose header names the unit)."""
    if n_bytes is None:
        return missing
    text = f"{n_bytes / GB_BYTES:{spec}}"
    return f"{text} GB" if named else text


# -- parsing -----------------------------------------------------------------------------------------------------

#: The units a size on the command line may carry (case-insensitive), as pydantic's ByteSize spells them.
#: No unit and the one-letter units are binary: a plain number is MiB, `2g` is 2 GiB.
_SIZE_UNITS = {"": "MiB", "k": "KiB", "kb": "KB", "kib": "KiB", "m": "MiB", "mb": "MB", "mib": "MiB",
               "g": "GiB", "gb": "GB", "gib": "GiB", "t": "TiB", "tb": "TB", "tib": "TiB"}
_SIZE_RE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*")


def parse_size_mib(text: str) -> int:
    """A memory size as given on the command line, in whole MiB (rounded down): `2GiB` -> 2048,
    `512MiB` -> 512, `1.5GB` -> 1430, `300` -> 300 (a plain number is MiB).

    Raises ValueError with a one-line message for text that is not a size or is under 1 MiB."""
    from pydantic import ByteSize, TypeAdapter, ValidationError

    m = _SIZE_RE.fullmatch(str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a memory size (e.g. 2GiB, 512MiB, or MiB as a number)")
    try:
        size = TypeAdapter(ByteSize).validate_python(f"{m.group(1)}{_SIZE_UNITS[unit]}")
    except ValidationError:  # a number too large for a float
        raise ValueError(f"{text!r} is not a memory size (e.g. 2GiB, 512MiB, or MiB as a number)") from None
    mib = int(size.to("MiB"))
    if mib < 1:
        raise ValueError(f"{text!r} is less than 1 MiB")
    return mib
