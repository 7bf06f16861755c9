"""Descriptive statistics, box-plot quantiles and honest comparisons of repeated runs.

Contract:
- Quantiles (median, p90, q1, q3, box plots) use numpy's default "linear" method
  (Hyndman & Fan type 7, the same as R's default and pandas), so anyone can reproduce them.
- `std` is the sample standard deviation (ddof=1); it is None for a single value.
- A variant is compared with the baseline by the ratio of means with a 95% Fieller interval
  whose t quantile uses the Welch–Satterthwaite degrees of freedom of the difference of means.
  With that choice "the ratio interval excludes 1" is exactly "Welch's t-test rejects" and
  "the difference interval excludes 0", so the ratio, the difference and the verdict never
  disagree. Where the ratio is not meaningful (baseline mean <= 0, or so uncertain that the
  Fieller set is unbounded) the verdict falls back to the difference of means.
- A verdict names a winner only when the interval excludes "no difference"; below
  `MIN_RUNS` runs there is no interval and no winner.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from tui_prof.comparison.tdist import f_ppf, t_cdf, t_ppf

MIN_RUNS = 3  # below this there is no interval: two runs cannot show their own spread
CONFIDENCE = 0.95
SPREAD_FLAG = 2.0  # flag a variant whose standard deviation is this many times the baseline's
EQUIVALENCE_PCT = 2.0  # an interval within ±2% of "same" is reported as "under x%"

# The one rule for which way is better: time, latency, loss and error shrink when things improve.
_LOWER_IS_BETTER = re.compile(
    r"(time|latency|duration|loss|error|_s$|_ms$|_us$|seconds)", re.IGNORECASE
)
_TIME = re.compile(r"(time|latency|_s$|_ms$|_us$|seconds|duration)", re.IGNORECASE)
_UNITS = (("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("seconds", "s"))


def lower_is_better(metric: str) -> bool:
    """True for names with time, latency, duration, loss, error, seconds, or ending _s/_ms/_us."""
    return bool(_LOWER_IS_BETTER.search(metric))


_direction_rule = lower_is_better  # `compare` has a parameter of the same name


def is_time_metric(metric: str) -> bool:
    """Time-like metrics get "faster/slower" verdicts; others get "higher/lower"."""
    return bool(_TIME.search(metric))


def metric_unit(metric: str) -> str:
    """Unit implied by a metric's name suffix ("wall_time_s" -> "s"), or "" when none."""
    low = metric.lower()
    return next((unit for suffix, unit in _UNITS if low.endswith(suffix)), "")


def _as_floats(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values]


@dataclass(frozen=True)
class Describe:
    """Summary of one metric over one variant's counted runs; fields are None when n == 0."""

    n: int
    mean: float | None
    std: float | None
    median: float | None
    p90: float | None
    min: float | None
    max: float | None
    q1: float | None
    q3: float | None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def describe(values: Sequence[float]) -> Describe:
    """n, mean, sample std, median, p90, min, max and quartiles (numpy "linear" quantiles)."""
    xs = np.asarray(_as_floats(values), dtype=float)
    n = int(xs.size)
    if n == 0:
        return Describe(0, None, None, None, None, None, None, None, None)
    q1, median, q3, p90 = (float(q) for q in np.percentile(xs, [25, 50, 75, 90]))
    return Describe(
        n=n,
        mean=float(xs.mean()),
        std=float(xs.std(ddof=1)) if n > 1 else None,
        median=median,
        p90=p90,
        min=float(xs.min()),
        max=float(xs.max()),
        q1=q1,
        q3=q3,
    )


@dataclass(frozen=True)
class BoxStats:
    """What a Tukey box plot draws: whiskers reach the furthest value within 1.5 IQR of the box."""

    n: int
    q1: float
    median: float
    q3: float
    mean: float
    whisker_low: float
    whisker_high: float
    outliers: tuple[float, ...]
    min: float
    max: float


def box_stats(values: Sequence[float], whisker_iqr: float = 1.5) -> BoxStats | None:
    """Tukey box-plot numbers, or None for no values."""
    d = describe(values)
    if d.n == 0:
        return None
    assert d.q1 is not None and d.q3 is not None and d.median is not None and d.mean is not None
    iqr = d.q3 - d.q1
    lo_fence, hi_fence = d.q1 - whisker_iqr * iqr, d.q3 + whisker_iqr * iqr
    xs = sorted(_as_floats(values))
    inside = [x for x in xs if lo_fence <= x <= hi_fence]
    return BoxStats(
        n=d.n,
        q1=d.q1,
        median=d.median,
        q3=d.q3,
        mean=d.mean,
        whisker_low=min(inside),
        whisker_high=max(inside),
        outliers=tuple(x for x in xs if x < lo_fence or x > hi_fence),
        min=xs[0],
        max=xs[-1],
    )


def _mean_var(xs: list[float]) -> tuple[float, float]:
    m = math.fsum(xs) / len(xs)
    return m, math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom of a difference of two means."""
    a, b = var_a / n_a, var_b / n_b
    return (a + b) ** 2 / (a * a / (n_a - 1) + b * b / (n_b - 1))


@dataclass(frozen=True)
class Comparison:
    """A variant against the baseline on one metric: estimates, 95% intervals and a verdict."""

    metric: str
    variant: str
    baseline: str
    n_baseline: int
    n_variant: int
    lower_is_better: bool
    mean_baseline: float | None = None
    mean_variant: float | None = None
    ratio: float | None = None  # variant mean / baseline mean
    ci_low: float | None = None  # Fieller interval for the ratio
    ci_high: float | None = None
    diff: float | None = None  # variant mean - baseline mean
    diff_ci_low: float | None = None  # Welch interval for the difference
    diff_ci_high: float | None = None
    df: float | None = None
    p_value: float | None = None  # Welch's t-test, two-sided
    significant: bool = False
    winner: str | None = None  # the better one, only when the interval supports it
    verdict: str = ""
    spread_ratio: float | None = None  # variant std / baseline std
    spread_ci_low: float | None = None
    spread_ci_high: float | None = None
    spread_note: str | None = None
    method: str = "none"  # "fieller-welch", "welch-difference", "exact" or "none"
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict[str, Any]:
        head = ("variant", "baseline", "ratio", "ci_low", "ci_high", "verdict")
        out = {k: getattr(self, k) for k in head}
        out.update({f.name: getattr(self, f.name) for f in fields(self) if f.name not in head})
        return out


def _fmt_x(value: float, near: float) -> int:
    """Decimals for ratios: 2, or more until `near` (the bound closest to 1) is not shown as 1."""
    for d in (2, 3, 4):
        if f"{near:.{d}f}" != f"{1:.{d}f}":
            return d
    return 4


def _fmt_pct(near: float) -> int:
    for d in (1, 2, 3):
        if f"{abs(near):.{d}f}" != f"{0:.{d}f}":
            return d
    return 3


def _ci(c: Comparison) -> str:
    return f"{c.confidence * 100:g}% CI"


def _n_text(nb: int, nv: int) -> str:
    return f"n={nb}" if nb == nv else f"n={nb} vs {nv}"


def _ratio_verdict(c: Comparison, time_like: bool) -> str:
    assert c.ratio is not None and c.ci_low is not None and c.ci_high is not None
    r, lo, hi, v = c.ratio, c.ci_low, c.ci_high, c.variant
    if time_like:
        if r < 1:
            s_lo, s_hi = 1 / hi, 1 / lo
            d = _fmt_x(s_lo, s_lo)
            return f"{v} is {1 / r:.{d}f}× faster, {_ci(c)} {s_lo:.{d}f}–{s_hi:.{d}f}"
        d = _fmt_x(lo, lo)
        return f"{v} is {r:.{d}f}× slower, {_ci(c)} {lo:.{d}f}–{hi:.{d}f}"
    higher = r > 1
    good = higher != c.lower_is_better
    p, p_lo, p_hi = ((r - 1) * 100, (lo - 1) * 100, (hi - 1) * 100)
    if not higher:
        p, p_lo, p_hi = -p, -p_hi, -p_lo
    d = _fmt_pct(p_lo)
    word = "higher" if higher else "lower"
    return (
        f"{c.metric}: {v} is {p:.{d}f}% {word} ({'better' if good else 'worse'}), "
        f"{_ci(c)} {p_lo:.{d}f}–{p_hi:.{d}f}% {word}"
    )


def _num(x: float) -> str:
    return f"{x:.3g}"


def _diff_verdict(c: Comparison, time_like: bool) -> str:
    assert c.diff is not None and c.diff_ci_low is not None and c.diff_ci_high is not None
    unit = metric_unit(c.metric)
    u = f" {unit}" if unit else ""
    lo, hi = sorted((abs(c.diff_ci_low), abs(c.diff_ci_high)))
    higher = c.diff > 0
    if time_like:
        word = "slower" if higher else "faster"
        return f"{c.variant} is {_num(abs(c.diff))}{u} {word}, {_ci(c)} {_num(lo)}–{_num(hi)}{u}"
    good = higher != c.lower_is_better
    word = "higher" if higher else "lower"
    return (
        f"{c.metric}: {c.variant} is {_num(abs(c.diff))}{u} {word} "
        f"({'better' if good else 'worse'}), {_ci(c)} {_num(lo)}–{_num(hi)}{u} {word}"
    )


def _no_difference(c: Comparison) -> str:
    n = _n_text(c.n_baseline, c.n_variant)
    if c.ci_low is not None and c.ci_high is not None:
        worst = max(abs(c.ci_low - 1), abs(c.ci_high - 1)) * 100
        if worst < EQUIVALENCE_PCT:
            return (
                f"no clear difference at {n}: any difference is under {worst:.1f}% "
                f"({_ci(c)} {c.ci_low:.3f}–{c.ci_high:.3f})"
            )
    return f"no clear difference at {n} — run more repeats"


def _spread(c: Comparison, vb: float, vv: float) -> dict[str, Any]:
    """Standard-deviation ratio with its F-based interval, and a note when it is large."""
    nb, nv, metric, v, b = c.n_baseline, c.n_variant, c.metric, c.variant, c.baseline
    if vb == 0.0:
        note = f"{v}'s {metric} varies while {b}'s is constant" if vv > 0 else None
        return {"spread_note": note}
    ratio = math.sqrt(vv / vb)
    alpha = 1 - c.confidence
    f_obs = vv / vb
    lo = math.sqrt(f_obs / f_ppf(1 - alpha / 2, nv - 1, nb - 1))
    hi = math.sqrt(f_obs / f_ppf(alpha / 2, nv - 1, nb - 1))
    out: dict[str, Any] = {"spread_ratio": ratio, "spread_ci_low": lo, "spread_ci_high": hi}
    if ratio >= SPREAD_FLAG or ratio <= 1 / SPREAD_FLAG:
        more = ratio > 1
        size = ratio if more else 1 / ratio
        ci = f"{_ci(c)} {lo:.2g}–{hi:.2g}× the baseline's spread"
        confirmed = lo > 1 or hi < 1
        tail = f" ({ci})" if confirmed else f", though {_n_text(nb, nv)} cannot confirm it ({ci})"
        out["spread_note"] = f"{v}'s {metric} varies {size:.1f}× {'more' if more else 'less'}{tail}"
    return out


def compare(
    baseline: Sequence[float],
    variant: Sequence[float],
    *,
    metric: str,
    lower_is_better: bool | None = None,
    baseline_name: str = "baseline",
    variant_name: str = "variant",
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Compare one variant's values with the baseline's on `metric` (see the module contract)."""
    lib = _direction_rule(metric) if lower_is_better is None else lower_is_better
    xb, xv = _as_floats(baseline), _as_floats(variant)
    nb, nv = len(xb), len(xv)
    base = Comparison(metric, variant_name, baseline_name, nb, nv, lib, confidence=confidence)
    if nb == 0 or nv == 0:
        who = baseline_name if nb == 0 else variant_name
        return _replace(base, verdict=f"no finished runs of {who}")
    mb, mv = math.fsum(xb) / nb, math.fsum(xv) / nv
    ratio = mv / mb if mb > 0 and mv >= 0 else None
    base = _replace(base, mean_baseline=mb, mean_variant=mv, ratio=ratio, diff=mv - mb)
    if nb < MIN_RUNS or nv < MIN_RUNS:
        few = [(name, n) for name, n in ((baseline_name, nb), (variant_name, nv)) if n < MIN_RUNS]
        if len(few) == 2 and nb == nv:
            text = f"too few runs (n={nb}): need at least {MIN_RUNS}"
        else:
            text = "; ".join(f"too few runs of {name} (n={n})" for name, n in few)
            text += f": need at least {MIN_RUNS}"
        return _replace(base, verdict=text)
    _, vb = _mean_var(xb)
    _, vv = _mean_var(xv)
    time_like = is_time_metric(metric)
    spread = _spread(base, vb, vv)
    if vb == 0.0 and vv == 0.0:
        c = _replace(base, method="exact", diff_ci_low=mv - mb, diff_ci_high=mv - mb, **spread)
        if ratio is not None:
            c = _replace(c, ci_low=ratio, ci_high=ratio)
        if mv == mb:
            return _replace(c, verdict=f"no difference: every run gave {_num(mb)}")
        c = _replace(c, significant=True, winner=_winner(c))
        text = _ratio_verdict(c, time_like) if ratio is not None else _diff_verdict(c, time_like)
        return _replace(
            c, verdict=text.split(f", {_ci(c)}")[0] + " (every run gave the same value)"
        )
    df = welch_df(vb, nb, vv, nv)
    tq = t_ppf(1 - (1 - confidence) / 2, df)
    a, bb = vv / nv, vb / nb  # squared standard errors of the variant and baseline means
    se = math.sqrt(a + bb)
    diff = mv - mb
    p_value = 2 * (1 - t_cdf(abs(diff) / se, df))
    significant = abs(diff) > tq * se
    c = _replace(
        base,
        diff_ci_low=diff - tq * se,
        diff_ci_high=diff + tq * se,
        df=df,
        p_value=p_value,
        significant=significant,
        method="welch-difference",
        **spread,
    )
    # Fieller: the set of θ with (mv - θ mb)^2 <= t^2 (a + θ^2 bb) is an interval when A > 0;
    # otherwise the ratio keeps its point estimate and the verdict uses the difference.
    big_a = mb * mb - tq * tq * bb
    if ratio is not None and big_a > 0:
        root = tq * math.sqrt(mv * mv * bb + mb * mb * a - tq * tq * a * bb)
        c = _replace(
            c,
            ci_low=(mv * mb - root) / big_a,
            ci_high=(mv * mb + root) / big_a,
            method="fieller-welch",
        )
    if not significant:
        return _replace(c, verdict=_no_difference(c))
    c = _replace(c, winner=_winner(c))
    text = _ratio_verdict(c, time_like) if c.ci_low is not None else _diff_verdict(c, time_like)
    return _replace(c, verdict=text)


def _winner(c: Comparison) -> str:
    assert c.diff is not None
    variant_better = (c.diff < 0) == c.lower_is_better
    return c.variant if variant_better else c.baseline


def _replace(c: Comparison, **changes: Any) -> Comparison:
    return replace(c, **changes)
