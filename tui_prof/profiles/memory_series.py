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
    last = SERIES_POINTS - 1
    highest: dict[int, float] = {}  # bin → its highest value (a loop over 10,000s of events)
    get = highest.get
    for t, v in curve:
        b = int((t - lo) / width)
        if b > last:
            b = last
        old = get(b)
        if old is None or v > old:
            highest[b] = v
    return [(lo + b * width, v / MB) for b, v in sorted(highest.items())]
