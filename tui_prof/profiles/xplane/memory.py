"""Device memory of an XSpace profile: the converter's memory profile, per allocator.

Contract: `memory_use(doc)` turns the `memory_profile` tool's JSON (what XProf's Memory Profile
page shows) into a MemoryUse, or None where it has no allocator with allocations. Each
allocator's peak is its `peakStats.peakBytesInUse` (the peak within the profile, XProf's
"Timeline peak memory usage"); capacity is its `memoryCapacity`. The headline is the device
allocator with the highest peak (host allocators, `*host*`, are listed but not the headline);
its snapshots (heap + stack in use, by time) are the series.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from tui_prof.device_use import DeviceMemory, MemoryUse
from tui_prof.profiles.memory_series import MB, downsample


# The parts of the memory profile's JSON that `memory_use` reads. Decoding only these skips the
# allocations and timelines (most of its ~2 MB for an 8-GPU profile: 2 ms instead of json's 7).
class _Snapshot(msgspec.Struct, omit_defaults=True):
    timeOffsetPs: Any = None
    aggregationStats: Any = None


class _Allocator(msgspec.Struct, omit_defaults=True):
    profileSummary: Any = None
    memoryProfileSnapshots: list[_Snapshot] | None = None


class _Doc(msgspec.Struct, omit_defaults=True):
    memoryProfilePerAllocator: dict[str, _Allocator] | None = None


def decode(text: str) -> Any:
    """The memory profile's JSON as `memory_use` takes it: the parts it reads, as json would
    give them; a document of another shape is decoded whole (ValueError where it is no JSON)."""
    try:
        return msgspec.to_builtins(msgspec.json.decode(text, type=_Doc))
    except msgspec.MsgspecError:  # another shape, or JSON json reads and msgspec not (NaN)
        return json.loads(text)


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _series(alloc: dict[str, Any]) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    for snap in alloc.get("memoryProfileSnapshots") or []:
        if not isinstance(snap, dict):
            continue
        t = _num(snap.get("timeOffsetPs"))
        stats = snap.get("aggregationStats") or {}
        heap = _num(stats.get("heapAllocatedBytes")) or 0.0
        stack = _num(stats.get("stackReservedBytes")) or 0.0
        if t is not None:
            points.append((t / 1e6, heap + stack))  # ps → µs
    points.sort()
    return points


def memory_use(doc: Any) -> MemoryUse | None:
    per = doc.get("memoryProfilePerAllocator") if isinstance(doc, dict) else None
    if not isinstance(per, dict):
        return None
    devices: list[DeviceMemory] = []
    best: tuple[float, dict[str, Any]] | None = None
    for name, alloc in sorted(per.items()):
        if not isinstance(alloc, dict):
            continue
        summary = alloc.get("profileSummary") or {}
        peak = _num((summary.get("peakStats") or {}).get("peakBytesInUse"))
        if peak is None:
            continue
        cap = _num(summary.get("memoryCapacity"))
        devices.append(DeviceMemory(name, peak / MB, None, cap / MB if cap else None))
        if "host" not in name.lower() and (best is None or peak > best[0]):
            best = (peak, alloc)
    if not devices:
        return None
    if best is None:
        top = max(devices, key=lambda d: d.peak_allocated_mb or 0.0)
        return MemoryUse("xla_memory_profile", top.peak_allocated_mb, None, tuple(devices))
    series = downsample(_series(best[1]))
    t0 = series[0][0] if series else 0.0
    return MemoryUse(
        source="xla_memory_profile",
        peak_allocated_mb=best[0] / MB,
        peak_reserved_mb=None,
        devices=tuple(devices),
        series_mb=tuple(((t - t0) / 1e3, v) for t, v in series),
    )
