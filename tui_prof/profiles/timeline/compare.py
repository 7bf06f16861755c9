"""The slowest step beside the median one: which tracks grew, and by how much.

Why busy time (the union of a track's events) and not the sum: nested host ops would count a
thread's time once per level; the union is what the thread or stream spent occupied. Beside it,
the category whose own time (an event's less its children's, as the cells count it) changed
most on the track: what the growth was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tui_prof.model import CATEGORIES
from tui_prof.profiles.timeline.model import StepTimeline, Timeline, Track


def own_time(t: Track) -> npt.NDArray[np.float64]:
    """Per category (model.CATEGORIES order): the time the track's events of it ran with
    nothing nested inside them running, µs."""
    n = len(CATEGORIES)
    dur = np.asarray(t.end - t.start, dtype=np.float64)
    out = np.bincount(t.cat.astype(np.int64), weights=dur, minlength=n)[:n]
    if len(t.pcat):
        inner = t.pcat >= 0
        out = out - np.bincount(t.pcat[inner].astype(np.int64), weights=dur[inner], minlength=n)[:n]
    return np.clip(out, 0.0, None)


@dataclass(frozen=True)
class TrackGrowth:
    name: str
    kind: str
    slow_us: float
    median_us: float
    category: str = ""  # the category whose own time changed most on this track
    category_delta_us: float = 0.0

    @property
    def delta_us(self) -> float:
        return self.slow_us - self.median_us

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "slow_busy_us": self.slow_us,
            "median_busy_us": self.median_us,
            "delta_us": self.delta_us,
            "category": self.category,
            "category_delta_us": self.category_delta_us,
        }


@dataclass(frozen=True)
class Comparison:
    slow: StepTimeline
    median: StepTimeline
    tracks: list[TrackGrowth]  # largest growth first

    @property
    def delta_us(self) -> float:
        return self.slow.duration_us - self.median.duration_us

    def to_dict(self) -> dict[str, Any]:
        return {
            "slowest": {"step": self.slow.step, "step_us": self.slow.duration_us},
            "median": {"step": self.median.step, "step_us": self.median.duration_us},
            "delta_us": self.delta_us,
            "source": self.slow.source,
            "tracks": [t.to_dict() for t in self.tracks],
        }


def compare_median(tl: Timeline, source: str | None = None) -> Comparison:
    """Busy time per track in the slowest and the median step, both from one source: `source`,
    else the one where the slowest step is slowest."""
    slow = tl.step(tl.slowest(source), source=source)
    median = tl.step(tl.median(source), source=slow.source or source)
    before = {(t.kind, t.name): t for t in median.tracks}
    zero = np.zeros(len(CATEGORIES))
    rows = []
    for t in slow.tracks:
        m = before.pop((t.kind, t.name), None)
        grew = own_time(t) - (own_time(m) if m is not None else zero)
        k = int(np.argmax(np.abs(grew)))
        rows.append(
            TrackGrowth(
                t.name,
                t.kind,
                slow.busy_us(t),
                median.busy_us(m) if m is not None else 0.0,
                CATEGORIES[k],
                float(grew[k]),
            )
        )
    for (kind, name), m in before.items():
        grew = -own_time(m)
        k = int(np.argmax(np.abs(grew)))
        rows.append(TrackGrowth(name, kind, 0.0, median.busy_us(m), CATEGORIES[k], float(grew[k])))
    # at equal growth, a track that grew in work before one that grew as `other` (a step
    # marker or a host span around the step: it grows with any step)
    rows.sort(key=lambda r: (-r.delta_us, r.category == "other"))
    return Comparison(slow, median, rows)
