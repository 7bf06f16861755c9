"""A memory-over-time series cut to a screen's width without losing its peaks.

Contract: `downsample(points)` keeps at most SERIES_POINTS (time, bytes) points, each bin's
highest, and returns (time, MB). Shared by the Kineto and XSpace memory readers; stdlib only, so
the XSpace path stays free of the Kineto reader's numpy.
"""

from __future__ import annotations

MB = float(2**20)
SERIES_POINTS = 120


def downsample(curve: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most SERIES_POINTS points: each bin's highest, so no peak is lost."""
    if len(curve) <= SERIES_POINTS:
        return [(t, v / MB) for t, v in curve]
    lo, hi = curve[0][0], curve[-1][0]
    width = (hi - lo) / SERIES_POINTS or 1.0
    bins: dict[int, tuple[float, float]] = {}
    for t, v in curve:
        b = min(SERIES_POINTS - 1, int((t - lo) / width))
        if b not in bins or v > bins[b][1]:
            bins[b] = (lo + b * width, v)
    return [(t, v / MB) for _, (t, v) in sorted(bins.items())]
