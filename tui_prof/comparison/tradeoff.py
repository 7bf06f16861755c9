"""Speed against quality: each variant's median and spread on both, its worst run, and the
Pareto front.

Contract: a variant is on the Pareto front unless another variant is better on both metrics
with a resolved difference: the same 95% comparison the verdicts use (paired by repeat where
every repeat has a run of each, else independent), between every two variants, not only
against the baseline. So with too few repeats to resolve anything every variant is on the
front: nothing is ruled out that the runs cannot rule out. A variant without values on either
metric is not on it. `worst` is the worst run: the lowest quality (the highest where lower is
better) and the slowest speed, since a decision about a risky change rests on its worst case.
Default axes: wall time, and the first accuracy-like metric (tui_prof.comparison.names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui_prof.comparison.names import is_quality_metric
from tui_prof.comparison.paired import Blocking, compare_design
from tui_prof.comparison.stats import describe

if TYPE_CHECKING:
    from tui_prof.comparison.report import MetricReport

WALL_TIME = "wall_time_s"


@dataclass(frozen=True)
class Axis:
    """One metric of a point: median, quartiles and the worst run."""

    median: float | None
    q1: float | None
    q3: float | None
    worst: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "q1": self.q1, "q3": self.q3, "worst": self.worst}


@dataclass(frozen=True)
class TradeoffPoint:
    variant: str
    speed: Axis
    quality: Axis
    pareto: bool
    dominated_by: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "speed": self.speed.median,
            "quality": self.quality.median,
            "pareto": self.pareto,
            "n": min(self.speed.n, self.quality.n),
            "speed_spread": self.speed.to_dict(),
            "quality_spread": self.quality.to_dict(),
            "quality_worst": self.quality.worst,
            "speed_worst": self.speed.worst,
            "dominated_by": list(self.dominated_by),
        }


@dataclass(frozen=True)
class Tradeoff:
    """The two metrics weighed against each other, one point per variant."""

    speed: str
    quality: str
    speed_unit: str
    quality_unit: str
    speed_lower_is_better: bool
    quality_lower_is_better: bool
    points: tuple[TradeoffPoint, ...]

    @property
    def front(self) -> tuple[str, ...]:
        return tuple(p.variant for p in self.points if p.pareto)

    def to_dict(self) -> dict[str, Any]:
        return {
            "speed": self.speed,
            "quality": self.quality,
            "points": [p.to_dict() for p in self.points],
            "speed_unit": self.speed_unit,
            "quality_unit": self.quality_unit,
            "speed_lower_is_better": self.speed_lower_is_better,
            "quality_lower_is_better": self.quality_lower_is_better,
            "front": list(self.front),
        }


def default_axes(
    available: Sequence[str], speed: str | None = None, quality: str | None = None
) -> tuple[str, str] | None:
    """(speed, quality): the given ones, else wall time and the first accuracy-like metric;
    None when there is no quality metric to weigh speed against."""
    s = speed or (WALL_TIME if WALL_TIME in available else None)
    q = quality or next((m for m in available if is_quality_metric(m) and m != s), None)
    if s is None or q is None or s == q:
        return None
    return s, q


def _axis(values: Sequence[float], lower_is_better: bool) -> Axis:
    d = describe(values)
    worst = (d.max if lower_is_better else d.min) if d.n else None
    return Axis(d.median, d.q1, d.q3, worst, d.n)


def _beats(m: MetricReport, winner: str, loser: str, blocking: Blocking) -> bool:
    """`winner` is better than `loser` on `m` with a resolved 95% difference."""
    c = compare_design(
        m.keyed(loser),
        m.keyed(winner),
        metric=m.name,
        lower_is_better=m.lower_is_better,
        baseline_name=loser,
        variant_name=winner,
        blocking=blocking,
    )
    return c.winner == winner


def build_tradeoff(speed: MetricReport, quality: MetricReport, blocking: Blocking) -> Tradeoff:
    """Points and Pareto front of the variants on `speed` and `quality` (see the contract)."""
    names = list(speed.values)
    axes = {
        v: (
            _axis(speed.values.get(v, ()), speed.lower_is_better),
            _axis(quality.values.get(v, ()), quality.lower_is_better),
        )
        for v in names
    }
    points = []
    for v in names:
        beaten_by = tuple(
            u
            for u in names
            if u != v
            and min(axes[u][0].n, axes[u][1].n) > 0
            and _beats(speed, u, v, blocking)
            and _beats(quality, u, v, blocking)
        )
        has_data = min(axes[v][0].n, axes[v][1].n) > 0
        points.append(
            TradeoffPoint(v, *axes[v], pareto=has_data and not beaten_by, dominated_by=beaten_by)
        )
    return Tradeoff(
        speed=speed.name,
        quality=quality.name,
        speed_unit=speed.unit,
        quality_unit=quality.unit,
        speed_lower_is_better=speed.lower_is_better,
        quality_lower_is_better=quality.lower_is_better,
        points=tuple(points),
    )
