"""Descriptive statistics, box-plot quantiles and honest comparisons of repeated runs.

Contract:
- Quantiles (median, p90, q1, q3, box plots) use numpy's default "linear" method
  (Hyndman & Fan type 7, the same as R's default and pandas), so anyone can reproduce them.
- `std` is the sample standard deviation (ddof=1); it is None for a single value.
- `compare` treats the two variants' runs as independent samples (design "independent"): the
  ratio of means with a 95% Fieller interval whose t quantile uses the Welch–Satterthwaite
  degrees of freedom of the difference of means. With that choice "the ratio interval excludes
  1" is exactly "Welch's t-test rejects" and "the difference interval excludes 0", so the ratio,
  the difference and the verdict never disagree. Where the ratio is not meaningful (baseline
  mean <= 0, or so uncertain that the Fieller set is unbounded) the verdict falls back to the
  difference of means. Runs paired by repeat are compared by tui_prof.comparison.paired, which
  shares `start`, `exact` and `with_repeats` with it.
- A verdict names a winner only when the interval excludes "no difference"; below
  `MIN_RUNS` runs there is no interval and no winner. An unresolved comparison carries
  `repeats_needed` (tui_prof.comparison.power) and says it (tui_prof.comparison.verdicts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from tui_prof.comparison import power
from tui_prof.comparison.names import (
    is_time_metric,
    lower_is_better,
    metric_unit,
    min_difference_pct,
)
from tui_prof.comparison.power import welch_df
from tui_prof.comparison.tdist import f_ppf, t_cdf, t_ppf
from tui_prof.comparison.verdicts import (
    EQUIVALENCE_PCT,
    ci_text,
    conclude,
    diff_verdict,
    equivalent_within,
    n_text,
    num,
    ratio_verdict,
)

__all__ = [
    "CONFIDENCE",
    "EQUIVALENCE_PCT",
    "MIN_RUNS",
    "BoxStats",
    "Comparison",
    "Describe",
    "box_stats",
    "compare",
    "describe",
    "is_time_metric",
    "lower_is_better",
    "metric_unit",
    "welch_df",
]

MIN_RUNS = 3  # below this there is no interval: two runs cannot show their own spread
CONFIDENCE = 0.95
SPREAD_FLAG = 2.0  # flag a variant whose standard deviation is this many times the baseline's
DESIGN_INDEPENDENT = "independent"

_direction_rule = lower_is_better  # `compare` has a parameter of the same name


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
    ratio: float | None = None  # variant mean / baseline mean (paired: geometric mean of ratios)
    ci_low: float | None = None  # Fieller interval for the ratio (paired: exp of a t interval)
    ci_high: float | None = None
    diff: float | None = None  # variant mean - baseline mean
    diff_ci_low: float | None = None  # Welch interval for the difference (paired: paired t)
    diff_ci_high: float | None = None
    df: float | None = None
    p_value: float | None = None  # Welch's t-test, two-sided (paired: the paired t-test)
    significant: bool = False
    winner: str | None = None  # the better one, only when the interval supports it
    verdict: str = ""
    spread_ratio: float | None = None  # variant std / baseline std
    spread_ci_low: float | None = None
    spread_ci_high: float | None = None
    spread_note: str | None = None
    # "fieller-welch", "welch-difference", "paired-log-ratio", "paired-difference", "exact", "none"
    method: str = "none"
    confidence: float = CONFIDENCE
    design: str = DESIGN_INDEPENDENT  # or "paired" (runs of one repeat compared with each other)
    repeats_needed: int | None = None  # per variant, for 80% power; None where resolved/unknown
    repeats_note: str | None = None  # why the number is capped or for a 1% difference
    repeats_effect_pct: float | None = None  # the difference repeats_needed is for (percent)
    repeats_observed_pct: float | None = None  # the difference seen (percent)
    repeats_capped: bool = False  # more than power.MAX_REPEATS would be needed
    ratio_of_means: float | None = None  # variant mean / baseline mean, whatever the design
    min_effect_pct: float | None = None  # the smallest difference that matters (percent)

    def to_dict(self) -> dict[str, Any]:
        head = ("variant", "baseline", "ratio", "ci_low", "ci_high", "verdict")
        out = {k: getattr(self, k) for k in head}
        out.update({f.name: getattr(self, f.name) for f in fields(self) if f.name not in head})
        return out


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
        ci = f"{ci_text(c)} {lo:.2g}–{hi:.2g}× the baseline's spread"
        confirmed = lo > 1 or hi < 1
        tail = f" ({ci})" if confirmed else f", though {n_text(nb, nv)} cannot confirm it ({ci})"
        out["spread_note"] = f"{v}'s {metric} varies {size:.1f}× {'more' if more else 'less'}{tail}"
    return out


def start(
    baseline: Sequence[float],
    variant: Sequence[float],
    *,
    metric: str,
    lower_is_better: bool | None,
    baseline_name: str,
    variant_name: str,
    confidence: float,
    design: str,
    matters: Mapping[str, float] | None = None,
) -> Comparison:
    """Means, ratio and difference, with the verdict already set when there are too few runs
    (every design begins here, so they agree on what "too few" means); `matters` gives the
    smallest difference that matters per metric (percent; default: 5% for times)."""
    lib = _direction_rule(metric) if lower_is_better is None else lower_is_better
    xb, xv = _as_floats(baseline), _as_floats(variant)
    nb, nv = len(xb), len(xv)
    base = Comparison(
        metric,
        variant_name,
        baseline_name,
        nb,
        nv,
        lib,
        confidence=confidence,
        design=design,
        min_effect_pct=min_difference_pct(metric, matters),
    )
    if nb == 0 or nv == 0:
        who = baseline_name if nb == 0 else variant_name
        return replace(base, verdict=f"no finished runs of {who}")
    mb, mv = math.fsum(xb) / nb, math.fsum(xv) / nv
    ratio = mv / mb if mb > 0 and mv >= 0 else None
    base = replace(
        base, mean_baseline=mb, mean_variant=mv, ratio=ratio, ratio_of_means=ratio, diff=mv - mb
    )
    if nb < MIN_RUNS or nv < MIN_RUNS:
        few = [(name, n) for name, n in ((baseline_name, nb), (variant_name, nv)) if n < MIN_RUNS]
        if len(few) == 2 and nb == nv:
            text = f"too few runs (n={nb}): need at least {MIN_RUNS}"
        else:
            text = "; ".join(f"too few runs of {name} (n={n})" for name, n in few)
            text += f": need at least {MIN_RUNS}"
        return replace(base, verdict=text)
    _, vb = _mean_var(xb)
    _, vv = _mean_var(xv)
    return replace(base, **_spread(base, vb, vv))


def exact(c: Comparison, same: str | None, why: str) -> Comparison:
    """No spread at all: the values speak for themselves. `same` is the verdict when there is no
    difference (None when there is one); `why` ends a verdict that names a winner."""
    assert c.diff is not None
    c = replace(c, method="exact", diff_ci_low=c.diff, diff_ci_high=c.diff)
    if c.ratio is not None:
        c = replace(c, ci_low=c.ratio, ci_high=c.ratio)
    if same is not None:
        return replace(c, verdict=same)
    c = conclude(replace(c, significant=True))
    text = ratio_verdict(c) if c.ratio is not None else diff_verdict(c)
    return replace(c, verdict=text.split(f", {ci_text(c)}")[0] + f" ({why})")


def floor_of(c: Comparison) -> float | None:
    """The smallest difference that matters as a fraction: what repeats are ever advised for."""
    return c.min_effect_pct / 100 if c.min_effect_pct is not None else None


def with_repeats(c: Comparison, advice: power.RepeatsAdvice | None) -> Comparison:
    """Attach how many repeats would resolve an unresolved comparison, then write the verdict."""
    if c.significant or advice is None or equivalent_within(c) is not None:
        return conclude(c)
    return conclude(
        replace(
            c,
            repeats_needed=advice.repeats,
            repeats_note=advice.note,
            repeats_effect_pct=advice.effect_pct,
            repeats_observed_pct=advice.observed_pct,
            repeats_capped=advice.capped,
        )
    )


def compare(
    baseline: Sequence[float],
    variant: Sequence[float],
    *,
    metric: str,
    lower_is_better: bool | None = None,
    baseline_name: str = "baseline",
    variant_name: str = "variant",
    confidence: float = CONFIDENCE,
    matters: Mapping[str, float] | None = None,
) -> Comparison:
    """Compare one variant's values with the baseline's on `metric`, as independent samples
    (see the module contract; tui_prof.comparison.paired compares runs of a repeat together)."""
    base = start(
        baseline,
        variant,
        metric=metric,
        lower_is_better=lower_is_better,
        baseline_name=baseline_name,
        variant_name=variant_name,
        confidence=confidence,
        design=DESIGN_INDEPENDENT,
        matters=matters,
    )
    if base.verdict:
        return base
    xb, xv = _as_floats(baseline), _as_floats(variant)
    nb, nv = len(xb), len(xv)
    mb, vb = _mean_var(xb)
    mv, vv = _mean_var(xv)
    ratio = base.ratio
    if vb == 0.0 and vv == 0.0:
        same = f"no difference: every run gave {num(mb)}" if mv == mb else None
        return exact(base, same, "every run gave the same value")
    df = welch_df(vb, nb, vv, nv)
    tq = t_ppf(1 - (1 - confidence) / 2, df)
    a, bb = vv / nv, vb / nb  # squared standard errors of the variant and baseline means
    se = math.sqrt(a + bb)
    diff = mv - mb
    p_value = 2 * (1 - t_cdf(abs(diff) / se, df))
    significant = abs(diff) > tq * se
    c = replace(
        base,
        diff_ci_low=diff - tq * se,
        diff_ci_high=diff + tq * se,
        df=df,
        p_value=p_value,
        significant=significant,
        method="welch-difference",
    )
    # Fieller: the set of θ with (mv - θ mb)^2 <= t^2 (a + θ^2 bb) is an interval when A > 0;
    # otherwise the ratio keeps its point estimate and the verdict uses the difference.
    big_a = mb * mb - tq * tq * bb
    if ratio is not None and big_a > 0:
        root = tq * math.sqrt(mv * mv * bb + mb * mb * a - tq * tq * a * bb)
        c = replace(
            c,
            ci_low=(mv * mb - root) / big_a,
            ci_high=(mv * mb + root) / big_a,
            method="fieller-welch",
        )
    relative = mb > 0
    observed = abs(diff) / mb if relative else abs(diff)

    def runs_for(effect: float) -> int | None:
        return power.n_independent(effect * mb if relative else effect, vb, vv, MIN_RUNS)

    return with_repeats(c, power.advise(observed, runs_for, relative=relative, floor=floor_of(c)))
