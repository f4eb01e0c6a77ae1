"""TensorFlow's profiler over a few calls of a step, read from the XSpace (xplane.pb) it writes.

Host: the executor's op events ("scope/name:OpType") on TensorFlow's compute
threads, grouped by op type, with self time (nested op events subtracted).
GPU: the kernel events on the device plane's stream lines, by kernel name.
"""

from __future__ import annotations

import glob
import re
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from dlperf.profiling.kernels import KernelRow, make_rows

_OP = re.compile(r"^(?!.*::)[^\s]+:([A-Za-z0-9_]+)$")  # "scope/name:OpType", not "Class::Method"


def _self_times(events: list[tuple[int, int, str]]) -> list[tuple[str, int]]:
    """(key, self duration) of (offset, duration, key) events on one thread, nested children subtracted."""
    out: list[tuple[str, int]] = []
    stack: list[list[Any]] = []  # [end, key, self]
    for start, dur, key in sorted(events, key=lambda e: (e[0], -e[1])):
        while stack and stack[-1][0] <= start:
            _, k, s = stack.pop()
            out.append((k, s))
        if stack:
            stack[-1][2] -= dur
        stack.append([start + dur, key, dur])
    out.extend((k, s) for _, k, s in stack)
    return out


def parse_xspace(data: bytes) -> list[tuple[str, int, float, str]]:
    """(name, calls, self_time_s, where) from a serialised XSpace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(data)
    acc: dict[tuple[str, str], list[float]] = {}
    for plane in space.planes:
        gpu = plane.name.startswith("/device:GPU")
        if not gpu and plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if gpu and not line.name.lower().startswith("stream"):
                continue
            if not gpu and "Eigen" in line.name:
                continue  # thread-pool workers: their time is inside the op that launched them
            events = []
            for ev in line.events:
                name = plane.event_metadata[ev.metadata_id].name
                if gpu:
                    events.append((ev.offset_ps, ev.duration_ps, name))
                else:
                    m = _OP.match(name)
                    if m:
                        events.append((ev.offset_ps, ev.duration_ps, m.group(1)))
            for key, self_ps in _self_times(events):
                entry = acc.setdefault((key, "cuda" if gpu else "cpu"), [0, 0.0])
                entry[0] += 1
                entry[1] += self_ps / 1e12
    return [(k, int(v[0]), v[1], where) for (k, where), v in acc.items()]


def profile(fn: Callable[[], object], sync: Callable[[], None], device: str, steps: int = 3) -> list[KernelRow]:
    import tensorflow as tf

    logdir = tempfile.mkdtemp(prefix="dlperf-tfprof-")
    try:
        sync()
        tf.profiler.experimental.start(logdir)
        try:
            for _ in range(steps):
                fn()
            sync()
        finally:
            tf.profiler.experimental.stop()
        files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError("TensorFlow's profiler wrote no xplane.pb")
        raw: list[tuple[str, int, float, str]] = []
        for path in files:
            with open(path, "rb") as fh:
                raw.extend(parse_xspace(fh.read()))
        return make_rows(raw, steps)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
