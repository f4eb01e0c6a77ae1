"""The kernel's count of processes its OOM killer ended in this cgroup: how a SIGKILL is told to be an OOM."""

from __future__ import annotations

from pathlib import Path

CGROUP_MEMORY_EVENTS = Path("/sys/fs/cgroup/memory.events")


def oom_kill_count(events: Path = CGROUP_MEMORY_EVENTS) -> int | None:
    """The cgroup's `oom_kill` counter, or None where cgroup v2 memory events are not readable."""
    try:
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None
