"""One part of a Kineto trace → the timeline's rows: what each kept event is, on which track.

Why its own module: the summary's read folds its parts in worker processes (kineto/workers.py),
and each worker turns its part's events into these rows beside the summary's Collector, so the
timeline needs no second pass over the file. A part's rows carry their own small tables (track
keys, names, input texts), numbered from 0 within the part; the reading process maps them to the
session's ids (timeline/kineto.py) in file order. Categories are the summary's (rank.py's rules:
collectives by name or by their op's external id, runtime calls that wait for the device as
`other`, DataLoader spans as `input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tui_prof.profiles.kineto import names as knames
from tui_prof.profiles.kineto.collect import COMM_OPS, STEP_PREFIX, is_dataloader
from tui_prof.profiles.kineto.events import Args, Event, Kind, kind_of, raw_list
from tui_prof.profiles.timeline.model import CATEGORY_CODE

DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
_HOST_KINDS = (Kind.OP, Kind.ANNOTATION, Kind.DATALOADER)  # no launch ids: only calls link
_KEPT = (Kind.OP, Kind.ANNOTATION, Kind.RUNTIME, Kind.RUNTIME_2021, Kind.DATALOADER, *DEVICE_KINDS)
HOST_COMPUTE = CATEGORY_CODE["host_compute"]
COLLECTIVES = CATEGORY_CODE["device_collectives"]
DEVICE_COMPUTE = CATEGORY_CODE["device_compute"]
# The columns of a row (float64: ids and launch ids are exact below 2**53).
COLUMNS = ("track", "start", "end", "nid", "cat", "ext", "corr", "info")
TRACK, START, END, NID, CAT, EXT, CORR, INFO = range(len(COLUMNS))

TrackKey = tuple[bool, Any, Any]  # (on a device, pid, tid)


def shapes_text(dims: list[object] | None, types: tuple[str, ...] | None) -> str:
    """An op's inputs as `dtype[shape]`, comma-separated (`float[64, 3, 224, 224], int`): the
    `Input type` and `Input Dims` args side by side; '' where neither says anything."""
    n = max(len(dims or ()), len(types or ()))
    parts = []
    for i in range(n):
        t = types[i] if types is not None and i < len(types) else ""
        d = dims[i] if dims is not None and i < len(dims) else None
        shape = f"[{', '.join(map(str, d))}]" if isinstance(d, list) and d else ""
        parts.append(f"{t}{shape}" or "·")
    text = ", ".join(parts)
    return "" if set(parts) <= {"·"} else text


def category(kind: Kind, name: str) -> int:
    if kind == Kind.KERNEL:
        return COLLECTIVES if knames.is_collective(name) else DEVICE_COMPUTE
    if kind in (Kind.MEMCPY, Kind.MEMSET):
        return CATEGORY_CODE["device_to_device"]
    if kind in (Kind.RUNTIME, Kind.RUNTIME_2021):
        return CATEGORY_CODE["other" if knames.WAIT_CALL.search(name) else "kernel_launch"]
    if kind == Kind.DATALOADER or is_dataloader(name):
        return CATEGORY_CODE["input"]
    if name in COMM_OPS:
        return COLLECTIVES
    return HOST_COMPUTE


@dataclass
class PartRows:
    """One part's kept events: `rows` (n × COLUMNS, sorted by track, file order within one),
    with the part's own track keys, names and input texts that its ids index."""

    rows: npt.NDArray[np.float64]
    keys: list[TrackKey] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    comm_ext: set[int] = field(default_factory=set)  # external ids of collective ops


_UNSEEN: Any = object()  # an event kind and name not met before
# on a device, name id, which args (_LINKS_*), a collective
_What = tuple[bool, float, int, bool]
_LINKS_OP, _LINKS_CALL, _LINKS_KERNEL = 1, 2, 3  # which args an event's row takes
_FLAT = 5  # numbers per event in rows_of's list: track, start, duration, name id, link


class _Tables:
    """A part's own numbering: tracks, names, input texts; what each (category, name) is."""

    def __init__(self) -> None:
        self.keys: list[TrackKey] = []
        self.key_ids: dict[TrackKey, float] = {}
        self.names: list[str] = []
        self.cats: list[int] = []  # per name id: its category code
        self.links: list[int] = []  # per name id: which args its rows take (_LINKS_*)
        self.infos: list[str] = []
        self.info_ids: dict[tuple[bytes, tuple[str, ...] | None], float] = {}
        # per category, per name: (on a device, name id, which args) or None; ids as floats,
        # as the rows hold them (a list of floats becomes an array fastest)
        self.what: dict[str, dict[str, _What | None]] = {}

    def classify(self, cat: str, name: str) -> _What | None:
        kind = kind_of(cat)
        w: _What | None = None
        if kind not in _KEPT:
            pass
        elif kind == Kind.ANNOTATION and not (is_dataloader(name) or name in COMM_OPS):
            pass  # ProfilerStep#N is the step itself; other annotations nest ops
        elif kind == Kind.OP and name.startswith(STEP_PREFIX):
            pass  # the 2021 traces' ProfilerStep#N, an `Operator`: the step itself
        else:
            self.names.append(name)
            c = category(kind, name)
            links = (
                _LINKS_OP
                if kind in (Kind.OP, Kind.ANNOTATION)
                else _LINKS_KERNEL
                if kind == Kind.KERNEL
                else 0
                if kind == Kind.DATALOADER
                else _LINKS_CALL
            )
            self.cats.append(c)
            self.links.append(links)
            w = (kind in DEVICE_KINDS, float(len(self.names) - 1), links, c == COLLECTIVES)
        self.what.setdefault(cat, {})[name] = w
        return w

    def info(self, args: Args) -> float:
        key = (bytes(args.input_dims), args.input_type)
        i = self.info_ids.get(key)
        if i is None:
            text = shapes_text(raw_list(args.input_dims), args.input_type)
            i = -1.0
            if text:
                i = float(len(self.infos))
                self.infos.append(text)
            self.info_ids[key] = i
        return i

    def track(self, key: TrackKey) -> float:
        i = self.key_ids.get(key)
        if i is None:
            i = self.key_ids[key] = float(len(self.keys))
            self.keys.append(key)
        return i


def rows_of(batch: list[Event]) -> PartRows:
    """The timeline's rows of one part's events: per event, one dict lookup for what it is
    (by category, then name) and, when its thread or stream is not the previous event's, one
    for its track. Written for speed (each decode worker runs it beside the summary's own
    loop, which waits on it): per event only five numbers (track, start, duration, name, and
    the launch id or input text its kind has), all floats (numpy reads a list of floats ≈ 2×
    as fast as one of mixed ints and floats); a kernel's external id aside; the category, the
    end and the other columns made afterwards with numpy from the part's name tables."""
    tables = _Tables()
    what, track, info_ids = tables.what, tables.track, tables.info_ids
    comm_ext: set[int] = set()
    flat: list[float] = []
    kernel_at: list[int] = []  # where a kernel's row starts in `flat`, and its external id
    kernel_ext: list[int] = []
    last_dev, last_pid, last_tid = False, _UNSEEN, _UNSEEN
    tr = -1.0
    by_name: dict[str, _What | None] = {}
    last_cat: str | None = None
    for e in batch:
        if e.ph != "X":
            continue
        if e.cat != last_cat:
            last_cat = e.cat
            by_name = what.get(last_cat) or what.setdefault(last_cat, {})
        w = by_name.get(e.name, _UNSEEN)
        if w is None:
            continue
        if w is _UNSEEN:
            w = tables.classify(e.cat, e.name)
            if w is None:
                continue
        ts, dur = e.ts, e.dur
        if ts is None or dur is None or ts != ts or dur != dur:
            continue
        device, nid, links, collective = w
        link: float = -1.0  # an op's input text, a call's or kernel's correlation id
        args = e.args
        if links and args is not None:
            if links == _LINKS_OP:
                dims, types = args.input_dims, args.input_type
                if dims or types:
                    got = info_ids.get((bytes(dims), types))
                    link = tables.info(args) if got is None else got
                if collective:
                    x = args.external_id
                    x = args.external_id_2021 if x is None else x
                    if x is not None:
                        comm_ext.add(x)
            else:
                if args.correlation is not None:
                    link = args.correlation
                if links == _LINKS_KERNEL:
                    x = args.external_id
                    x = args.external_id_2021 if x is None else x
                    if x is not None:
                        kernel_at.append(len(flat))
                        kernel_ext.append(x)
        if e.tid != last_tid or e.pid != last_pid or device is not last_dev:
            last_dev, last_pid, last_tid = device, e.pid, e.tid
            tr = track((device, last_pid, last_tid))
        flat += (tr, ts, dur, nid, link)
    return PartRows(
        _columns(flat, kernel_at, kernel_ext, tables),
        tables.keys,
        tables.names,
        tables.infos,
        comm_ext,
    )


def _columns(
    flat: list[float], kernel_at: list[int], kernel_ext: list[int], tables: _Tables
) -> npt.NDArray[np.float64]:
    """The part's rows as COLUMNS, sorted by track (file order within one)."""
    c = np.fromiter(flat, dtype=np.float64, count=len(flat)).reshape(-1, _FLAT)
    a = np.full((len(c), len(COLUMNS)), -1.0)
    if not len(c):
        return a
    a[:, TRACK], a[:, START], a[:, NID] = c[:, 0], c[:, 1], c[:, 3]
    a[:, END] = c[:, 1] + np.maximum(c[:, 2], 0.0)
    nid = c[:, 3].astype(np.intp)
    a[:, CAT] = np.array(tables.cats, dtype=np.float64)[nid]
    links = np.array(tables.links, dtype=np.int8)[nid]
    op = links == _LINKS_OP
    a[op, INFO] = c[op, 4]
    call = (links == _LINKS_CALL) | (links == _LINKS_KERNEL)
    a[call, CORR] = c[call, 4]
    if kernel_at:
        a[np.array(kernel_at, dtype=np.intp) // _FLAT, EXT] = kernel_ext
    return a[np.argsort(a[:, TRACK], kind="stable")]
