"""A session's timeline kept on disk beside the summary cache, and read back memory-mapped.

Why: reading a large profile's events takes as long as its summary, and holding them all costs
hundreds of MB. Stored once (by the summary's own read of a Kineto trace, or the timeline's
first read) as one flat file per source and column (numpy .npy, every track's events one after
another) plus a small JSON index (names, sources, steps, each track's offset and length),
it is opened again in well under a second and mapped, not loaded: cutting a step out reads
only the pages of that step's events (`searchsorted` on the mapped starts). Keyed like the
summary (cache.cache_key: every host file's path, size and mtime, tuiprof's version); a store
that cannot be read or written is skipped silently, as the summary cache is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tui_prof.profiles import cache
from tui_prof.profiles.discover import Session
from tui_prof.profiles.timeline import INDEX_ENV
from tui_prof.profiles.timeline.model import Source, StepSpan, Timeline, Track

VARIANT = "timeline-2"


def index_while_reading() -> bool:
    """Whether a summary should index the events it reads (INDEX_ENV: the TUI's)."""
    return os.environ.get(INDEX_ENV) == "1"


COLUMNS = {
    "start": np.float64,
    "end": np.float64,
    "nid": np.int32,
    "cat": np.int8,
    "corr": np.int64,
    "pcat": np.int8,
    "info": np.int32,
}


def _dir(session: Session) -> Path:
    return cache.cache_dir() / f"{cache.cache_key(session, VARIANT)}.timeline"


def _column(t: Track, name: str) -> Any:
    a = getattr(t, name)
    if len(a) == len(t.start):
        return a
    return np.full(len(t.start), -1, dtype=COLUMNS[name])  # a column the track lacks


TMP_PREFIX = "timeline-"  # a store being written: `timeline-XXXX.tmp` in the cache directory
STALE_S = 6 * 3600.0  # one untouched this long was left by a process that was killed


def sweep(where: Path, now: float | None = None) -> None:
    """Remove stores left half-written (and their spill files, hundreds of MB for a large
    trace) by a process killed while it read: those untouched for STALE_S."""
    now = time.time() if now is None else now
    with contextlib.suppress(OSError):
        for d in where.glob(f"{TMP_PREFIX}*.tmp"):
            with contextlib.suppress(OSError):
                if d.is_dir() and now - max(f.stat().st_mtime for f in [d, *d.iterdir()]) > STALE_S:
                    shutil.rmtree(d, ignore_errors=True)


class Writer:
    """A store written one source at a time, each source's tracks one at a time, into a
    temporary directory that replaces the store at `finish` (a half-written store is never
    read). Each source's columns are files of their own (`{i}.start.npy`, …), filled track by
    track as it comes, so writing never holds a source's events at once. Raises OSError where
    the cache cannot be written."""

    def __init__(self, session: Session) -> None:
        self.final = _dir(session)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        sweep(self.final.parent)
        self.tmp = Path(tempfile.mkdtemp(dir=self.final.parent, prefix=TMP_PREFIX, suffix=".tmp"))
        self.sources: list[dict[str, Any]] = []

    def source(
        self,
        name: str,
        steps: list[StepSpan],
        tracks: Iterable[Track],
        order: Callable[[Track], Any] | None = None,
    ) -> None:
        """One source: its tracks, appended to its column files as `tracks` yields them (one
        at a time; written, not mapped: mapped pages would count as the writer's memory),
        listed in the index as they come or sorted by `order` (a track is found by its
        offset, so the list's order is free)."""
        i = len(self.sources)
        raw = {c: open(self.tmp / f"{i}.{c}.raw", "wb") for c in COLUMNS}  # noqa: SIM115
        rows: list[tuple[Any, list[Any]]] = []
        at = 0
        try:
            for t in tracks:
                m = len(t.start)
                for c, f in raw.items():
                    f.write(np.ascontiguousarray(_column(t, c), dtype=COLUMNS[c]).data)
                key = order(t) if order is not None else len(rows)
                rows.append((key, [t.name, t.kind, t.group, at, m, t.longest]))
                at += m
        finally:
            for f in raw.values():
                f.close()
        for c, dtype in COLUMNS.items():  # each column a .npy: its header, then its events
            part = self.tmp / f"{i}.{c}.raw"
            with open(self.tmp / f"{i}.{c}.npy", "wb") as out, open(part, "rb") as src:
                header = {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": (at,)}
                np.lib.format.write_array_header_1_0(out, header)
                shutil.copyfileobj(src, out, 2**20)
            part.unlink()
        rows.sort(key=lambda r: r[0])
        spans = [[s.number, s.start, s.end] for s in steps]
        self.sources.append({"name": name, "steps": spans, "tracks": [r for _, r in rows]})

    def finish(self, names: list[str], infos: list[str]) -> None:
        (self.tmp / "index.json").write_text(
            json.dumps({"names": names, "infos": infos, "sources": self.sources})
        )
        if self.final.exists():
            shutil.rmtree(self.final, ignore_errors=True)
        os.replace(self.tmp, self.final)

    def abandon(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def save(session: Session, tl: Timeline) -> None:
    """Store `tl` for `session`; skipped silently where the cache cannot be written."""
    try:
        w = Writer(session)
    except OSError:
        return
    try:
        for src in tl.sources:
            w.source(src.name, src.steps, src.tracks)
        w.finish(tl.names, tl.infos)
    except (OSError, ValueError):
        w.abandon()


def exists(session: Session) -> bool:
    """Whether a store for `session` (as it is now) is there."""
    try:
        return (_dir(session) / "index.json").is_file()
    except OSError:
        return False


def load(session: Session) -> Timeline | None:
    """The stored timeline of `session`, its columns mapped; None where none is stored (or it
    cannot be read)."""
    try:
        where = _dir(session)
        index = json.loads((where / "index.json").read_text())
        sources = []
        for i, src in enumerate(index["sources"]):
            mode: Any = "r" if src["tracks"] and any(int(r[4]) for r in src["tracks"]) else None
            cols = {n: np.load(where / f"{i}.{n}.npy", mmap_mode=mode) for n in COLUMNS}
            tracks = []
            for name, kind, group, at, n, longest in src["tracks"]:
                w = slice(int(at), int(at) + int(n))
                tracks.append(
                    Track(
                        name,
                        kind,
                        group,
                        cols["start"][w],
                        cols["end"][w],
                        cols["nid"][w],
                        cols["cat"][w],
                        float(longest),
                        cols["corr"][w],
                        cols["pcat"][w],
                        cols["info"][w],
                    )
                )
            steps = [StepSpan(int(n), float(a), float(b)) for n, a, b in src["steps"]]
            sources.append(Source(str(src["name"]), tracks, steps))
        return Timeline(list(index["names"]), sources, list(index["infos"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
