"""Decoding one XLine's events straight from protobuf wire bytes, vectorised with numpy.

Contract: `decode_line` turns a serialized tensorflow.profiler.XLine into arrays: each event's
metadata id, start and end (absolute picoseconds) and the asked-for stats. Only the walk from one
event to the next is a Python loop; every field inside the events is decoded for all events at
once. It returns None for an encoding it does not expect (fields out of the usual order, unknown
fields), and the caller then parses that line with upb instead, so results never depend on it.
A profile's largest lines hold millions of events, where per-event Python objects cost seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MISSING = np.iinfo(np.int64).min  # a numeric stat an event does not carry
_U7, _HIGH = np.uint64(0x7F), 0x80


@dataclass
class LineEvents:
    """One XLine's events as arrays (absolute picoseconds) and the stats asked for.

    ints holds each numeric stat for every event (MISSING where absent); texts each text stat by
    event index; stats every asked-for stat of the events a reader's want() picked.
    """

    line_id: int
    name: str
    metadata_id: np.ndarray
    start_ps: np.ndarray
    end_ps: np.ndarray
    ints: dict[str, np.ndarray] = field(default_factory=dict)
    texts: dict[str, dict[int, str]] = field(default_factory=dict)
    stats: dict[int, dict[str, Any]] = field(default_factory=dict)

    def stats_of(self, i: int) -> dict[str, Any]:
        """Every asked-for stat of event i."""
        out: dict[str, Any] = {k: int(v[i]) for k, v in self.ints.items() if v[i] != MISSING}
        out.update({k: v[i] for k, v in self.texts.items() if i in v})
        return out


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


def _event_spans(buf: bytes) -> tuple[dict[int, Any], list[int], list[int]]:
    """Walk the line's top level: header fields, and where each event's payload starts and ends."""
    header: dict[int, Any] = {}
    starts: list[int] = []
    ends: list[int] = []
    add_start, add_end = starts.append, ends.append
    pos, end = 0, len(buf)
    while pos < end:
        tag = buf[pos]
        if tag == 0x22:  # field 4: an XEvent; its length is a varint, mostly of 1-2 bytes
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
        elif tag in (0x08, 0x18, 0x48, 0x50):  # id, timestamp_ns, duration_ps, display_id
            v, p = _varints(np.frombuffer(buf, np.uint8), np.array([pos + 1]))
            header[tag >> 3], pos = int(v[0].astype(np.int64)), int(p[0])
        elif tag in (0x12, 0x5A):  # name, display_name
            v, p = _varints(np.frombuffer(buf, np.uint8), np.array([pos + 1]))
            pos = int(p[0]) + int(v[0])
            header[tag >> 3] = buf[int(p[0]):pos]
        else:
            raise _Unexpected(f"XLine tag {tag}")
    if pos != end:
        raise _Unexpected("XLine runs past its end")
    return header, starts, ends


def decode_line(buf: bytes, stat_ids: dict[int, str], text_stats: frozenset[str],
                ref_names: dict[int, str]) -> tuple[dict[int, Any], LineEvents] | None:
    """(header fields by number, events) of a serialized XLine; None if it is encoded unusually.

    stat_ids: stat metadata id -> name of the stats to keep; those in text_stats are kept as
    text (ref_value resolved through ref_names), the others as int64.
    """
    try:
        return _decode(buf, stat_ids, text_stats, ref_names)
    except (_Unexpected, IndexError):
        return None


def _decode(buf: bytes, stat_ids: dict[int, str], text_stats: frozenset[str],
            ref_names: dict[int, str]) -> tuple[dict[int, Any], LineEvents]:
    header, starts_l, ends_l = _event_spans(buf)
    arr = np.frombuffer(buf, np.uint8)
    last = len(arr) - 1
    ev_start = np.array(starts_l, dtype=np.int64)
    ev_end = np.array(ends_l, dtype=np.int64)
    pos = ev_start.copy()
    md = _optional(arr, pos, ev_end, 0x08).view(np.int64)
    offset = _optional(arr, pos, ev_end, 0x10).view(np.int64)
    duration = _optional(arr, pos, ev_end, 0x18).view(np.int64)
    n = len(ev_start)
    ints = {name: np.full(n, MISSING, dtype=np.int64) for name in stat_ids.values()
            if name not in text_stats}
    texts: dict[str, dict[int, str]] = {name: {} for name in stat_ids.values() if name in text_stats}
    sids = np.array(sorted(stat_ids), dtype=np.int64)
    todo = np.flatnonzero((pos < ev_end) & (arr[np.minimum(pos, last)] == 0x22))
    while len(todo):  # one pass per stat slot: the k-th stat of every event that has k stats
        length, p = _varints(arr, pos[todo] + 1)
        s_end = p + length.astype(np.int64)
        hit = np.flatnonzero((p < s_end) & (arr[np.minimum(p, last)] == 0x08))
        mid, q = _varints(arr, p[hit] + 1)
        keep = np.isin(mid.view(np.int64), sids)
        hit, mid, q = hit[keep], mid[keep].view(np.int64), q[keep]
        if len(hit):
            _stat_values(buf, arr, todo[hit], mid, q, s_end[hit], stat_ids, ints, texts, ref_names)
        pos[todo] = s_end
        todo = todo[(s_end < ev_end[todo]) & (arr[np.minimum(s_end, last)] == 0x22)]
    _optional(arr, pos, ev_end, 0x28)  # num_occurrences, after the stats
    if (pos != ev_end).any():
        raise _Unexpected("event fields out of the usual order")
    start = offset + int(header.get(3, 0)) * 1000
    name = header.get(11) or header.get(2) or b""
    return header, LineEvents(line_id=int(header.get(1, 0)),
                              name=name.decode("utf-8", "replace"), metadata_id=md,
                              start_ps=start, end_ps=start + duration, ints=ints, texts=texts)


def _stat_values(buf: bytes, arr: np.ndarray, events: np.ndarray, mid: np.ndarray, q: np.ndarray,
                 s_end: np.ndarray, stat_ids: dict[int, str], ints: dict[str, np.ndarray],
                 texts: dict[str, dict[int, str]], ref_names: dict[int, str]) -> None:
    """Store the values of wanted stats (metadata ids mid, value fields at q) of these events."""
    tags = np.where(q < s_end, arr[np.minimum(q, len(arr) - 1)], 0)
    varint = (tags == 0x18) | (tags == 0x20) | (tags == 0x38)
    values = np.zeros(len(q), dtype=np.uint64)
    if varint.any():
        values[varint] = _varints(arr, q[varint] + 1)[0]
    for sid in np.unique(mid).tolist():
        name = stat_ids[sid]
        sel = mid == sid
        if name not in texts:
            num = sel & varint
            ints[name][events[num]] = values[num].view(np.int64)
            continue
        for e, v in zip(events[sel & (tags == 0x38)].tolist(),
                        values[sel & (tags == 0x38)].tolist(), strict=True):
            texts[name][e] = ref_names.get(v, "")
        strings = np.flatnonzero(sel & ((tags == 0x2A) | (tags == 0x32)))
        if len(strings):
            length, at = _varints(arr, q[strings] + 1)
            for e, a, k in zip(events[strings].tolist(), at.tolist(), length.tolist(),
                               strict=True):
                texts[name][e] = buf[a:a + k].decode("utf-8", "replace")
