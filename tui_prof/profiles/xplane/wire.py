"""Decoding one XLine's events straight from protobuf wire bytes, vectorised with numpy.

Contract: `decode_line` turns a serialized tensorflow.profiler.XLine into LineEvents: each
event's metadata id, start and end (absolute picoseconds) and the asked-for stats. Event and stat
records are found by byte patterns over the whole buffer (a 0x22 tag, a length, then the tags
that only an XEvent, or only a wanted XStat, has there), checked to tile the line exactly, and
their fields decoded for all events at once. It returns None for an encoding it does not expect
(fields out of the usual order, unknown fields), and the caller then parses that line with upb,
so results never depend on the fast path. A profile's largest lines hold millions of events,
where per-event Python objects cost seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tui_prof.profiles.xplane.line_events import LineEvents, StatColumns

# A line's start in picoseconds is int64: its nanoseconds times 1000 with room for its events'
# offsets (2**62 ns overflowed); what fits always did, and real lines start near 0 (relative).
MAX_TIMESTAMP_NS = 2**63 // 1000 - 2**40

_U7, _HIGH = np.uint64(0x7F), 0x80


class _Unexpected(Exception):
    pass


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position; returns (values as uint64, positions after them)."""
    last = len(arr) - 1
    val = np.zeros(len(pos), dtype=np.uint64)
    cur = pos.copy()
    todo = np.arange(len(pos))
    for shift in range(0, 70, 7):
        if not len(todo):
            return val, cur
        b = arr[np.minimum(cur[todo], last)].astype(np.uint64)
        val[todo] |= (b & _U7) << np.uint64(shift)
        cur[todo] += 1
        todo = todo[b >= _HIGH]
    if len(todo):
        raise _Unexpected("varint longer than 10 bytes")
    return val, cur


def _optional(arr: np.ndarray, pos: np.ndarray, end: np.ndarray, tag: int) -> np.ndarray:
    """Decode an optional varint field with this tag at pos (advancing pos); 0 where absent."""
    out = np.zeros(len(pos), dtype=np.uint64)
    here = np.flatnonzero((pos < end) & (arr[np.minimum(pos, len(arr) - 1)] == tag))
    if len(here):
        out[here], pos[here] = _varints(arr, pos[here] + 1)
    return out


def _header_field(buf: bytes | memoryview, pos: int, header: dict[int, Any]) -> int:
    """Read one non-event XLine field at pos into header; returns the position after it."""
    tag = buf[pos]
    v, p = _varints(np.frombuffer(buf, np.uint8), np.array([pos + 1]))
    if tag in (0x08, 0x18, 0x48, 0x50):  # id, timestamp_ns, duration_ps, display_id
        header[tag >> 3] = int(v[0].astype(np.int64))
        return int(p[0])
    if tag in (0x12, 0x5A):  # name, display_name
        header[tag >> 3] = bytes(buf[int(p[0]) : int(p[0]) + int(v[0])])
        return int(p[0]) + int(v[0])
    raise _Unexpected(f"XLine tag {tag}")


def _chase(buf: bytes | memoryview, pos: int, end: int) -> tuple[list[int], list[int], int]:
    """Walk event records one by one from pos (the slow, always-right way)."""
    starts: list[int] = []
    ends: list[int] = []
    add_start, add_end = starts.append, ends.append
    while pos < end and buf[pos] == 0x22:
        n = buf[pos + 1]
        if n < 0x80:
            pos += 2
        elif buf[pos + 2] < 0x80:
            n = (n & 0x7F) | (buf[pos + 2] << 7)
            pos += 3
        else:
            v, p = _varints(np.frombuffer(buf, np.uint8), np.array([pos + 1]))
            n, pos = int(v[0]), int(p[0])
        add_start(pos)
        pos += n
        add_end(pos)
    return starts, ends, pos


_CHUNK = 1 << 22  # bytes per scanning window: bounds the temporaries of a 100 MB line


def _scan_chunks(
    arr: np.ndarray, patterns: list[list[tuple[int, np.ndarray | int]]]
) -> Iterator[list[np.ndarray]]:
    """Per window of the buffer, for each pattern, the positions k where arr[k + offset] equals
    the byte (or one of the bytes) of every (offset, byte) in it. Whole-window comparisons
    stream through memory where gathers at scattered positions would not; windows bound the
    temporaries, and callers that consume each window's hits at once bound their own."""
    span = max(off for pat in patterns for off, _ in pat) + 1
    n = len(arr)
    for c0 in range(0, n, _CHUNK):
        c1 = min(n, c0 + _CHUNK)
        window = arr[c0 : c1 + span - 1]
        if len(window) < c1 - c0 + span - 1:  # the line's end: pad, so short records still match
            window = np.concatenate([window, np.zeros(c1 - c0 + span - 1 - len(window), np.uint8)])
        width = c1 - c0
        eq: dict[Any, np.ndarray] = {}
        found = []
        for pat in patterns:
            mask = None
            for off, byte in pat:
                key = byte if isinstance(byte, int) else tuple(byte.tolist())
                if key not in eq:
                    values = [byte] if isinstance(byte, int) else byte.tolist()
                    eq[key] = window == values[0]
                    for v in values[1:]:
                        eq[key] |= window == v
                seg = eq[key][off : off + width]
                mask = seg.copy() if mask is None else np.logical_and(mask, seg, out=mask)
            assert mask is not None, "a pattern has at least one (offset, byte)"
            found.append(np.flatnonzero(mask) + c0)
        yield found


def _scan(arr: np.ndarray, patterns: list[list[tuple[int, np.ndarray | int]]]) -> list[np.ndarray]:
    """All of _scan_chunks' hits, per pattern."""
    per = list(zip(*_scan_chunks(arr, patterns), strict=True)) or [() for _ in patterns]
    return [np.concatenate(f) if f else np.zeros(0, dtype=np.int64) for f in per]


def _varint_len_ok(arr: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    """Whether the varint at each position is exactly size bytes long (1 or 2)."""
    last = len(arr) - 1
    ok: np.ndarray = arr[np.minimum(at, last)] < 0x80
    if size == 2:
        ok = (arr[np.minimum(at, last)] >= 0x80) & (arr[np.minimum(at + 1, last)] < 0x80)
    return ok


def _length_at(arr: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    lo: np.ndarray = arr[at].astype(np.int64)
    if size == 2:
        lo = (lo & 0x7F) | (arr[at + 1].astype(np.int64) << 7)
    return lo


def _event_spans(
    buf: bytes | memoryview, arr: np.ndarray
) -> tuple[dict[int, Any], np.ndarray, np.ndarray]:
    """Header fields, and where each event's payload starts and ends.

    Event records are found all at once: a record head whose metadata_id is followed by the
    offset_ps tag (0x10), which no XStat record has (its field 2 is a double, tag 0x11). They must tile the events block exactly;
    if they do not (an event at offset 0, a look-alike inside a string), walk record by record.
    """
    header: dict[int, Any] = {}
    pos, end = 0, len(buf)
    while pos < end and buf[pos] != 0x22:
        pos = _header_field(buf, pos, header)
    first = pos
    # 0x22, length (1-2 bytes), 0x08, metadata_id (1-2 bytes), 0x10
    shapes = [(ln, md) for ln in (1, 2) for md in (1, 2)]
    hits = _scan(arr, [[(0, 0x22), (1 + ln, 0x08), (2 + ln + md, 0x10)] for ln, md in shapes])
    found = []
    for (ln, md), at in zip(shapes, hits, strict=True):
        at = at[
            (at >= first) & _varint_len_ok(arr, at + 1, ln) & _varint_len_ok(arr, at + 2 + ln, md)
        ]
        found.append((at, at + 1 + ln, _length_at(arr, at + 1, ln)))
    at = np.concatenate([f[0] for f in found])
    order = np.argsort(at, kind="stable")
    at = at[order]
    body = np.concatenate([f[1] for f in found])[order]
    length = np.concatenate([f[2] for f in found])[order]
    stops = body + length
    if len(at) and at[0] == first and (stops[:-1] == at[1:]).all():
        starts, pos = body, int(stops[-1])
    else:
        s_l, e_l, pos = _chase(buf, first, end)
        starts, stops = np.array(s_l, dtype=np.int64), np.array(e_l, dtype=np.int64)
    while pos < end:
        if buf[pos] == 0x22:
            raise _Unexpected("events not contiguous")
        pos = _header_field(buf, pos, header)
    if pos != end:
        raise _Unexpected("XLine runs past its end")
    return header, starts, stops


def decode_line(
    buf: bytes | memoryview,
    stat_ids: dict[int, str],
    text_stats: frozenset[str],
    ref_names: dict[int, str],
) -> tuple[dict[int, Any], LineEvents] | None:
    """(header fields by number, events) of a serialized XLine; None if it is encoded unusually.

    stat_ids: stat metadata id -> name of the stats to keep; those in text_stats are kept as
    text (ref_value resolved through ref_names), the others as int64.
    """
    try:
        return _decode(buf, stat_ids, text_stats, ref_names)
    except (_Unexpected, IndexError):
        return None


def _decode(
    buf: bytes | memoryview,
    stat_ids: dict[int, str],
    text_stats: frozenset[str],
    ref_names: dict[int, str],
) -> tuple[dict[int, Any], LineEvents]:
    arr = np.frombuffer(buf, np.uint8)
    last = len(arr) - 1
    header, ev_start, ev_end = _event_spans(buf, arr)
    pos = ev_start.copy()
    md = _optional(arr, pos, ev_end, 0x08).view(np.int64)
    offset = _optional(arr, pos, ev_end, 0x10).view(np.int64)
    duration = _optional(arr, pos, ev_end, 0x18).view(np.int64)
    nxt = arr[np.minimum(pos, last)]
    if not ((pos == ev_end) | (nxt == 0x22) | (nxt == 0x28)).all():
        raise _Unexpected("event fields out of the usual order")
    _check_layout(buf, pos, ev_end)
    n = len(ev_start)
    ints = StatColumns(n, [name for name in stat_ids.values() if name not in text_stats])
    texts: dict[str, dict[int, str]] = {
        name: {} for name in stat_ids.values() if name in text_stats
    }
    if stat_ids and n:
        _find_stats(buf, arr, pos, ev_start, ev_end, stat_ids, ints, texts, ref_names)
    timestamp_ns = int(header.get(3, 0))
    if not 0 <= timestamp_ns < MAX_TIMESTAMP_NS:  # validated here, where it enters: picoseconds
        raise OverflowError(  # must fit int64 (the reader seam names the file)
            f"a line's timestamp of {timestamp_ns} ns is beyond any clock"
        )
    start = offset + timestamp_ns * 1000
    name = header.get(11) or header.get(2) or b""
    return header, LineEvents(
        line_id=int(header.get(1, 0)),
        name=name.decode("utf-8", "replace"),
        metadata_id=md,
        start_ps=start,
        end_ps=start + duration,
        ints=ints,
        texts=texts,
    )


def _check_layout(buf: Any, stats_from: np.ndarray, ev_end: np.ndarray, sample: int = 64) -> None:
    """Walk the stats of a sample of events (first, last, evenly spread) to their end: a writer
    that orders fields unusually does so throughout, and then upb must read the line."""
    n = len(ev_end)
    for i in sorted({0, n - 1, *range(0, n, max(1, n // sample))}) if n else ():
        pos, end = int(stats_from[i]), int(ev_end[i])
        while pos < end and buf[pos] == 0x22:
            length, pos = _py_varint(buf, pos + 1)
            pos += length
        if pos < end and buf[pos] == 0x28:  # num_occurrences
            pos = _py_varint(buf, pos + 1)[1]
        if pos != end:
            raise _Unexpected("event fields out of the usual order")


def _py_varint(buf: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while shift < 70:
        b = buf[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return value, pos
        shift += 7
    raise _Unexpected("varint longer than 10 bytes")


def _find_stats(
    buf: bytes | memoryview,
    arr: np.ndarray,
    stats_from: np.ndarray,
    ev_start: np.ndarray,
    ev_end: np.ndarray,
    stat_ids: dict[int, str],
    ints: StatColumns,
    texts: dict[str, dict[int, str]],
    ref_names: dict[int, str],
) -> None:
    """Find the wanted XStat records directly: a record head with a wanted metadata_id and a
    value whose size matches the record's length, inside an event's stats."""
    sids = np.array(sorted(stat_ids), dtype=np.int64)
    if sids.max(initial=0) >= 1 << 14:
        raise _Unexpected("stat metadata ids past two varint bytes")
    # A few ids: a set, not np.unique (whose first call imports numpy.ma, ~10 ms of start-up)
    first_bytes = {s if s < 0x80 else (s & 0x7F) | 0x80 for s in stat_ids}
    firsts = np.array(sorted(first_bytes), dtype=np.uint8)
    patterns: list[list[tuple[int, np.ndarray | int]]] = [
        [(0, 0x22), (1 + ln, 0x08), (2 + ln, firsts)] for ln in (1, 2)
    ]
    for hits in _scan_chunks(arr, patterns):  # a window at a time: millions of stats per line
        found = []
        for ln, at in zip((1, 2), hits, strict=True):
            at = at[_varint_len_ok(arr, at + 1, ln)]
            found.append((at, at + 1 + ln, _length_at(arr, at + 1, ln)))
        at = np.concatenate([f[0] for f in found])
        body = np.concatenate([f[1] for f in found])
        length = np.concatenate([f[2] for f in found])
        if sids.max(initial=0) < 0x80:  # one-byte ids: the first byte was the whole id
            mid, q = arr[body + 1].astype(np.int64), body + 2
        else:
            wide, q = _varints(arr, body + 1)
            keep = np.isin(wide.view(np.int64), sids)
            at, body, length, q = at[keep], body[keep], length[keep], q[keep]
            mid = wide[keep].view(np.int64)
        owner = np.searchsorted(ev_start, at, side="right") - 1
        owner_c = np.maximum(owner, 0)
        inside = (owner >= 0) & (at >= stats_from[owner_c]) & (body + length <= ev_end[owner_c])
        sel = np.flatnonzero(inside)
        _stat_values(
            buf,
            arr,
            owner[sel],
            mid[sel],
            q[sel],
            (body + length)[sel],
            stat_ids,
            ints,
            texts,
            ref_names,
        )


def _distinct(a: np.ndarray) -> list[int]:
    """np.unique(a).tolist(), without its first call's import of numpy.ma (~10 ms of start-up)."""
    if not len(a):
        return []
    s = np.sort(a)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return [int(v) for v in s[keep].tolist()]


def _stat_values(
    buf: bytes | memoryview,
    arr: np.ndarray,
    events: np.ndarray,
    mid: np.ndarray,
    q: np.ndarray,
    s_end: np.ndarray,
    stat_ids: dict[int, str],
    ints: StatColumns,
    texts: dict[str, dict[int, str]],
    ref_names: dict[int, str],
) -> None:
    """Store the values of wanted stats (metadata ids mid, value fields at q) of these events."""
    tags = np.where(q < s_end, arr[np.minimum(q, len(arr) - 1)], 0)
    varint = (tags == 0x18) | (tags == 0x20) | (tags == 0x38)
    values = np.zeros(len(q), dtype=np.uint64)
    if varint.any():
        values[varint], after = _varints(arr, q[varint] + 1)
        varint[np.flatnonzero(varint)[after != s_end[varint]]] = False  # not a real record
    for sid in _distinct(mid):
        name = stat_ids[sid]
        sel = mid == sid
        if name not in texts:
            num = sel & varint
            ints.add(name, events[num], values[num].view(np.int64))
            continue
        for e, v in zip(
            events[sel & (tags == 0x38)].tolist(),
            values[sel & (tags == 0x38)].tolist(),
            strict=True,
        ):
            texts[name][e] = ref_names.get(v, "")
        strings = np.flatnonzero(sel & ((tags == 0x2A) | (tags == 0x32)))
        if len(strings):
            length, at = _varints(arr, q[strings] + 1)
            for e, a, k, stop in zip(
                events[strings].tolist(),
                at.tolist(),
                length.tolist(),
                s_end[strings].tolist(),
                strict=True,
            ):
                if a + k == stop:
                    texts[name][e] = bytes(buf[a : a + k]).decode("utf-8", "replace")
