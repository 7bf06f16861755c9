"""A track at the terminal's resolution: per cell, the category that fills it most, or idle.

Why this way: the time a category's events cover up to x is F(x) = Σ clip(x - start, 0, dur),
which sorted starts and ends give with `searchsorted` and prefix sums; a cell's fill is F at its
right edge minus F at its left. Cost O((events in view + cells) log n) per category, so a zoom or
pan frame never walks the events in Python. Nested events (a step > a data-loader call > ops >
runtime calls) count only their own time: a category's fill is what its events cover minus what
their children cover (each event knows its parent's category, nesting.py), so the innermost
event wins where it runs and an enclosing one only where nothing inside it runs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tui_prof.model import CATEGORIES
from tui_prof.profiles.timeline.model import Track

IDLE = -1


def _covered(
    starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64], x: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """F(x): total length of [start, end) intervals left of each x (starts and ends sorted)."""
    cs = np.concatenate([[0.0], np.cumsum(starts)])
    ce = np.concatenate([[0.0], np.cumsum(ends)])
    ns = np.searchsorted(starts, x, side="right")
    ne = np.searchsorted(ends, x, side="right")
    out: npt.NDArray[np.float64] = (ns * x - cs[ns]) - (ne * x - ce[ne])
    return out


def bin_track(track: Track, lo: float, hi: float, cells: int) -> npt.NDArray[np.int64]:
    """One category index (into model.CATEGORIES) per cell of [lo, hi], IDLE where nothing runs.
    An event shorter than a cell still marks it: a 2 µs kernel in a 100 µs cell is visible."""
    out = np.full(cells, IDLE, dtype=np.int64)
    if cells <= 0 or hi <= lo:
        return out
    w = track.window(lo, hi)
    s = np.clip(track.start[w], lo, hi)
    e = np.clip(track.end[w], lo, hi)
    c = track.cat[w]
    pc = track.pcat[w] if len(track.pcat) else np.full(len(c), -1, dtype=np.int8)
    if not len(s):
        return out
    edges = lo + (hi - lo) * np.arange(cells + 1) / cells
    fill = np.zeros((len(CATEGORIES), cells))
    for k in np.unique(c):
        m = c == k
        ks = s[m]
        f = _covered(ks, np.sort(e[m]), edges)
        inner = pc == k  # the children of this category's events: their time is not its own
        if inner.any():
            f = f - _covered(np.sort(s[inner]), np.sort(e[inner]), edges)
        own = np.clip(np.diff(f), 0.0, None)
        # zero-length or sub-cell events: at least mark the cells they touch
        first = np.clip(np.searchsorted(edges, ks, side="right") - 1, 0, cells - 1)
        touched = np.zeros(cells, dtype=bool)
        touched[first] = True
        fill[int(k)] = np.where(touched & (own <= 0), 1e-9, own)
    best = fill.argmax(axis=0)
    busy = fill.max(axis=0) > 0
    out[busy] = best[busy]
    return out


def event_at(track: Track, t: float) -> int | None:
    """The index of the innermost (latest-starting) event covering time t, else None."""
    b = int(np.searchsorted(track.start, t, side="right"))
    a = int(np.searchsorted(track.start, t - track.longest, side="left"))
    for i in range(b - 1, a - 1, -1):
        if track.end[i] >= t:
            return i
    return None
