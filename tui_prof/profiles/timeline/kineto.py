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

import numpy as np

from tui_prof.model import Cancelled
from tui_prof.printable import printable
from tui_prof.profiles.discover import Session
from tui_prof.profiles.kineto import names as knames
from tui_prof.profiles.kineto.collect import COMM_OPS, Collector, is_dataloader
from tui_prof.profiles.kineto.events import Event, Kind, kind_of
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

_DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
_HOST_KINDS = (Kind.OP, Kind.ANNOTATION, Kind.DATALOADER)  # no launch ids: only calls link
_KEPT = (Kind.OP, Kind.ANNOTATION, Kind.RUNTIME, Kind.RUNTIME_2021, Kind.DATALOADER, *_DEVICE_KINDS)
HOST_COMPUTE = CATEGORY_CODE["host_compute"]
COLLECTIVES = CATEGORY_CODE["device_collectives"]
DEVICE_COMPUTE = CATEGORY_CODE["device_compute"]


class _Names:
    """Name ids shared by every rank of a session, with each name's category per kind."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ids: dict[str, int] = {}

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


class _Rows:
    """Per track key: flat lists of start, end, name id, category, external id."""

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.rows: dict[tuple[bool, int | str, int | str], list[float]] = {}
        self.cats: dict[tuple[Kind, int], int] = {}

    def add(self, batch: list[Event]) -> None:
        rows, cats, nid_of = self.rows, self.cats, self.names.id
        for e in batch:
            if e.ph != "X" or e.ts is None or e.dur is None or e.ts != e.ts or e.dur != e.dur:
                continue
            kind = kind_of(e.cat)
            if kind not in _KEPT:
                continue
            if kind == Kind.ANNOTATION and not (is_dataloader(e.name) or e.name in COMM_OPS):
                continue  # ProfilerStep#N is the step itself; other annotations nest ops
            nid = nid_of(e.name)
            cat = cats.get((kind, nid))
            if cat is None:
                cat = cats[(kind, nid)] = _category(kind, e.name)
            ext = -1
            corr = -1
            if kind not in _HOST_KINDS and e.args is not None and e.args.correlation is not None:
                corr = e.args.correlation
            if kind == Kind.KERNEL and e.args is not None:
                x = (
                    e.args.external_id
                    if e.args.external_id is not None
                    else e.args.external_id_2021
                )
                ext = -1 if x is None else x
            key = (kind in _DEVICE_KINDS, e.pid, e.tid)
            row = rows.get(key)
            if row is None:
                row = rows[key] = []
            row += (e.ts, e.ts + max(e.dur, 0.0), nid, cat, ext, corr)


def _tracks(r: _Rows, comm_ext: set[int]) -> list[Track]:
    out: list[Track] = []
    ext_ids = np.fromiter(comm_ext, dtype=np.float64, count=len(comm_ext))
    for (device, pid, tid), flat in sorted(
        r.rows.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), str(kv[0][2]))
    ):
        a = np.array(flat, dtype=np.float64).reshape(-1, 6)
        cat = a[:, 3].astype(np.int8)
        if device and len(ext_ids):
            cat[(cat == DEVICE_COMPUTE) & np.isin(a[:, 4], ext_ids)] = COLLECTIVES
        if device:
            name, group = f"GPU {pid} stream {tid}", f"GPU {pid}"
        else:
            name, group = f"thread {tid}", f"host {pid}"
        out.append(
            make_track(
                name,
                "device" if device else "host",
                group,
                a[:, 0],
                a[:, 1],
                a[:, 2].astype(np.int32),
                cat,
                a[:, 5].astype(np.int64),
            )
        )
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
    stream = TraceStream(path, cancel=cancel, progress=progress)
    c = Collector()
    rows = _Rows(names)
    for batch in stream.batches():
        c.add(batch)
        rows.add(batch)
        if cancel is not None and cancel.is_set():
            raise Cancelled()
    dev = c.device()
    steps = find_steps(c, dev)
    spans = []
    if steps is not None:
        spans = [StepSpan(n, s, e) for n, (s, e) in zip(steps.numbers, steps.spans, strict=True)]
    return Source(label, _tracks(rows, c.comm_ext), spans)


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
    return Timeline(names.names, sources)
