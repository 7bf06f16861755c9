"""Reading TensorFlow profiler files (`*.xplane.pb`, an XSpace) in bounded memory, without TensorFlow.

Contract: a file is memory-mapped and its top level scanned by hand (XSpace field 1 is the
repeated XPlane); each XPlane's fields are located the same way. Metadata goes to upb; each
XLine's events are decoded in place by xline_wire (numpy), one line at a time, its pages
released after, so peak memory follows the largest line, not the file; upb parses any line
the fast path declines. Anything that is not a well-formed XSpace raises `ProfileError` with a
one-line message (`UnreadableProfile`); no view of the mapping outlives the line it was made
for, so closing never fails over that error. Names are decoded leniently (invalid UTF-8 becomes U+FFFD) because profilers
write them unchecked.
"""

from __future__ import annotations

import contextlib
import mmap
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tui_prof.device_use import host_device
from tui_prof.model import UnreadableProfile, os_reason
from tui_prof.profiles.xplane.gpu_planes import DERIVED_LINE_IDS as DERIVED_LINE_IDS
from tui_prof.profiles.xplane.gpu_planes import stat_value as stat_value
from tui_prof.profiles.xplane.gpu_planes import text as text
from tui_prof.profiles.xplane.line_events import LineEvents, StatColumns
from tui_prof.profiles.xplane.proto import RAW_CLASSES
from tui_prof.profiles.xplane.wire import decode_line

HOST_PLANE_NAME = "/host:CPU"
_DEVICE_RE = re.compile(r"^/device:([A-Z]+):(\d+)")
_PlaneMsg, _LineMsg = RAW_CLASSES["XPlane"], RAW_CLASSES["XLine"]


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated or malformed varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def scan_fields(buf: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Yield (number, wire type, value or payload start, payload end, record start) per field."""
    pos = start
    while pos < end:
        tag_start = pos
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError(f"field number 0 at byte {tag_start}")
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value, pos, tag_start
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise ValueError("a field runs past the end (truncated file?)")
            yield number, wire, pos, pos + length, tag_start
            pos += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise ValueError("a fixed-width field runs past the end")
            yield number, wire, pos, pos + size, tag_start
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire} at byte {tag_start}")


@dataclass
class PlaneRef:
    """Where one XPlane's parts lie in the file; nothing of it is parsed yet."""

    index: int
    id: int
    name: str
    line_spans: list[tuple[int, int]] = field(default_factory=list)
    meta_spans: list[tuple[int, int]] = field(default_factory=list)  # whole records, tag included
    size: int = 0

    @property
    def is_host(self) -> bool:
        return self.name == HOST_PLANE_NAME

    @property
    def device(self) -> tuple[str, int] | None:
        """("GPU", 3) for "/device:GPU:3"; None for host and other planes."""
        m = _DEVICE_RE.match(self.name)
        return (m.group(1), int(m.group(2))) if m else None


@dataclass
class PlaneMeta:
    """A plane's dictionaries: event and stat metadata names by id, and the plane's own stats."""

    event_names: dict[int, str]  # the metadata name (what the converter classifies by)
    stat_names: dict[int, str]
    stats: dict[str, Any]


class XSpaceFile:
    """One memory-mapped XSpace; planes are located at open and parsed line by line on demand."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as fh:
                size = fh.seek(0, 2)
                if size == 0:
                    raise UnreadableProfile(f"{self.path.name}: empty file, not a profile")
                self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise UnreadableProfile(f"{self.path.name}: cannot read ({os_reason(exc)})") from exc
        self.size = size
        self.hostnames: list[str] = []
        self.planes: list[PlaneRef] = []
        try:
            self._scan()
        except (ValueError, IndexError) as exc:
            self.close()
            raise UnreadableProfile(
                f"{self.path.name}: not a readable XSpace profile ({exc})"
            ) from exc
        if not self.planes:
            self.close()
            raise UnreadableProfile(f"{self.path.name}: not a readable XSpace profile (no planes)")

    def _scan(self) -> None:
        mm = self._mm
        for number, wire, a, b, _ in scan_fields(mm, 0, self.size):
            if number > 4 or wire != 2:
                raise ValueError(f"unexpected top-level field {number}/{wire}")
            if number == 1:
                self.planes.append(self._scan_plane(len(self.planes), a, b))
            elif number == 4:
                self.hostnames.append(text(mm[a:b]))

    def _scan_plane(self, index: int, start: int, end: int) -> PlaneRef:
        ref = PlaneRef(index=index, id=0, name="", size=end - start)
        mm = self._mm
        for number, wire, a, b, rec in scan_fields(mm, start, end):
            if number == 1 and wire == 0:
                ref.id = a - (1 << 64) if a >= 1 << 63 else a
            elif number == 2 and wire == 2:
                ref.name = text(mm[a:b])
            elif number == 3 and wire == 2:
                ref.line_spans.append((a, b))
            elif number in (4, 5, 6) and wire == 2:
                ref.meta_spans.append((rec, b))
            elif number > 6:
                raise ValueError(f"unexpected XPlane field {number}")
        return ref

    def close(self) -> None:
        """Unmap the file; never raises. Should a view of it still be alive (held by some error's
        traceback), the mapping goes when that view does: the caller's own error matters more."""
        mm = getattr(self, "_mm", None)
        if mm is not None and not mm.closed:
            with contextlib.suppress(BufferError):
                mm.close()

    def __enter__(self) -> XSpaceFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _plane_msg(self, plane: PlaneRef) -> Any:
        """The plane's metadata records parsed (its lines left out): whole records of a partial
        XPlane, merged field by field."""
        msg = _PlaneMsg()
        try:
            for a, b in plane.meta_spans:
                msg.MergeFromString(self._mm[a:b])
        except Exception as exc:  # upb's DecodeError
            raise UnreadableProfile(
                f"{self.path.name}: damaged metadata in {plane.name} ({exc})"
            ) from exc
        return msg

    def metadata(self, plane: PlaneRef) -> PlaneMeta:
        """Parse a plane's metadata maps and stats (small), leaving its lines alone."""
        msg = self._plane_msg(plane)
        stat_names = {k: text(v.name) for k, v in msg.stat_metadata.items()}
        event_names = {k: text(v.name or v.display_name) for k, v in msg.event_metadata.items()}
        stats = {
            stat_names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, stat_names)
            for s in msg.stats
        }
        return PlaneMeta(event_names=event_names, stat_names=stat_names, stats=stats)

    def event_metadata_stat(self, plane: PlaneRef, name: str) -> dict[int, Any]:
        """One stat of the plane's event metadata (an XLA op's `hlo_category`), by metadata id."""
        msg = self._plane_msg(plane)
        stat_names = {k: text(v.name) for k, v in msg.stat_metadata.items()}
        ids = {k for k, v in stat_names.items() if v == name}
        out: dict[int, Any] = {}
        for k, meta in msg.event_metadata.items():
            for st in meta.stats:
                if st.metadata_id in ids:
                    out[k] = stat_value(st, stat_names)
        return out

    def lines(
        self,
        plane: PlaneRef,
        stat_ids: dict[int, str],
        text_stats: frozenset[str],
        ref_names: dict[int, str],
        *,
        skip_ids: range | None = None,
    ) -> Iterator[tuple[int, LineEvents | None]]:
        """(bytes, events) of each line in turn; events is None for lines whose id is skipped."""
        mm = self._mm
        for a, b in plane.line_spans:
            if skip_ids is not None and _line_id(mm, a, b) in skip_ids:
                yield b - a, None
                continue
            events = self._line(plane, a, b, stat_ids, text_stats, ref_names)
            self._release(a, b)
            yield b - a, events

    def _line(
        self,
        plane: PlaneRef,
        a: int,
        b: int,
        stat_ids: dict[int, str],
        text_stats: frozenset[str],
        ref_names: dict[int, str],
    ) -> LineEvents:
        """One line's events. The view of its mapped bytes is released before anything leaves
        here, the error included (a live view makes closing the mapping fail)."""
        buf = memoryview(self._mm)[a:b]  # no copy: numpy reads the mapped pages in place
        damage = ""
        try:
            decoded = decode_line(buf, stat_ids, text_stats, ref_names)
            if decoded is not None:
                return decoded[1]
            try:  # an encoding the fast path does not expect: let upb parse it
                msg = _LineMsg.FromString(buf)
            except Exception as exc:  # upb's DecodeError
                damage = str(exc)
            else:
                return _upb_line_events(msg, stat_ids, text_stats, ref_names)
        finally:
            # Still exported only by a frame of a propagating error: let it go with that error.
            with contextlib.suppress(BufferError):
                buf.release()
        raise UnreadableProfile(f"{self.path.name}: damaged line in {plane.name} ({damage})")

    def _release(self, a: int, b: int) -> None:
        """Drop the mapped pages of a finished line from this process's resident memory."""
        page = mmap.PAGESIZE
        lo, hi = (a // page) * page, (b // page) * page
        if hi > lo and hasattr(mmap, "MADV_DONTNEED"):
            self._mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _line_id(mm: Any, a: int, b: int) -> int | None:
    """An XLine's id (its first field, as serialized), without parsing the rest."""
    for number, wire, value, _, _ in scan_fields(mm, a, b):
        if number == 1 and wire == 0:
            return value - (1 << 64) if value >= 1 << 63 else value
        return None
    return None


def _upb_line_events(
    line: Any, stat_ids: dict[int, str], text_stats: frozenset[str], ref_names: dict[int, str]
) -> LineEvents:
    """The slow path of decode_line, through upb message objects (same result)."""
    events = line.events
    n = len(events)
    triples = np.array(
        [(e.metadata_id, e.offset_ps, e.duration_ps) for e in events], dtype=np.int64
    ).reshape(n, 3)
    start = triples[:, 1] + line.timestamp_ns * 1000
    out = LineEvents(
        line_id=line.id,
        name=text(line.display_name or line.name),
        metadata_id=triples[:, 0],
        start_ps=start,
        end_ps=start + triples[:, 2],
    )
    out.ints = StatColumns(n, [v for v in stat_ids.values() if v not in text_stats])
    out.texts = {v: {} for v in stat_ids.values() if v in text_stats}
    for i, e in enumerate(events):
        for s in e.stats:
            name = stat_ids.get(s.metadata_id)
            kind = s.WhichOneof("value") if name is not None else None
            if name is None or kind is None:
                continue
            if name in out.texts:
                value = getattr(s, kind)
                out.texts[name][i] = (
                    ref_names.get(value, "")
                    if kind == "ref_value"
                    else text(value)
                    if isinstance(value, bytes)
                    else str(value)
                )
            elif kind == "int64_value":
                out.ints.add(name, np.array([i]), np.array([s.int64_value]))
            elif kind in ("uint64_value", "ref_value"):  # stored as the same 64 bits
                out.ints.add(
                    name,
                    np.array([i]),
                    np.array([getattr(s, kind)], dtype=np.uint64).view(np.int64),
                )
    return out


def host_name(path: Path, space: XSpaceFile) -> str:
    """The host a file speaks for: its recorded hostname, else the file name before .xplane.pb."""
    if space.hostnames:
        return space.hostnames[0]
    return path.name.removesuffix(".xplane.pb")


def plane_summary(paths: Sequence[Path | str]) -> dict[str, Any]:
    """Device type, device names and count, and hosts of one session, from plane names only."""
    hosts: list[str] = []
    devices: list[str] = []
    kinds: set[str] = set()
    for p in paths:
        with XSpaceFile(p) as space:
            hosts.append(host_name(Path(p), space))
            for plane in space.planes:
                dev = plane.device
                if dev:
                    kinds.add(dev[0])
                    devices.append(
                        plane.name if len(paths) == 1 else host_device(hosts[-1], plane.name)
                    )
    kind = (
        "TPU"
        if "TPU" in kinds
        else "GPU"
        if "GPU" in kinds
        else sorted(kinds)[0]
        if kinds
        else "CPU"
    )
    return {
        "device_type": kind,
        "device_count": len(devices) if kinds else 0,
        "device_names": devices,
        "hosts": hosts,
    }


# ROCm's major.minor of the gfx targets the hardware table knows, as XLA names the device type
_AMD_TYPES = {(9, 4): "AMD GPU - gfx942", (9, 0): "AMD GPU - gfx90a"}


def amd_device_type(paths: Sequence[Path | str]) -> str:
    """ "AMD GPU - gfx942" for an AMD GPU plane whose ROCm version names a known target (what
    the converter's device type reads), for profiles read without it; "" otherwise."""
    for p in paths:
        with XSpaceFile(p) as space:
            for plane in space.planes:
                if plane.device and plane.device[0] == "GPU":
                    stats = space.metadata(plane).stats
                    if str(stats.get("device_vendor") or "").upper() != "AMD":
                        return ""
                    caps = (stats.get("compute_cap_major"), stats.get("compute_cap_minor"))
                    return _AMD_TYPES.get(caps, "")  # type: ignore[arg-type]
    return ""


@dataclass
class PlaneEvents:
    """What one plane holds for the step finder: its metadata and its lines' events."""

    plane: PlaneRef
    meta: PlaneMeta
    lines: list[LineEvents]


def read_plane(
    space: XSpaceFile,
    plane: PlaneRef,
    *,
    stats: Sequence[str] = (),
    text_stats: Sequence[str] = (),
    want: Callable[[str], object] | None = None,
    skip_derived: bool = False,
    keep: Callable[[LineEvents, np.ndarray], np.ndarray] | None = None,
    tick: Callable[[int], None] | None = None,
) -> PlaneEvents:
    """Read a plane line by line, keeping the named stats of every event (text_stats as text);
    LineEvents.stats gets all of them for the events whose name want() accepts.

    keep(events, wanted) chooses which events of a line to hold on to (wanted: those want()
    accepts); tick(bytes) is called after each line, so callers can report progress and cancel.
    """
    meta = space.metadata(plane)
    names = set(stats) | set(text_stats)
    stat_ids = {k: v for k, v in meta.stat_names.items() if v in names}
    wanted = [k for k, v in meta.event_names.items() if want(v)] if want else []
    lines: list[LineEvents] = []
    for size, le in space.lines(
        plane,
        stat_ids,
        frozenset(text_stats),
        meta.stat_names,
        skip_ids=DERIVED_LINE_IDS if skip_derived else None,
    ):
        if le is not None and len(le.start_ps):
            for name in stats:  # every asked-for stat is there, absent or not
                if name not in text_stats and name not in le.ints:
                    le.ints.add(name, np.zeros(0, np.int64), np.zeros(0, np.int64))
            for name in text_stats:
                le.texts.setdefault(name, {})
            picked = np.isin(le.metadata_id, wanted)
            if keep is not None:
                le = le.subset(keep(le, picked))
                picked = np.isin(le.metadata_id, wanted)
            le.stats = le.stats_for(np.flatnonzero(picked))
            if len(le.start_ps):
                lines.append(le)
        if tick:
            tick(size)
    return PlaneEvents(plane=plane, meta=meta, lines=lines)
