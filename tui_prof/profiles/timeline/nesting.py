"""Which event encloses which on one track, so the innermost event wins a cell.

Why: a host thread nests its events (ProfilerStep#N > DataLoader > ops > runtime calls; TraceMe
scopes in XSpace). Counting every level, the outermost fills every cell it spans and hides what
runs inside it. Each event gets its parent's category; a category's own (exclusive) time in a
window is then the time its events cover minus the time their children cover (bins.py), which
sorted arrays give without walking the events.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

ROOT = -1


def order(start: npt.NDArray[np.float64], end: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """Sort by start, an enclosing event before what it encloses (longer first at one start);
    the same order as `np.lexsort((-end, start))`, which sorted every event by its end first
    (≈ 45 ns an event, most of a track's build): a track's events come nearly in order of
    start, which a stable sort takes in one sweep, and only those sharing a start with another
    (a few percent) are sorted by end."""
    by_start = np.argsort(start, kind="stable")
    s = start[by_start]
    tie = s[1:] == s[:-1]
    if tie.any():
        shared = np.zeros(len(s), dtype=bool)
        shared[1:] = tie
        shared[:-1] |= tie
        at = np.flatnonzero(shared)
        ties = by_start[at]
        by_start[at] = ties[np.lexsort((-end[ties], s[at]))]
    return by_start


def parents(start: npt.NDArray[np.float64], end: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Each event's parent index (ROOT for none), for events in `order`.

    An event's depth is how many earlier events are still open at its start; its parent is the
    latest earlier event one level up. Exact for properly nested events; where siblings overlap
    (clock jitter) the later one is taken as a child, which bins.py clamps to no negative time.
    Fast on the millions of events of a large trace's host thread: the events are put in order
    of (depth, index) by a radix sort of the small depths, and each one's parent level is then
    looked up in that order, so the lookups come sorted.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    # temporaries let go as soon as used: a host thread of millions of events is nested here
    idx = np.arange(n, dtype=np.int64)
    depth = np.searchsorted(np.sort(end), start, side="right")  # events closed by each start
    np.subtract(idx, depth, out=depth)
    np.maximum(depth, 0, out=depth)
    small = depth.astype(np.int16) if int(depth.max()) < 2**15 else depth
    by_key = np.argsort(small, kind="stable")  # by (depth, index): a radix sort for int16
    del small
    keys = depth[by_key] * n
    keys += by_key  # depth * n + index, ascending
    wanted = keys - n  # (depth - 1) * n + index: the parent level's key, ascending too
    found = np.searchsorted(keys, wanted, side="left")
    del keys, wanted
    pos = np.empty(n, dtype=np.int64)
    pos[by_key] = found
    del found
    pos -= 1
    cand = by_key[np.clip(pos, 0, n - 1)]
    del by_key
    ok = pos >= 0
    del pos
    ok &= depth > 0
    ok &= depth[cand] == depth - 1
    ok &= cand < idx
    del depth, idx
    cand[~ok] = ROOT
    return cand


def parent_categories(
    start: npt.NDArray[np.float64], end: npt.NDArray[np.float64], cat: npt.NDArray[np.int8]
) -> npt.NDArray[np.int8]:
    """Each event's parent's category, ROOT (-1) where it has none (events in `order`)."""
    p = parents(start, end)
    out = np.full(len(p), ROOT, dtype=np.int8)
    has = p >= 0
    out[has] = cat[p[has]]
    return out


def enclosing(
    start: npt.NDArray[np.float64], end: npt.NDArray[np.float64], longest: float, i: int
) -> int | None:
    """The innermost other event that encloses event i (events in `order`), else None."""
    a = int(np.searchsorted(start, start[i] - longest, side="left"))
    cand = np.flatnonzero(end[a:i] >= end[i])
    return a + int(cand[-1]) if len(cand) else None


def inside(start: npt.NDArray[np.float64], end: npt.NDArray[np.float64], i: int) -> slice:
    """The events that start within event i, after it (its descendants, when nested)."""
    b = int(np.searchsorted(start, end[i], side="right"))
    return slice(i + 1, max(b, i + 1))
