"""How busy each device was over the whole profile, steps or not, from the raw XPlane events.

Contract: `device_utilization(paths)` reads only the device planes (GPU and TPU) of a session's
host files: a device's busy time is the union of its events' time (every stream's kernels and
copies on a GPU; the "XLA Ops" line on a TPU, whose other lines are modules, waits and async
copies that overlap the ops), over the profile's span as the profiler recorded it (the "Task
Environment" plane's start and stop times), else the span of the devices' events. None where
there are no device planes. Raises ProfileError on a file that is not a readable profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from tui_prof.model import DeviceBusy, DeviceUtilization
from tui_prof.profiles.xplane.xspace import XSpaceFile, host_name, read_plane

TASK_ENVIRONMENT = "Task Environment"
TPU_OPS_LINE = "XLA Ops"


def union_ps(start: np.ndarray, end: np.ndarray) -> int:
    """Total time covered by the intervals [start, end), overlaps counted once."""
    if not len(start):
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return int((e[last] - s[first]).sum())


def _span_ns(space: XSpaceFile) -> tuple[int, int] | None:
    plane = next((p for p in space.planes if p.name == TASK_ENVIRONMENT), None)
    if plane is None:
        return None
    stats = space.metadata(plane).stats
    try:
        start, stop = int(stats["profile_start_time"]), int(stats["profile_stop_time"])
    except (KeyError, TypeError, ValueError):
        return None
    return (start, stop) if stop > start else None


def device_utilization(
    paths: Sequence[Path], tick: Callable[[int], None] | None = None
) -> DeviceUtilization | None:
    """Busy share of every device of a session (see the module's contract)."""
    devices: list[tuple[str, int, int, int]] = []  # (name, busy ps, first ps, last ps)
    spans: list[tuple[int, int]] = []
    for path in paths:
        with XSpaceFile(path) as space:
            prefix = f"{host_name(Path(path), space)}" if len(paths) > 1 else ""
            span = _span_ns(space)
            if span:
                spans.append((span[0] * 1000, span[1] * 1000))
            for ref in space.planes:
                if not (ref.device and ref.device[0] in ("GPU", "TPU")):
                    continue
                pe = read_plane(space, ref, skip_derived=True, tick=tick)
                lines = pe.lines
                if ref.device[0] == "TPU" and any(le.name == TPU_OPS_LINE for le in lines):
                    lines = [le for le in lines if le.name == TPU_OPS_LINE]
                start = np.concatenate([le.start_ps for le in lines] or [np.zeros(0, np.int64)])
                end = np.concatenate([le.end_ps for le in lines] or [np.zeros(0, np.int64)])
                first = int(start.min()) if len(start) else 0
                last = int(end.max()) if len(end) else 0
                devices.append((prefix + ref.name, union_ps(start, end), first, last))
    if not devices:
        return None
    if spans:
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
    else:
        active = [d for d in devices if d[3] > d[2]]
        lo = min((d[2] for d in active), default=0)
        hi = max((d[3] for d in active), default=0)
    if hi <= lo:
        return None
    total = hi - lo
    busy = tuple(DeviceBusy(name, min(100.0, 100.0 * ps / total)) for name, ps, _, _ in devices)
    return DeviceUtilization(
        profile_ms=total / 1e9,
        busy_percent=sum(d.busy_percent for d in busy) / len(busy),
        devices=busy,
    )
