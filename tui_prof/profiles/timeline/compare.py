"""The slowest step beside the median one: which tracks grew, and by how much.

Why busy time (the union of a track's events) and not the sum: nested host ops would count a
thread's time once per level; the union is what the thread or stream spent occupied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tui_prof.profiles.timeline.model import StepTimeline, Timeline


@dataclass(frozen=True)
class TrackGrowth:
    name: str
    kind: str
    slow_us: float
    median_us: float

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
            "tracks": [t.to_dict() for t in self.tracks],
        }


def compare_median(tl: Timeline) -> Comparison:
    """Busy time per track in the slowest and the median step (the same source for both)."""
    slow = tl.step(tl.slowest())
    median = tl.step(tl.median(), source=slow.source or None)
    before = {(t.kind, t.name): median.busy_us(t) for t in median.tracks}
    rows = [
        TrackGrowth(t.name, t.kind, slow.busy_us(t), before.pop((t.kind, t.name), 0.0))
        for t in slow.tracks
    ]
    rows += [TrackGrowth(name, kind, 0.0, us) for (kind, name), us in before.items()]
    rows.sort(key=lambda r: -r.delta_us)
    return Comparison(slow, median, rows)
