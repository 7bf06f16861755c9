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
_LINKS_OP, _LINKS_CALL, _LINKS_KERNEL = 1, 2, 3  # which args an event's row takes


class _Tables:
    """A part's own numbering: tracks, names, input texts; what each (category, name) is."""

    def __init__(self) -> None:
        self.keys: list[TrackKey] = []
        self.key_ids: dict[TrackKey, int] = {}
        self.names: list[str] = []
        self.infos: list[str] = []
        self.info_ids: dict[tuple[bytes, tuple[str, ...] | None], int] = {}
        # per category, per name: (on a device, name id, category, which args) or None
        self.what: dict[str, dict[str, tuple[bool, int, int, int] | None]] = {}

    def classify(self, cat: str, name: str) -> tuple[bool, int, int, int] | None:
        kind = kind_of(cat)
        w: tuple[bool, int, int, int] | None = None
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
            w = (kind in DEVICE_KINDS, len(self.names) - 1, c, links)
        self.what.setdefault(cat, {})[name] = w
        return w

    def info(self, args: Args) -> int:
        key = (bytes(args.input_dims), args.input_type)
        i = self.info_ids.get(key)
        if i is None:
            text = shapes_text(raw_list(args.input_dims), args.input_type)
            i = -1
            if text:
                i = len(self.infos)
                self.infos.append(text)
            self.info_ids[key] = i
        return i

    def track(self, key: TrackKey) -> int:
        i = self.key_ids.get(key)
        if i is None:
            i = self.key_ids[key] = len(self.keys)
            self.keys.append(key)
        return i


def rows_of(batch: list[Event]) -> PartRows:
    """The timeline's rows of one part's events: per event, one dict lookup for what it is
    (by category, then name) and, when its thread or stream is not the previous event's, one
    for its track."""
    tables = _Tables()
    what, info_of, track = tables.what, tables.info, tables.track
    comm_ext: set[int] = set()
    flat: list[float] = []
    last_dev, last_pid, last_tid = False, _UNSEEN, _UNSEEN
    tr = -1
    by_name: dict[str, tuple[bool, int, int, int] | None] = {}
    last_cat: str | None = None
    for e in batch:
        if e.ph != "X":
            continue
        if e.cat != last_cat:
            last_cat = e.cat
            by_name = what.get(last_cat) or what.setdefault(last_cat, {})
        w = by_name.get(e.name, _UNSEEN)
        if w is _UNSEEN:
            w = tables.classify(e.cat, e.name)
        if w is None:
            continue
        ts, dur = e.ts, e.dur
        if ts is None or dur is None or ts != ts or dur != dur:
            continue
        device, nid, cat, links = w
        ext = corr = info = -1
        args = e.args
        if args is not None and links:
            if links == _LINKS_OP:
                if args.input_dims or args.input_type:
                    info = info_of(args)
                if cat == COLLECTIVES:
                    x = args.external_id
                    x = args.external_id_2021 if x is None else x
                    if x is not None:
                        comm_ext.add(x)
            else:
                if args.correlation is not None:
                    corr = args.correlation
                if links == _LINKS_KERNEL:
                    x = args.external_id
                    x = args.external_id_2021 if x is None else x
                    ext = -1 if x is None else x
        if e.tid != last_tid or e.pid != last_pid or device is not last_dev:
            last_dev, last_pid, last_tid = device, e.pid, e.tid
            tr = track((device, last_pid, last_tid))
        flat += (tr, ts, ts + (dur if dur > 0 else 0.0), nid, cat, ext, corr, info)
    a = np.array(flat, dtype=np.float64).reshape(-1, len(COLUMNS))
    if len(a):
        a = a[np.argsort(a[:, TRACK], kind="stable")]
    return PartRows(a, tables.keys, tables.names, tables.infos, comm_ext)
