"""How busy each device was over the whole profile, steps or not, from the raw XPlane events.

Contract: `device_utilization(paths)` reads only the device planes (GPU and TPU) of a session's
host files. On a GPU, a device's busy time is the union of its events' time (every stream's
kernels and copies) over the profile's span as the profiler recorded it (the "Task Environment"
plane's start and stop times), else the span of the devices' events. On a TPU it is the
converter's duty cycle (xprof's DutyCycleTracker, xplane_to_op_stats.cc): a core is active
during its "XLA Ops" (and "Sparse Core Ops") events but the off-duty ones (infeed, outfeed, host
send/recv, a megacore fusion's own span: IsOffDutyOp), over its own span of XLA programs and ops
("XLA Modules" included); cores of one chip (the plane's `core_details`) are one union; the
session's figure is the chips' active time over their spans, summed. None where there are no
device planes. Raises ProfileError on a file that is not a readable profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tui_prof.device_use import DeviceBusy, DeviceUtilization, host_device
from tui_prof.profiles.xplane.line_events import LineEvents
from tui_prof.profiles.xplane.xspace import (
    PlaneRef,
    XSpaceFile,
    host_name,
    read_plane,
    scan_fields,
)

TASK_ENVIRONMENT = "Task Environment"
TPU_OPS_LINE = "XLA Ops"
# xprof's duty cycle: active lines, lines that only widen the span, off-duty HLO categories
# (tsl's xplane_schema.h line names; IsOffDutyOp in xla/tsl/profiler/utils/xla_op_utils.h).
DUTY_ACTIVE_LINES = (TPU_OPS_LINE, "Sparse Core Ops")
DUTY_SPAN_LINES = ("XLA Modules", "Sparse Core Modules")
OFF_DUTY = frozenset(
    {
        "infeed",
        "outfeed",
        "host send",
        "host send-done",
        "host recv",
        "host recv-done",
        "megacore fusion",
    }
)
_LOCAL_CHIP_ID = 4  # CoreDetails.local_chip_id (xprof's op_stats.proto)


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


@dataclass
class _Duty:
    """One TPU core or chip: its active spans and its span (picoseconds)."""

    starts: list[np.ndarray] = field(default_factory=list)
    ends: list[np.ndarray] = field(default_factory=list)
    first: int | None = None
    last: int | None = None

    def widen(self, start: np.ndarray, end: np.ndarray) -> None:
        if len(start):
            lo, hi = int(start.min()), int(end.max())
            self.first = lo if self.first is None else min(self.first, lo)
            self.last = hi if self.last is None else max(self.last, hi)

    def merge(self, other: _Duty) -> None:
        self.starts += other.starts
        self.ends += other.ends
        if other.first is not None and other.last is not None:
            self.widen(np.array([other.first]), np.array([other.last]))

    @property
    def span_ps(self) -> int:
        return 0 if self.first is None or self.last is None else self.last - self.first

    @property
    def active_ps(self) -> int:
        if not self.starts:
            return 0
        return union_ps(np.concatenate(self.starts), np.concatenate(self.ends))


def _chip_id(stats: dict[str, Any]) -> int | None:
    raw = stats.get("core_details")
    if not isinstance(raw, bytes):
        return None
    try:
        for number, wire, value, _b, _r in scan_fields(raw, 0, len(raw)):
            if number == _LOCAL_CHIP_ID and wire == 0:
                return value
    except ValueError:
        return None
    return 0  # proto3 leaves a zero out


def _tpu_duty(space: XSpaceFile, ref: PlaneRef, lines: list[LineEvents]) -> _Duty:
    """A TPU core's active spans and span, as xprof's ConstructDutyCycleTracker finds them."""
    categories = space.event_metadata_stat(ref, "hlo_category")
    off = np.array([k for k, v in categories.items() if str(v) in OFF_DUTY] or [-1], dtype=np.int64)
    duty = _Duty()
    for le in lines:
        if le.name in DUTY_ACTIVE_LINES:
            keep = ~np.isin(le.metadata_id, off) if le.name == TPU_OPS_LINE else slice(None)
            duty.starts.append(le.start_ps[keep])
            duty.ends.append(le.end_ps[keep])
        elif le.name not in DUTY_SPAN_LINES:
            continue
        duty.widen(le.start_ps, le.end_ps)
    return duty


def device_utilization(
    paths: Sequence[Path], tick: Callable[[int], None] | None = None
) -> DeviceUtilization | None:
    """Busy share of every device of a session (see the module's contract)."""
    devices: list[tuple[str, int, int, int]] = []  # (name, busy ps, first ps, last ps)
    spans: list[tuple[int, int]] = []
    tpus: list[tuple[str, _Duty]] = []
    chips: dict[tuple[int, int], _Duty] = {}  # (host file, local chip id) → its cores
    for n, path in enumerate(paths):
        with XSpaceFile(path) as space:
            host = host_name(Path(path), space) if len(paths) > 1 else None
            span = _span_ns(space)
            if span:
                spans.append((span[0] * 1000, span[1] * 1000))
            for ref in space.planes:
                if not (ref.device and ref.device[0] in ("GPU", "TPU")):
                    continue
                pe = read_plane(space, ref, skip_derived=True, tick=tick)
                lines = pe.lines
                if ref.device[0] == "TPU":
                    duty = _tpu_duty(space, ref, lines)
                    tpus.append((_label(host, ref.name), duty))
                    chip = _chip_id(pe.meta.stats)
                    key = (n, chip if chip is not None else -1 - len(tpus))
                    chips.setdefault(key, _Duty()).merge(duty)
                    continue
                start = np.concatenate([le.start_ps for le in lines] or [np.zeros(0, np.int64)])
                end = np.concatenate([le.end_ps for le in lines] or [np.zeros(0, np.int64)])
                first = int(start.min()) if len(start) else 0
                last = int(end.max()) if len(end) else 0
                devices.append((_label(host, ref.name), union_ps(start, end), first, last))
    if tpus and not devices:
        return _duty_cycle(tpus, list(chips.values()))
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


def _label(host: str | None, plane: str) -> str:
    return plane if host is None else host_device(host, plane)


def _duty_cycle(cores: list[tuple[str, _Duty]], chips: list[_Duty]) -> DeviceUtilization | None:
    """TPUs: the converter's duty cycle over the chips, and each core's own."""
    span = sum(c.span_ps for c in chips)
    if span <= 0:
        return None
    first = min(d.first for _, d in cores if d.first is not None)
    last = max(d.last for _, d in cores if d.last is not None)
    busy = tuple(
        DeviceBusy(name, 100.0 * d.active_ps / d.span_ps if d.span_ps else 0.0) for name, d in cores
    )
    return DeviceUtilization(
        profile_ms=(last - first) / 1e9,
        busy_percent=100.0 * sum(c.active_ps for c in chips) / span,
        devices=busy,
        rule="duty_cycle",
    )
