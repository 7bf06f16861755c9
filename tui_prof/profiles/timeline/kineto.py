"""A Kineto session's timeline: one track per host thread and per device stream, per rank.

Why its own pass: the summary's Collector keeps only what the breakdown needs (no stream of a
kernel); this pass keeps, per event, its track, times, name id and the breakdown category the
summary gives it (rank.py's rules: collectives by name or by their op's external id, runtime
calls that wait for the device as `other`, DataLoader spans as `input`). Steps are the summary's
own (kineto.steps.find_steps on the same Collector), so a step's span is its step time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tui_prof.model import Cancelled
from tui_prof.printable import printable
from tui_prof.profiles.discover import Session
from tui_prof.profiles.kineto import heap
from tui_prof.profiles.kineto import names as knames
from tui_prof.profiles.kineto.collect import COMM_OPS, STEP_PREFIX, Collector, is_dataloader
from tui_prof.profiles.kineto.events import Args, Event, Kind, kind_of, raw_list
from tui_prof.profiles.kineto.rank import WAIT_CALL
from tui_prof.profiles.kineto.steps import find_steps
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.timeline.model import (
    CATEGORY_CODE,
    Source,
    StepSpan,
    Timeline,
    Track,
    make_track,
)

# Unpacked JSON decoded at a time: the decoded batch is the read's peak, and this pass keeps
# less per event than the summary's (a quarter of stream.CHUNK_BYTES: 282 -> 176 MB peak on a
# 259 MB trace, no slower).
CHUNK_BYTES = 4 * 2**20
_DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
_HOST_KINDS = (Kind.OP, Kind.ANNOTATION, Kind.DATALOADER)  # no launch ids: only calls link
_KEPT = (Kind.OP, Kind.ANNOTATION, Kind.RUNTIME, Kind.RUNTIME_2021, Kind.DATALOADER, *_DEVICE_KINDS)
HOST_COMPUTE = CATEGORY_CODE["host_compute"]
COLLECTIVES = CATEGORY_CODE["device_collectives"]
DEVICE_COMPUTE = CATEGORY_CODE["device_compute"]


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


class _Names:
    """Name ids shared by every rank of a session, with each name's category per kind, and
    the ids of ops' input shapes and dtypes (one text per distinct pair of args)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.infos: list[str] = []
        self.info_ids: dict[tuple[bytes, tuple[str, ...] | None], int] = {}

    def info(self, args: Args) -> int:
        key = (bytes(args.input_dims), args.input_type)
        i = self.info_ids.get(key)
        if i is None:
            text = shapes_text(raw_list(args.input_dims), args.input_type)
            i = -1
            if text:
                i = len(self.infos)
                self.infos.append(printable(text))
            self.info_ids[key] = i
        return i

    def id(self, name: str) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(printable(name))
        return i


def _category(kind: Kind, name: str) -> int:
    if kind == Kind.KERNEL:
        return COLLECTIVES if knames.is_collective(name) else DEVICE_COMPUTE
    if kind in (Kind.MEMCPY, Kind.MEMSET):
        return CATEGORY_CODE["device_to_device"]
    if kind in (Kind.RUNTIME, Kind.RUNTIME_2021):
        return CATEGORY_CODE["other" if WAIT_CALL.search(name) else "kernel_launch"]
    if kind == Kind.DATALOADER or is_dataloader(name):
        return CATEGORY_CODE["input"]
    if name in COMM_OPS:
        return COLLECTIVES
    return HOST_COMPUTE


_UNSEEN: Any = object()  # an event kind and name not met before


class _Rows:
    """The kept events as compact numpy columns, one chunk per batch, split per track at the
    end; the per-event loop does one dict lookup for what an event is (kind, name id,
    category, or skipped) and one for its track."""

    COLUMNS = (
        ("track", np.int32),
        ("start", np.float64),
        ("end", np.float64),
        ("nid", np.int32),
        ("cat", np.int8),
        ("ext", np.int64),
        ("corr", np.int64),
        ("info", np.int32),
    )

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.keys: list[tuple[bool, int | str, int | str]] = []
        self.key_ids: dict[tuple[bool, int | str, int | str], int] = {}
        self.what: dict[tuple[str, str], tuple[Kind, int, int] | None] = {}
        # per track: its events' column pieces, one per batch (no whole-profile copy to split)
        self.parts: list[list[tuple[npt.NDArray[Any], ...]]] = []
        self.comm_ext: set[int] = set()

    def _what(self, cat: str, name: str) -> tuple[Kind, int, int] | None:
        kind = kind_of(cat)
        if kind not in _KEPT:
            return None
        if kind == Kind.ANNOTATION and not (is_dataloader(name) or name in COMM_OPS):
            return None  # ProfilerStep#N is the step itself; other annotations nest ops
        if kind == Kind.OP and name.startswith(STEP_PREFIX):
            return None  # the 2021 traces' ProfilerStep#N, an `Operator`: the step itself
        return kind, self.names.id(name), _category(kind, name)

    def _track(self, key: tuple[bool, int | str, int | str]) -> int:
        i = self.key_ids[key] = len(self.keys)
        self.keys.append(key)
        self.parts.append([])
        return i

    def add(self, batch: list[Event]) -> None:
        what, key_ids, info_of = self.what, self.key_ids, self.names.info
        flat: list[float] = []
        for e in batch:
            ts, dur = e.ts, e.dur
            if e.ph != "X" or ts is None or dur is None or ts != ts or dur != dur:
                continue
            k = (e.cat, e.name)
            w = what.get(k, _UNSEEN)
            if w is _UNSEEN:
                w = what[k] = self._what(e.cat, e.name)
            if w is None:
                continue
            kind, nid, cat = w
            ext = corr = info = -1
            args = e.args
            if args is not None:
                if kind == Kind.OP or kind == Kind.ANNOTATION:
                    if args.input_dims or args.input_type:
                        info = info_of(args)
                    if cat == COLLECTIVES:
                        x = args.external_id
                        x = args.external_id_2021 if x is None else x
                        if x is not None:
                            self.comm_ext.add(x)
                elif kind not in _HOST_KINDS:
                    if args.correlation is not None:
                        corr = args.correlation
                    if kind == Kind.KERNEL:
                        x = args.external_id
                        x = args.external_id_2021 if x is None else x
                        ext = -1 if x is None else x
            key = (kind in _DEVICE_KINDS, e.pid, e.tid)
            tr = key_ids.get(key)
            if tr is None:
                tr = self._track(key)
            flat += (tr, ts, ts + (dur if dur > 0 else 0.0), nid, cat, ext, corr, info)
        if flat:
            a = np.array(flat, dtype=np.float64).reshape(-1, len(self.COLUMNS))
            which = a[:, 0].astype(np.int32)
            order = np.argsort(which, kind="stable")
            a = a[order]
            bounds = np.searchsorted(which[order], np.arange(len(self.keys) + 1))
            for t in np.flatnonzero(np.diff(bounds)).tolist():
                piece = a[bounds[t] : bounds[t + 1]]
                self.parts[t].append(
                    tuple(piece[:, j].astype(t) for j, (_, t) in enumerate(self.COLUMNS[1:], 1))
                )

    def columns(self, k: int) -> dict[str, npt.NDArray[Any]]:
        """Track k's events by column, in file order; its pieces are let go."""
        parts, self.parts[k] = self.parts[k], []
        return {
            name: np.concatenate([p[j - 1] for p in parts]) if parts else np.zeros(0, t)
            for j, (name, t) in enumerate(self.COLUMNS)
            if j > 0
        }


def _tracks(r: _Rows, comm_ext: set[int]) -> list[Track]:
    out: list[Track] = []
    ext_ids = np.fromiter(comm_ext | r.comm_ext, dtype=np.int64)
    for k, (device, pid, tid) in enumerate(r.keys):
        cols = r.columns(k)
        cat = cols["cat"]
        if device and len(ext_ids):
            cat[(cat == DEVICE_COMPUTE) & np.isin(cols["ext"], ext_ids)] = COLLECTIVES
        if device:
            stream = str(tid) if str(tid).startswith("stream") else f"stream {tid}"
            name, group = f"GPU {pid} {stream}", f"GPU {pid}"
        else:
            name, group = f"thread {tid}", f"host {pid}"
        out.append(
            make_track(
                name,
                "device" if device else "host",
                group,
                cols["start"],
                cols["end"],
                cols["nid"],
                cat,
                cols["corr"],
                cols["info"],
            )
        )
    out.sort(key=lambda t: (t.kind == "device", t.group, str(t.name)))
    out.sort(key=lambda t: (t.kind == "device", t.group, -len(t.start)))
    return out


def read_rank(
    path: Path,
    label: str,
    names: _Names,
    cancel: threading.Event | None = None,
    progress: Callable[[float], object] | None = None,
) -> Source:
    """One rank's trace: its tracks and the summary's steps."""
    stream = TraceStream(path, cancel=cancel, progress=progress, chunk_bytes=CHUNK_BYTES)
    c = Collector()
    rows = _Rows(names)
    for batch in stream.batches():
        c.add(batch)
        rows.add(batch)
        if cancel is not None and cancel.is_set():
            raise Cancelled()
    dev = c.device()
    heap.release()  # the column chunks device() joined
    steps = find_steps(c, dev)
    spans = []
    if steps is not None:
        spans = [StepSpan(n, s, e) for n, (s, e) in zip(steps.numbers, steps.spans, strict=True)]
    comm_ext = c.comm_ext
    del c, dev, steps  # the summary's columns, before the tracks are built beside the rows
    heap.release()
    tracks = _tracks(rows, comm_ext)
    heap.release()  # the rows' per-batch pieces
    return Source(label, tracks, spans)


def read_session(
    session: Session,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
) -> Timeline:
    names = _Names()
    sources = []
    n = len(session.hosts)
    for i, h in enumerate(session.hosts):

        def sub(f: float, i: int = i, host: str = h.host) -> None:
            if progress is not None:
                progress((i + f) / n, f"reading {host}")

        sources.append(read_rank(h.path, h.host, names, cancel, sub))
    return Timeline(names.names, sources, names.infos)
