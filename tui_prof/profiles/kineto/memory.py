"""Memory from a Kineto trace's `[memory]` events (`profile_memory=True`).

Contract: `MemoryRecorder.add(event, args)` for each `[memory]` instant event (kineto/extras.py
feeds it), then `result(...)`. Each event is one allocation (Bytes > 0) or free (< 0) on one
device; today's traces also write the allocator's `Total Allocated` and `Total Reserved` after
it, whose maxima are the peaks, exactly. Older traces (2021) write only Bytes: their running
sum is the memory allocated above what was in use when the profile began (`relative`). The op
that allocated is the innermost op around the event on its thread (the collector's op rows).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tui_prof.device_use import Allocator, DeviceMemory
from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.columns import IS_OP
from tui_prof.profiles.kineto.events import Args, Event
from tui_prof.profiles.memory_series import MB, downsample

TOP_ALLOCATORS = 5
OUTSIDE = "(outside any op)"
CPU = 0

# (ts, bytes, total allocated or -1, total reserved or -1)
_Row = tuple[float, float, float, float]


@dataclass
class DeviceSeries:
    """One device's memory events, in time order once sorted."""

    rows: list[_Row] = field(default_factory=list)


@dataclass
class RankMemory:
    """One rank's memory: per device, peaks; the busiest device's series and step peaks."""

    devices: list[DeviceMemory]
    busiest: str
    series: list[tuple[float, float]]  # (µs as in the file, MB) of the busiest device
    step_peaks: dict[int, float]  # step number → MB, of the busiest device
    allocators: dict[str, tuple[float, int]]  # op → bytes allocated, allocations
    relative: bool


@dataclass
class MemoryRecorder:
    devices: dict[tuple[int, int], DeviceSeries] = field(default_factory=dict)
    # (pid, tid) → (ts, bytes) of allocations, for naming the op that made them
    allocations: dict[tuple[int | str, int | str], list[tuple[float, float]]] = field(
        default_factory=dict
    )

    def add(self, e: Event, a: Args) -> None:
        ts, nbytes = e.ts, a.nbytes
        if ts is None or nbytes is None:
            return
        key = (a.device_type if a.device_type is not None else -1, a.device_id or 0)
        dev = self.devices.get(key)
        if dev is None:
            dev = self.devices[key] = DeviceSeries()
        alloc = a.total_allocated if a.total_allocated is not None else -1.0
        res = a.total_reserved if a.total_reserved is not None else -1.0
        dev.rows.append((ts, nbytes, alloc, res))
        if nbytes > 0:
            self.allocations.setdefault((e.pid, e.tid), []).append((ts, nbytes))

    def result(
        self, c: Collector, spans: Sequence[tuple[float, float]], numbers: Sequence[int]
    ) -> RankMemory | None:
        if not self.devices:
            return None
        devices: list[DeviceMemory] = []
        best: tuple[float, str, list[tuple[float, float]]] | None = None
        relative = False
        for (dtype, did), d in sorted(self.devices.items()):
            d.rows.sort()
            name = "CPU" if dtype == CPU else f"GPU {did}" if dtype == 1 else f"device {did}"
            curve, exact = _curve(d.rows)
            relative = relative or not exact
            peak = max(v for _, v in curve)
            reserved = max((r[3] for r in d.rows), default=-1.0)
            devices.append(
                DeviceMemory(name, peak / MB, reserved / MB if exact and reserved >= 0 else None)
            )
            if dtype != CPU and (best is None or peak > best[0]):
                best = (peak, name, curve)
        if best is None:  # CPU only: the CPU's curve
            peak, name, curve = max(
                ((max(v for _, v in cv), n, cv) for n, cv in _curves(self)), key=lambda t: t[0]
            )
            best = (peak, name, curve)
        _peak, busiest, curve = best
        return RankMemory(
            devices=devices,
            busiest=busiest,
            series=downsample(curve),
            step_peaks=_step_peaks(curve, spans, numbers),
            allocators=self._allocators(c),
            relative=relative,
        )

    def _allocators(self, c: Collector) -> dict[str, tuple[float, int]]:
        """Bytes allocated per op: the innermost op around each allocation on its thread (the
        last op to start before it that has not ended: any op inside it would start later).
        Vectorised for the common case (the last op to start is still running); the rest climb
        from it to the first ancestor still running."""
        out: dict[str, tuple[float, int]] = {}
        # Old traces write an op's tid as a string and a memory event's as a number.
        threads = {(str(p), str(t)): i for i, (p, t) in enumerate(c.thread_keys)}
        h = c.host
        for (pid, tid), allocs in self.allocations.items():
            at = np.array(allocs, dtype=np.float64).reshape(-1, 2)
            owner = np.full(len(at), -1, dtype=np.int64)  # name id, -1 outside any op
            th = threads.get((str(pid), str(tid)))
            if h is not None and th is not None and len(at):
                rows = np.flatnonzero((h.thread == th) & ((h.flags & IS_OP) != 0))
                rows = rows[np.lexsort((h.flags[rows], h.nid[rows], -h.end[rows], h.ts[rows]))]
                starts, ends, nids = h.ts[rows], h.end[rows], h.nid[rows].astype(np.int64)
                idx = np.searchsorted(starts, at[:, 0], side="right") - 1
                hit = (idx >= 0) & (ends[np.maximum(idx, 0)] >= at[:, 0])
                owner[hit] = nids[idx[hit]]
                missed = np.flatnonzero(~hit & (idx >= 0)).tolist()
                if missed:  # the op around it is an ancestor of the last one to start
                    parent = _parents(starts.tolist(), ends.tolist())
                    end_of = ends.tolist()
                    for k in missed:
                        t, j = float(at[k, 0]), int(idx[k])
                        while j >= 0 and end_of[j] < t:
                            j = parent[j]
                        if j >= 0:
                            owner[k] = nids[j]
            for nid in np.unique(owner).tolist():
                mask = owner == nid
                op = c.names[nid] if nid >= 0 else OUTSIDE
                total, n = out.get(op, (0.0, 0))
                out[op] = (total + float(at[mask, 1].sum()), n + int(mask.sum()))
        return out


def _parents(starts: list[float], ends: list[float]) -> list[int]:
    """Each op's enclosing op (its index, -1 for none), ops sorted by (start, -end)."""
    parent = [-1] * len(starts)
    stack: list[int] = []
    for i, start in enumerate(starts):
        while stack and ends[stack[-1]] <= start:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def _curves(m: MemoryRecorder) -> list[tuple[str, list[tuple[float, float]]]]:
    return [(f"device {k}", _curve(d.rows)[0]) for k, d in m.devices.items()]


def _curve(rows: Sequence[_Row]) -> tuple[list[tuple[float, float]], bool]:
    """(ts, bytes allocated) after each event; exact where the allocator's totals are recorded."""
    if rows and all(r[2] >= 0 for r in rows):
        return [(r[0], r[2]) for r in rows], True
    out: list[tuple[float, float]] = []
    level = 0.0
    for ts, nbytes, _a, _r in rows:
        level += nbytes
        out.append((ts, level))
    return out, False


def _step_peaks(
    curve: list[tuple[float, float]], spans: Sequence[tuple[float, float]], numbers: Sequence[int]
) -> dict[int, float]:
    times = [t for t, _ in curve]
    out: dict[int, float] = {}
    for (lo, hi), n in zip(spans, numbers, strict=True):
        i = bisect.bisect_left(times, lo)
        j = bisect.bisect_right(times, hi)
        before = curve[i - 1][1] if i > 0 else 0.0  # what was allocated as the step began
        inside = [v for _, v in curve[i:j]]
        if inside or i > 0:
            out[n] = max([before, *inside]) / MB
    return out


def top_allocators(totals: dict[str, tuple[float, int]]) -> list[Allocator]:
    ranked = sorted(totals.items(), key=lambda kv: kv[1][0], reverse=True)[:TOP_ALLOCATORS]
    return [Allocator(op, b / MB, n) for op, (b, n) in ranked]
