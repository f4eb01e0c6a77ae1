"""Inputs of a user's model: `--input NAME:DTYPE[DIMS]` (repeatable) or `--inputs path.py:FN`.

DIMS are integers, `B` (the batch) and `S` (the sequence, `--seq`), e.g. `x:float32[B,3,224,224]`,
`ids:int64[B,S]`. Floating inputs are drawn from a standard normal, integers uniformly from [0, 100) (or from
[0, N) with a `<N` suffix: `ids:int64[B,S]<50257`), booleans are all true, each from a generator seeded 0, so
every path and every run of a case sees the same inputs. Several --input are passed positionally, in order.
`--inputs path.py:FN` calls FN(batch) in the worker and passes what it returns (a tensor: one argument; a
tuple or list: positional; a dict: keywords).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dlperf.sources.base import SourceError

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool")
_SPEC = re.compile(r"(?P<name>[A-Za-z_]\w*):(?P<dtype>\w+)\[(?P<dims>[^\]]*)\](?:<(?P<high>\d+))?")
#: Integers are drawn from [0, this) unless the spec says `<N`.
INT_HIGH = 100


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: str
    dims: tuple[int | str, ...]
    high: int = INT_HIGH

    def shape(self, batch: int, seq: int | None) -> tuple[int, ...]:
        out = []
        for d in self.dims:
            if d == "S" and seq is None:
                raise SourceError(f"input {self.name} has a dimension S: give --seq N")
            out.append(batch if d == "B" else seq if d == "S" else d)
        return tuple(int(x) for x in out)  # type: ignore[arg-type]


def parse_input(text: str) -> InputSpec:
    """`NAME:DTYPE[DIMS]` -> InputSpec (SourceError naming what is wrong)."""
    m = _SPEC.fullmatch(text.strip())
    if m is None:
        raise SourceError(f"--input {text!r}: expected NAME:DTYPE[DIMS], e.g. x:float32[B,3,224,224] or "
                          "ids:int64[B,S]")
    if m["dtype"] not in DTYPES:
        raise SourceError(f"--input {text!r}: unknown dtype {m['dtype']!r} (known: {', '.join(DTYPES)})")
    dims: list[int | str] = []
    parts = [p.strip() for p in m["dims"].split(",")] if m["dims"].strip() else []  # `[]`: a scalar
    for part in parts:
        if not part:  # `[B,,8]` is a typo, not [B,8]: the run would store a spelling it did not measure
            raise SourceError(f"--input {text!r}: an empty dimension (DIMS are integers, B or S, separated by "
                              "commas)")
        if part in ("B", "S"):
            dims.append(part)
        elif part.isdigit() and int(part) > 0:
            dims.append(int(part))
        else:
            raise SourceError(f"--input {text!r}: a dimension is a positive integer, B or S, not {part!r}")
    if m["high"] is not None and int(m["high"]) < 1:
        raise SourceError(f"--input {text!r}: <N needs N >= 1")
    return InputSpec(m["name"], m["dtype"], tuple(dims), int(m["high"]) if m["high"] else INT_HIGH)


def make(torch: Any, specs: list[InputSpec], batch: int, seq: int | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The seeded tensors of `specs` at this batch and sequence length, as positional arguments."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for s in specs:
        dtype = getattr(torch, s.dtype)
        shape = s.shape(batch, seq)
        if s.dtype == "bool":
            out.append(torch.ones(shape, dtype=torch.bool))
        elif dtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(dtype))
        else:
            out.append(torch.randint(0, s.high, shape, generator=gen).to(dtype))
    return tuple(out), {}
