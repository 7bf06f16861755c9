"""A Kineto session's timeline: one track per host thread and per device stream, per rank.

Why built beside the summary: reading a 2 GiB trace takes over a minute, so the summary's own
read (kineto/rank.py) hands each part's rows (kineto_rows.py, made in the Collector's own loop,
mostly in the decode workers) to a RankRows, which writes them to a spill file at once; when
the rank is read, its tracks are made one at a time from that file and written to the timeline
store (store.Writer), so the Timeline tab opens from the store without a second pass, and
neither step holds the events at once.
`read_session` does the same read alone, for a session whose summary came from the cache
without a store. Steps are the summary's own (kineto.steps.find_steps on the same Collector),
so a step's span is its step time.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tui_prof.model import Cancelled
from tui_prof.printable import printable
from tui_prof.profiles import heap
from tui_prof.profiles.discover import Session
from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.extras import Extras
from tui_prof.profiles.kineto.steps import Steps, find_steps
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.timeline import kineto_rows as kr
from tui_prof.profiles.timeline import store
from tui_prof.profiles.timeline.model import Source, StepSpan, Timeline, Track, make_track

# Unpacked JSON decoded at a time where this process reads alone (a quarter of
# stream.CHUNK_BYTES: less held per batch, no slower).
CHUNK_BYTES = 4 * 2**20


_TYPES = {
    kr.START: np.float64,
    kr.END: np.float64,
    kr.NID: np.int32,
    kr.CAT: np.int8,
    kr.EXT: np.int64,
    kr.CORR: np.int64,
    kr.INFO: np.int32,
}


class Names:
    """Name and input-text ids shared by every rank of a session (printable)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.infos: list[str] = []
        self.info_ids: dict[str, int] = {}

    @staticmethod
    def _map(local: list[str], ids: dict[str, int], out: list[str]) -> npt.NDArray[np.float64]:
        table = np.empty(len(local) + 1, dtype=np.float64)
        for j, name in enumerate(local):
            i = ids.get(name)
            if i is None:
                i = ids[name] = len(out)
                out.append(printable(name))
            table[j] = i
        table[-1] = -1.0  # a row's -1 (none) indexes this
        return table

    def map_names(self, local: list[str]) -> npt.NDArray[np.float64]:
        return self._map(local, self.ids, self.names)

    def map_infos(self, local: list[str]) -> npt.NDArray[np.float64]:
        return self._map(local, self.info_ids, self.infos)


class RankRows:
    """One rank's rows as the read hands them over (in file order), written to `spill` at once;
    `tracks()` makes its tracks from that file, one at a time."""

    def __init__(self, names: Names, spill: Path) -> None:
        self.names = names
        self.path = spill
        self.file = open(spill, "w+b")  # noqa: SIM115 - closed by close()
        self.reset()

    def reset(self) -> None:
        """Forget what was added (the read starts over)."""
        self.file.seek(0)
        self.file.truncate()
        self.keys: list[kr.TrackKey] = []
        self.key_ids: dict[kr.TrackKey, int] = {}
        self.pieces: list[list[tuple[int, int]]] = []  # per track: its row ranges in the file
        self.rows = 0
        self.comm_ext: set[int] = set()

    def add(self, part: kr.PartRows) -> None:
        self.comm_ext |= part.comm_ext
        a = part.rows
        if not len(a):
            return
        a[:, kr.NID] = self.names.map_names(part.names)[a[:, kr.NID].astype(np.intp)]
        a[:, kr.INFO] = self.names.map_infos(part.infos)[a[:, kr.INFO].astype(np.intp)]
        local = a[:, kr.TRACK].astype(np.intp)
        bounds = np.searchsorted(local, np.arange(len(part.keys) + 1)).tolist()
        for j, key in enumerate(part.keys):
            g = self.key_ids.get(key)
            if g is None:
                g = self.key_ids[key] = len(self.keys)
                self.keys.append(key)
                self.pieces.append([])
            if bounds[j + 1] > bounds[j]:
                self.pieces[g].append((self.rows + bounds[j], self.rows + bounds[j + 1]))
        self.file.write(np.ascontiguousarray(a).data)  # no copy of the part's rows
        self.rows += len(a)

    def close(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)

    def _order(self) -> list[int]:
        """Tracks as shown: host threads, then device streams, by group, busiest first."""
        counts = [sum(b - a for a, b in p) for p in self.pieces]
        labels = [_label(k) for k in self.keys]
        order = sorted(range(len(self.keys)), key=lambda k: (self.keys[k][0], *labels[k]))
        return sorted(order, key=lambda k: (self.keys[k][0], labels[k][0], -counts[k]))

    def tracks(self, comm_ext: set[int], cancel: threading.Event | None = None) -> Iterator[Track]:
        """Each track in turn, sorted by time, from the spill file: its pieces read one at a
        time (not mapped: mapped pages would count as this process's memory)."""
        self.file.flush()
        ext_ids = np.fromiter(comm_ext | self.comm_ext, dtype=np.int64)
        width = len(kr.COLUMNS)
        fd = self.file.fileno()
        for k in self._order():
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            device, _, _ = self.keys[k]
            n = sum(b - a for a, b in self.pieces[k])
            cols = {c: np.empty(n, dtype=t) for c, t in _TYPES.items()}
            at = 0
            for a, b in self.pieces[k]:
                piece = np.frombuffer(os.pread(fd, (b - a) * width * 8, a * width * 8))
                piece = piece.reshape(b - a, width)
                for c, col in cols.items():
                    col[at : at + b - a] = piece[:, c]
                at += b - a
            cat = cols[kr.CAT]
            if device and len(ext_ids):
                cat[(cat == kr.DEVICE_COMPUTE) & np.isin(cols[kr.EXT], ext_ids)] = kr.COLLECTIVES
            group, name = _label(self.keys[k])
            yield make_track(
                name,
                "device" if device else "host",
                group,
                cols[kr.START],
                cols[kr.END],
                cols[kr.NID],
                cat,
                cols[kr.CORR],
                cols[kr.INFO],
            )
            del cols, cat


def _label(key: kr.TrackKey) -> tuple[str, str]:
    """(group, name) of a track."""
    device, pid, tid = key
    if device:
        stream = str(tid) if str(tid).startswith("stream") else f"stream {tid}"
        return printable(f"GPU {pid}"), printable(f"GPU {pid} {stream}")
    return printable(f"host {pid}"), printable(f"thread {tid}")


def _spans(steps: Steps | None) -> list[StepSpan]:
    if steps is None:
        return []
    return [StepSpan(n, s, e) for n, (s, e) in zip(steps.numbers, steps.spans, strict=True)]


class SessionRows:
    """A session's timeline built as its traces are read: each rank's rows spilled to disk as
    read (`rank`, `add_rank`), its tracks made and written to the store at `finish`, after the
    summary let go of what it held; kept in memory where the cache cannot be written."""

    def __init__(self, session: Session) -> None:
        self.names = Names()
        self.writer: store.Writer | None
        try:
            self.writer = store.Writer(session)
            self.spill_dir = self.writer.tmp
        except OSError:
            self.writer = None
            self.spill_dir = Path(tempfile.mkdtemp(prefix="tuiprof-timeline-"))
        self.pending: list[tuple[str, RankRows, list[StepSpan]]] = []
        self.stored = False
        self.ranks = 0

    def rank(self) -> RankRows:
        self.ranks += 1
        return RankRows(self.names, self.spill_dir / f"rank{self.ranks}.rows")

    def add_rank(self, label: str, rows: RankRows, steps: Steps | None) -> None:
        """A rank read: its rows (their collectives' ids in `rows.comm_ext`) and steps."""
        self.pending.append((label, rows, _spans(steps)))

    def finish(self, cancel: threading.Event | None = None) -> Timeline | None:
        """Make every rank's tracks, one at a time, and store them; None where they went to
        the store, else the timeline itself (kept in memory). Cancelled between two tracks."""
        gc.collect()  # the summary's read leaves cycles holding ≈ 180 MB of a 2 GiB trace's
        heap.release()
        kept = []
        for label, rows, spans in self.pending:
            if self.writer is not None:
                self.writer.source(label, spans, rows.tracks(rows.comm_ext, cancel))
            else:
                kept.append(Source(label, list(rows.tracks(rows.comm_ext, cancel)), spans))
            rows.close()
            heap.release()
        if self.writer is None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
            return Timeline(self.names.names, kept, self.names.infos)
        self.writer.finish(self.names.names, self.names.infos)
        self.stored = True
        return None

    def abandon(self) -> None:
        """Drop what is not stored (spill files, a half-written store)."""
        for _, rows, _ in self.pending:
            rows.close()
        self.pending = []
        if self.writer is not None and not self.stored:
            self.writer.abandon()
        elif self.writer is None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)


def read_rank(
    path: Path,
    label: str,
    build: SessionRows,
    cancel: threading.Event | None = None,
    progress: Callable[[float], object] | None = None,
) -> None:
    """One rank's trace read for its rows and steps alone (the decode workers as the summary
    has them), its tracks handed to `build`."""
    from tui_prof.profiles.kineto.workers import read

    stream = TraceStream(path, cancel=cancel, progress=progress, chunk_bytes=CHUNK_BYTES)
    rows = build.rank()
    try:
        c, _ = read(stream, Collector(), Extras(), rows=rows)
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        dev = c.device()
        heap.release()  # the column chunks device() joined
        steps = find_steps(c, dev)
        rows.comm_ext |= c.comm_ext
        del c, dev  # the summary's columns, before the tracks are built
    except BaseException:
        rows.close()
        raise
    build.add_rank(label, rows, steps)


def read_session(
    session: Session,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
) -> Timeline | None:
    """Read the session's traces into the store; None where it was stored (load it from
    there), else the timeline (the cache cannot be written)."""
    build = SessionRows(session)
    n = len(session.hosts)
    try:
        for i, h in enumerate(session.hosts):

            def sub(f: float, i: int = i, host: str = h.host) -> None:
                if progress is not None:
                    progress((i + f) / n, f"reading {host}")

            read_rank(h.path, h.host, build, cancel, sub)
        return build.finish(cancel)
    finally:
        build.abandon()
