"""The hardware catalog: vendors' figures for 30+ devices (package data), study 004's own figures,
lookup by name, and this machine's devices mapped onto it.

Every figure is a number or the explicit string "unknown"; every figure has a
source (its own or the entry's default). Figures computed from published units
x clock are listed in `derived`. Every peak figure of the catalog is stated at
the vendor's rated boost clock (`peak_clock`, `peak_clock_mhz`), so that two
entries compare on one basis.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

Unknown = Literal["unknown"]
Num = float | Unknown

#: Numeric figures, with units in their names.
FIGURES = ("process_nm", "transistors_millions", "memory_gb", "memory_bw_gbs", "peak_fp32_tflops",
           "peak_fp16_tflops", "peak_int8_tops", "peak_clock_mhz", "tdp_w", "launch_year", "launch_price_usd")
TEXT = ("vendor", "kind", "architecture", "memory_type", "interface", "peak_clock")
#: Which clock an entry's peak figures assume: the vendor's rated boost (the catalog's one basis), base,
#: `measured` (this machine's CPU, `dlperf.hardware.clock_probe`), `derived` (this machine's CPU: the FMA loop's
#: rate at an assumed count of FMA units) or unknown (a figure published without it).
PeakClock = Literal["boost", "base", "measured", "derived", "unknown"]


class Device(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.+-]*$")
    name: str
    aliases: list[str] = []
    vendor: str
    kind: Literal["cpu", "gpu", "soc", "accelerator"]
    architecture: str
    process_nm: Num
    transistors_millions: Num
    memory_gb: Num
    memory_type: str
    memory_bw_gbs: Num
    peak_fp32_tflops: Num
    peak_fp16_tflops: Num
    peak_int8_tops: Num
    #: The clock every peak figure above assumes (`PeakClock`), and that clock in MHz.
    peak_clock: PeakClock
    peak_clock_mhz: Num
    tdp_w: Num
    interface: str
    launch_year: Num
    launch_price_usd: Num
    #: Physical cores of the whole package (CPUs only), to scale its peak to a VM's share.
    cores: int | None = Field(default=None, gt=0)
    derived: list[str] = []
    notes: str = ""
    sources: dict[str, str]
    #: True for an entry made here from this machine's own description (not a datasheet).
    detected: bool = False

    @model_validator(mode="after")
    def _sourced(self) -> Device:
        unknown_keys = set(self.sources) - {"default", *FIGURES, *TEXT}
        if unknown_keys:
            raise ValueError(f"{self.id}: sources for unknown fields {sorted(unknown_keys)}")
        if "default" not in self.sources:
            raise ValueError(f"{self.id}: needs a default source")
        if self.cores is not None and self.kind != "cpu":
            raise ValueError(f"{self.id}: cores is for CPUs only")
        bad = [d for d in self.derived if d not in FIGURES]
        if bad:
            raise ValueError(f"{self.id}: derived lists unknown fields {bad}")
        return self

    def core_share(self, visible_cores: int | None) -> float:
        """How many of this CPU package `visible_cores` are worth: 2/96 for a VM's slice, 2.0 for two
        sockets (1.0 when unknown or not a CPU)."""
        if self.kind != "cpu" or not self.cores or not visible_cores:
            return 1.0
        return visible_cores / self.cores

    def source(self, field: str) -> str:
        return self.sources.get(field, self.sources["default"])

    def value(self, field: str) -> float | None:
        v = getattr(self, field)
        return None if v == "unknown" else float(v)

    def best_peak_tflops(self) -> tuple[float | None, str]:
        """The FP32 peak, or the FP16 peak where no FP32 figure exists (said which)."""
        if self.value("peak_fp32_tflops") is not None:
            return self.value("peak_fp32_tflops"), "fp32"
        if self.value("peak_fp16_tflops") is not None:
            return self.value("peak_fp16_tflops"), "fp16"
        return None, "unknown"

    def efficiency(self) -> dict[str, float | None]:
        """Datasheet ratios: GFLOP/s per watt and per dollar (FP32), None where a figure is unknown."""
        fp32, tdp, price = self.value("peak_fp32_tflops"), self.value("tdp_w"), self.value("launch_price_usd")
        return {
            "gflops_per_w": fp32 * 1e3 / tdp if fp32 is not None and tdp else None,
            "gflops_per_usd": fp32 * 1e3 / price if fp32 is not None and price else None,
        }


class Study004Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    memory_gb: float | None = None
    memory_type: str | None = None
    process_nm: float | None = None
    tdp_w: float | None = None
    peak_flops_gflops: float | None = None
    transistors_millions: float | None = None
    interface: str | None = None
    launch_price_usd: float | None = None


#: libyaml's safe loader where PyYAML was built with it (the same documents, about 10x faster: the catalog is read
#: in every worker), else the pure-Python one.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(name: str) -> Any:
    return yaml.load(resources.files("dlperf.hardware").joinpath("data", name).read_text(), Loader=_SAFE_LOADER)


@functools.cache
def catalog() -> tuple[Device, ...]:
    devices = tuple(Device.model_validate(d) for d in _load("catalog.yaml"))
    ids = [d.id for d in devices]
    if len(set(ids)) != len(ids):
        raise ValueError("catalog.yaml: duplicate ids")
    return devices


@functools.cache
def study004() -> tuple[Study004Entry, ...]:
    return tuple(Study004Entry.model_validate(d) for d in _load("study004.yaml"))


def _norm(text: str) -> str:
    """Lower case, punctuation to spaces, trademark marks dropped ("Intel(R) Xeon(R)" -> "intel xeon")."""
    text = re.sub(r"\((r|tm|c)\)", " ", text.lower())
    return re.sub(r"[^a-z0-9+]+", " ", text).strip()


def find(name: str) -> Device:
    """The device whose id, name or alias matches `name` (case and punctuation ignored); KeyError lists close ones."""
    key = _norm(name)
    for d in catalog():
        names = {_norm(d.id), _norm(d.name), *(_norm(a) for a in d.aliases)}
        if key in names or key.replace(" ", "") in {n.replace(" ", "") for n in names}:
            return d
    close = [d.id for d in catalog() if key and (key in _norm(d.name) or key in _norm(d.id))]
    hint = f" (did you mean: {', '.join(close[:6])}?)" if close else " (see `dlperf hw list`)"
    raise KeyError(f"no device {name!r} in the catalog{hint}")


def match(description: str) -> Device | None:
    """The catalog entry a detected device's own name (e.g. NVML's, /proc/cpuinfo's) refers to, if any."""
    text = _norm(description)
    best: tuple[int, Device] | None = None
    for d in catalog():
        for alias in (d.name, *d.aliases):
            a = _norm(alias)
            if a and re.search(rf"(^| ){re.escape(a)}( |$)", text) and (best is None or len(a) > best[0]):
                best = (len(a), d)
    return best[1] if best else None


def diff_study() -> list[dict[str, Any]]:
    """Every figure of study 004 beside the catalog's: agree (within 5%), disagree, or cannot be checked."""
    out = []
    for entry in study004():
        dev = find(entry.id)
        for field, theirs in entry.model_dump(exclude={"id"}).items():
            if theirs is None:
                continue
            if field == "peak_flops_gflops":
                peak, which = dev.best_peak_tflops()
                ours, label = (peak * 1e3 if peak is not None else None), f"peak {which} GFLOP/s"
                src = dev.source("peak_fp32_tflops" if which == "fp32" else "peak_fp16_tflops")
            else:
                ours, label, src = getattr(dev, field), field, dev.source(field)
            out.append({"device": dev.id, "name": dev.name, "figure": label, "study": theirs, "vendor": ours,
                        "verdict": _verdict(theirs, ours), "source": src})
    return out


def _verdict(theirs: Any, ours: Any) -> str:
    if ours in (None, "unknown"):
        return "cannot check (vendor figure unknown)"
    if isinstance(theirs, str) or isinstance(ours, str):
        return "agree" if _norm(str(ours)).startswith(_norm(str(theirs))) else "disagree"
    ours, theirs = float(ours), float(theirs)
    return "agree" if abs(theirs - ours) <= 0.05 * max(abs(ours), 1e-12) else "disagree"
