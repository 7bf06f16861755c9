"""The PyTorch profiler plugin's GPU figures: GPU utilisation, estimated SM efficiency and
estimated achieved occupancy, per device, over all steps and per step.

Contract: the plugin's own rules (torch-tb-profiler's gpu_metrics_parser.py, range_utils.py),
over the same window (the first step's start to the last step's end, or one step): utilisation
is the time any kernel runs, over the window; SM efficiency is the integral of the summed
`blocks per SM` of the kernels running at each moment, capped at 1, over the window (kernels with
a positive value only); occupancy is the kernels' `est. achieved occupancy %` weighted by their
time in the window (non-negative values only). Kineto writes both kernel args from the trace's
`deviceProperties` (SM count, threads and registers per SM); a trace without them gives
utilisation alone. All three are integrals of step functions, so each is a cumulative sum
evaluated at the window's ends: one sort per device, whatever the number of steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tui_prof.device_use import GpuMetric, GpuStepMetric
from tui_prof.profiles.kineto.columns import Array

# Columns of Device.kernels (collect.py).
TS, END, DEVICE, OCCUPANCY, BLOCKS_PER_SM = 0, 1, 5, 6, 7


class _Integral:
    """∫ f(t) dt from -∞ to x, f = Σ values of the spans covering t (capped at 1 if asked)."""

    def __init__(self, starts: Array, ends: Array, values: Array, cap: bool) -> None:
        t = np.concatenate([starts, ends])
        dv = np.concatenate([values, -values])
        order = np.argsort(t, kind="stable")
        self.t = t[order]
        level = np.cumsum(dv[order])
        if cap:  # the plugin: min(value, 1) where the running value is positive, else nothing
            level = np.where(level > 0.0, np.minimum(level, 1.0), 0.0)
        self.level = level
        self.f = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(self.t))])

    def at(self, x: Array) -> Array:
        if len(self.t) == 0:
            return np.zeros_like(x)
        i = np.searchsorted(self.t, x, side="right") - 1
        inside = i >= 0
        j = np.clip(i, 0, len(self.t) - 1)
        value = self.f[j] + self.level[j] * (x - self.t[j])
        return np.where(inside, value, 0.0)

    def over(self, lo: Array, hi: Array) -> Array:
        return self.at(hi) - self.at(lo)


def gpu_metrics(
    kernels: Array,
    spans: Sequence[tuple[float, float]],
    numbers: Sequence[int],
    names: dict[int, str],
    rank: str = "",
) -> list[GpuMetric]:
    """One GpuMetric per device that ran a kernel (see the module's contract)."""
    if not len(kernels) or not spans:
        return []
    base = spans[0][0]  # times relative to the first step: µs since the epoch lose precision
    lo = np.array([spans[0][0], *(s[0] for s in spans)], dtype=np.float64) - base
    hi = np.array([spans[-1][1], *(s[1] for s in spans)], dtype=np.float64) - base
    width = np.maximum(hi - lo, 1e-9)
    out = []
    for dev in sorted({int(d) for d in kernels[:, DEVICE]}):
        k = kernels[kernels[:, DEVICE] == dev]
        ts, end = k[:, TS] - base, k[:, END] - base
        util = _Integral(ts, end, np.ones(len(k)), cap=True).over(lo, hi) / width
        blocks = k[:, BLOCKS_PER_SM]
        has_sm = blocks > 0.0
        sm = None
        if has_sm.any():
            sm = _Integral(ts[has_sm], end[has_sm], blocks[has_sm], cap=True).over(lo, hi) / width
        occ = k[:, OCCUPANCY]
        has_occ = occ >= 0.0
        occupancy = None
        if has_occ.any():
            a, b = ts[has_occ], end[has_occ]
            weighted = _Integral(a, b, occ[has_occ], cap=False).over(lo, hi)
            time = _Integral(a, b, np.ones(int(has_occ.sum())), cap=False).over(lo, hi)
            occupancy = np.where(time > 0, weighted / np.maximum(time, 1e-12), np.nan)

        def pct(a: Array | None, i: int, scale: float = 100.0) -> float | None:
            if a is None or not np.isfinite(a[i]):
                return None
            return float(a[i]) * scale

        steps = tuple(
            GpuStepMetric(n, float(util[i + 1]) * 100.0, pct(sm, i + 1), pct(occupancy, i + 1, 1))
            for i, n in enumerate(numbers)
        )
        out.append(
            GpuMetric(
                rank=rank,
                device=dev,
                name=names.get(dev, ""),
                utilization_percent=float(util[0]) * 100.0,
                sm_efficiency_percent=pct(sm, 0),
                occupancy_percent=pct(occupancy, 0, 1),
                steps=steps,
            )
        )
    return out
