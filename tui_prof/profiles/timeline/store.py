"""A session's timeline kept on disk beside the summary cache, and read back memory-mapped.

Why: reading a large profile's events takes as long as its summary, and holding them all costs
hundreds of MB. Stored once as one flat file per column (numpy .npy, every track's events one
after another) plus a small JSON index (names, sources, steps, each track's offset and length),
it is opened again in well under a second and mapped, not loaded: cutting a step out reads
only the pages of that step's events (`searchsorted` on the mapped starts). Keyed like the
summary (cache.cache_key: every host file's path, size and mtime, tuiprof's version); a store
that cannot be read or written is skipped silently, as the summary cache is.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tui_prof.profiles import cache
from tui_prof.profiles.discover import Session
from tui_prof.profiles.timeline.model import Source, StepSpan, Timeline, Track

VARIANT = "timeline-1"
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


def save(session: Session, tl: Timeline) -> None:
    """Store `tl` for `session` (atomically: a half-written store is never read)."""
    try:
        final = _dir(session)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, suffix=".tmp"))
    except OSError:
        return
    try:
        tracks = [t for src in tl.sources for t in src.tracks]
        for name, dtype in COLUMNS.items():
            parts = [np.asarray(_column(t, name), dtype=dtype) for t in tracks]
            np.save(tmp / f"{name}.npy", np.concatenate(parts) if parts else np.zeros(0, dtype))
        index: dict[str, Any] = {"names": tl.names, "infos": tl.infos, "sources": []}
        at = 0
        for src in tl.sources:
            rows = []
            for t in src.tracks:
                rows.append([t.name, t.kind, t.group, at, len(t.start), t.longest])
                at += len(t.start)
            steps = [[s.number, s.start, s.end] for s in src.steps]
            index["sources"].append({"name": src.name, "steps": steps, "tracks": rows})
        (tmp / "index.json").write_text(json.dumps(index))
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    except (OSError, ValueError):
        shutil.rmtree(tmp, ignore_errors=True)


def load(session: Session) -> Timeline | None:
    """The stored timeline of `session`, its columns mapped; None where none is stored (or it
    cannot be read)."""
    try:
        where = _dir(session)
        index = json.loads((where / "index.json").read_text())
        cols = {n: np.load(where / f"{n}.npy", mmap_mode="r") for n in COLUMNS}
        sources = []
        for src in index["sources"]:
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
