"""A Kineto trace's events → the timeline's rows: what each kept event is, on which track.

Why made in the summary's own loop: the summary's read folds its parts in worker processes
(kineto/workers.py), and a second pass over each part's events for these rows cost as much CPU
as the Collector's own (≈ 0.6 µs an event; benchmarks/README.md, section 11). Most of a row is
in the Collector's columns already: ops and runtime calls are its host rows, kernels its kernel
rows. So `Collector.add` (kineto/collect.py), with `index` set, notes in a RowMaker only what
they lack (an op's input text, a kernel's stream and where it came among the host rows) and the
rare events it keeps no row of (copies, DataLoader and collective spans), and `take` makes a
batch's rows with numpy: the three kinds merged back into file order by where each came. A
batch's rows carry their own small tables (track keys, names, input texts), numbered from 0 in
the order the batch first names them; the reading process maps them to the session's ids
(timeline/kineto.py) in file order. Categories are the summary's (rank.py's rules: collectives
by name or by their op's external id, runtime calls that wait for the device as `other`,
DataLoader spans as `input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tui_prof.profiles.kineto import names as knames
from tui_prof.profiles.kineto import roles
from tui_prof.profiles.kineto.columns import IS_OP
from tui_prof.profiles.kineto.events import Args, Kind, raw_list
from tui_prof.profiles.timeline.model import CATEGORY_CODE

DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
HOST_COMPUTE = CATEGORY_CODE["host_compute"]
COLLECTIVES = CATEGORY_CODE["device_collectives"]
DEVICE_COMPUTE = CATEGORY_CODE["device_compute"]
# The columns of a row (float64: ids and launch ids are exact below 2**53).
COLUMNS = ("track", "start", "end", "nid", "cat", "ext", "corr", "info")
TRACK, START, END, NID, CAT, EXT, CORR, INFO = range(len(COLUMNS))
# An event's code: its name's id * CODE + its kind, + OWN where the id is the RowMaker's own
# (names the Collector does not number: copies', DataLoader spans')
CODE, OWN = 32, 16
UNSEEN: Any = object()  # no track yet: differs from every pid and tid

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
    if kind == Kind.DATALOADER or roles.is_dataloader(name):
        return CATEGORY_CODE["input"]
    if name in roles.COMM_OPS:
        return COLLECTIVES
    return HOST_COMPUTE


def shown(kind: int, name: str) -> bool:
    """Whether the timeline draws an event of this kind and name (the Collector's loop asks
    its name's ROLE_* bits instead): not ProfilerStep#N, which is the step itself, nor an
    annotation that only nests ops."""
    role = roles.roles(name)
    if kind == Kind.OP:
        return not role & roles.ROLE_STEP_NAME
    if kind == Kind.ANNOTATION:
        return bool(role & roles.SHOWN_ANNOTATION)
    return kind in (Kind.RUNTIME, Kind.RUNTIME_2021, Kind.DATALOADER, *DEVICE_KINDS)


@dataclass
class PartRows:
    """One part's kept events: `rows` (n × COLUMNS, sorted by track, file order within one),
    with the part's own track keys, names and input texts that its ids index."""

    rows: npt.NDArray[np.float64]
    keys: list[TrackKey] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    comm_ext: set[int] = field(default_factory=set)  # external ids of collective ops


class RowMaker:
    """What the Collector's loop notes for one batch's rows beyond its own columns, and the
    tables it looks up. Ops and runtime calls (most events) are the Collector's host rows, and
    kernels its kernel rows: the loop notes only an op's input text and a kernel's stream, and
    where the kernel came among the host rows; the rare rest (copies, DataLoader spans,
    collective annotations) goes whole to `side`, with where it came."""

    def __init__(self) -> None:
        self.keys: list[TrackKey] = []
        self.key_ids: dict[TrackKey, float] = {}
        self.infos: list[str] = []
        self.info_ids: dict[tuple[bytes, tuple[str, ...] | None], float] = {}
        self.own: list[str] = []  # names numbered here (CODE, OWN)
        self.own_ids: dict[str, int] = {}
        self.op_info: list[float] = []  # per op row of the Collector's: its input text's id
        self.kernels: list[float] = []  # per kernel row: its track, then len(host) (the loop's)
        self.side: list[float] = []  # SIDE numbers per event
        # where an event the timeline would draw but without a time was met, and its code:
        # its name keeps its place in the names' order
        self.untimed: list[int] = []  # len(host), len(kernels), len(side), code

    def track(self, key: TrackKey) -> float:
        i = self.key_ids.get(key)
        if i is None:
            i = self.key_ids[key] = float(len(self.keys))
            self.keys.append(key)
        return i

    def info(self, args: Args | None) -> float:
        """The id of an op's input text (-1 where it says nothing), made once per signature."""
        if args is None:
            return -1.0
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

    def name(self, name: str, kind: int) -> int:
        """The code of an event whose name the Collector does not number."""
        i = self.own_ids.get(name)
        if i is None:
            i = self.own_ids[name] = len(self.own)
            self.own.append(name)
        return i * CODE + OWN + kind

    def skip_untimed(self, kind: int, name: str, host: int, kernels: int) -> None:
        if shown(kind, name):
            self.untimed += (host, kernels, len(self.side), self.name(name, kind))


SIDE = 7  # per side event: start, end, code, link, track, len(host), len(kernels) (the loop's)
HOST_WIDTH, KERNEL_WIDTH = 6, 8  # numbers per row in the Collector's host and kernel lists
_SHIFT = 21  # bits per part of an event's place in the batch (_in_file_order)


def _in_file_order(
    which: npt.NDArray[np.intp], place: npt.NDArray[np.int64]
) -> npt.NDArray[np.intp]:
    """`which` events sorted by where they came in the batch: `place` (n × 3) says after how
    many host rows, kernels and side events (twice that, plus one for such a row itself)."""
    p = place[which]
    if len(p) and int(p.max()) < 1 << _SHIFT:  # as one number: a sort of three sorted runs
        key = (p[:, 0] << (2 * _SHIFT)) | (p[:, 1] << _SHIFT) | p[:, 2]
        return which[np.argsort(key, kind="stable")]
    return which[np.lexsort((p[:, 2], p[:, 1], p[:, 0]))]


def take(
    m: RowMaker,
    host: tuple[npt.NDArray[Any], ...] | None,
    kernels: npt.NDArray[np.float64] | None,
    names: list[str],
    role_of: list[int],
    thread_keys: list[tuple[Any, Any]],
    comm_ext: set[int],
) -> PartRows:
    """One batch's rows: the Collector's host and kernel rows of the batch (`host`,
    `kernels`; None where none), what the loop noted in `m`, and the Collector's names (which
    the codes index), their roles, its threads and its collective ops' external ids so far."""
    nh = 0 if host is None else len(host[1])
    nk = 0 if kernels is None else len(kernels)
    side = np.array(m.side, dtype=np.float64).reshape(-1, SIDE)
    ns = len(side)
    untimed = np.array(m.untimed, dtype=np.int64).reshape(-1, 4)
    n = nh + nk + ns
    # the columns, each of host rows, then kernels, then side events (-1: none)
    start, end, track = np.empty(n), np.empty(n), np.empty(n, dtype=np.intp)
    corr, ext, info = np.full(n, -1.0), np.full(n, -1.0), np.full(n, -1.0)
    code = np.empty(n + len(untimed), dtype=np.int64)
    place = np.zeros((n + len(untimed), 3), dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    if host is not None:
        thread, start[:nh], end[:nh], nid, flags, corr[:nh] = host
        op = (flags & IS_OP) != 0
        info[:nh][op] = m.op_info
        thread_track = np.array([m.track((False, *k)) for k in thread_keys], dtype=np.intp)
        track[:nh] = thread_track[thread]
        code[:nh] = nid.astype(np.int64) * CODE + np.where(op, Kind.OP, Kind.RUNTIME)
        step_name = (np.array(role_of, dtype=np.int64)[nid] & roles.ROLE_STEP_NAME) != 0
        keep[:nh] = ~(op & step_name)
        place[:nh, 0] = 2 * np.arange(nh) + 1
    if kernels is not None:
        k = np.array(m.kernels, dtype=np.float64).reshape(-1, 2)
        at = slice(nh, nh + nk)
        start[at], end[at], track[at] = kernels[:, 0], kernels[:, 1], k[:, 0]
        corr[at], ext[at] = kernels[:, 3], kernels[:, 4]
        code[at] = kernels[:, 2].astype(np.int64) * CODE + Kind.KERNEL
        place[at, 0] = 2 * (k[:, 1].astype(np.int64) // HOST_WIDTH)
        place[at, 1] = 2 * np.arange(nk) + 1
    if ns:
        at = slice(nh + nk, n)
        start[at], end[at], track[at] = side[:, 0], side[:, 1], side[:, 4]
        c = side[:, 2].astype(np.int64)
        op = ((c % OWN) == Kind.OP) | ((c % OWN) == Kind.ANNOTATION)  # a link: input text
        info[at] = np.where(op, side[:, 3], -1.0)
        corr[at] = np.where(op, -1.0, side[:, 3])  # else a correlation id (-1: DataLoader)
        code[at] = c
        place[at, 0] = 2 * (side[:, 5].astype(np.int64) // HOST_WIDTH)
        place[at, 1] = 2 * (side[:, 6].astype(np.int64) // KERNEL_WIDTH)
        place[at, 2] = 2 * np.arange(ns) + 1
    if len(untimed):
        code[n:] = untimed[:, 3]
        place[n:] = 2 * (untimed[:, :3] // (HOST_WIDTH, KERNEL_WIDTH, 1))
    # every event the timeline draws, and the untimed ones' names, in file order
    seen = _in_file_order(np.concatenate([np.flatnonzero(keep), np.arange(n, len(code))]), place)
    timed = seen[seen < n]
    if not len(timed):
        return PartRows(np.zeros((0, len(COLUMNS))), [], [], m.infos, set(comm_ext))
    # names and tracks numbered in the order the batch first names them, as they were read
    order, first = _first_seen(code[seen])
    local = np.empty(len(first), dtype=np.float64)  # per code: its name's id in the part
    local[order] = np.arange(len(order))
    cats = np.empty(len(first), dtype=np.float64)
    part_names = []
    for j in order.tolist():
        kind, name = _decode(j, names, m.own)
        cats[j] = category(kind, name)
        part_names.append(name)
    tr = track[timed]
    change = np.flatnonzero(tr[1:] != tr[:-1]) + 1  # a track's first row is one of these
    tracks, _ = _first_seen(tr[np.concatenate([[0], change])])
    # each row's track id in the part: int16 where it fits, whose stable sort is a radix sort
    ids = np.empty(len(m.keys), dtype=np.int16 if len(m.keys) < 2**15 else np.int32)
    ids[tracks] = np.arange(len(tracks))
    local_track = ids[tr]
    by_track = np.argsort(local_track, kind="stable")  # file order within a track
    rows = timed[by_track]
    out = np.empty((len(rows), len(COLUMNS)))
    out[:, TRACK], out[:, START], out[:, END] = local_track[by_track], start[rows], end[rows]
    nid = code[rows]
    out[:, NID], out[:, CAT] = local[nid], cats[nid]
    out[:, EXT], out[:, CORR], out[:, INFO] = ext[rows], corr[rows], info[rows]
    keys = [m.keys[j] for j in tracks.tolist()]
    return PartRows(out, keys, part_names, m.infos, set(comm_ext))


def _first_seen(ids: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """The distinct values of `ids` (small ints) in the order they first come, and, per value up
    to the largest, where it first comes (len(ids) where it does not)."""
    first = np.full(int(ids.max()) + 1 if len(ids) else 0, len(ids), dtype=np.int64)
    np.minimum.at(first, ids, np.arange(len(ids)))
    there = np.flatnonzero(first < len(ids))
    return there[np.argsort(first[there])], first


def _decode(code: int, names: list[str], own: list[str]) -> tuple[Kind, str]:
    """An event's kind and name from its code."""
    kind = code % CODE
    return Kind(kind % OWN), (own if kind >= OWN else names)[code // CODE]
