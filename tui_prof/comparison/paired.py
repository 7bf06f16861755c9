"""Paired comparisons: runs that share a block (a repeat: same seed, run back to back) are
compared with each other, so drift between repeats and a seed's luck cancel out.

Contract:
- A `Blocking` names the design and how a run's block is found: `PAIRED_BY_REPEAT` keys runs by
  their repeat (design "paired"); `BLOCKED_BY_NODE` by (node, repeat) (design "blocked"), which
  `blocking_for(runs)` picks when the runs ran on more than one cluster node; nothing else
  changes.
- `pair(baseline, variant)` takes (block, value) lists and returns the pairs when every block
  has exactly one value of each side, else None: then the comparison is independent (Welch).
- `compare_paired(pairs)`: with every value > 0, the per-block log-ratios d = log(v / b) give the
  interval exp(mean(d) ± t(0.975, n−1)·sd(d)/√n) for the ratio (a ratio of geometric means;
  method "paired-log-ratio"); otherwise the paired differences v − b do (method
  "paired-difference"). The difference interval is always the paired t interval of v − b.
  `significant` is "the ratio interval excludes 1" (or the difference interval 0 without a ratio),
  and the verdict, the winner and `repeats_needed` follow it.
- `compare_design` picks the paired design where the pairs exist, else `stats.compare`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from tui_prof.comparison import power
from tui_prof.comparison.stats import (
    CONFIDENCE,
    MIN_RUNS,
    Comparison,
    compare,
    exact,
    floor_of,
    start,
    with_repeats,
)
from tui_prof.comparison.tdist import t_cdf, t_ppf
from tui_prof.model import RunRecord

DESIGN_PAIRED = "paired"
Keyed = Sequence[tuple[Hashable, float]]


@dataclass(frozen=True)
class Blocking:
    """How runs form blocks: `key(run)` is the block, `design` the name the report shows."""

    design: str
    key: Callable[[RunRecord], Hashable]


def _repeat(run: RunRecord) -> Hashable:
    return run.repeat


PAIRED_BY_REPEAT = Blocking(DESIGN_PAIRED, _repeat)
DESIGN_BLOCKED = "blocked"


def node_of(run: RunRecord) -> str:
    """The cluster node a run ran on ("" on this machine)."""
    return run.node or str(run.environment.get("node") or "")


def _node_repeat(run: RunRecord) -> Hashable:
    return (node_of(run), run.repeat)


BLOCKED_BY_NODE = Blocking(DESIGN_BLOCKED, _node_repeat)


def blocking_for(runs: Sequence[RunRecord]) -> Blocking:
    """Blocked by node where the runs spread over several nodes, else paired by repeat."""
    nodes = {node_of(r) for r in runs}
    return BLOCKED_BY_NODE if len(nodes - {""}) > 1 else PAIRED_BY_REPEAT


def _by_block(values: Keyed) -> dict[Hashable, float] | None:
    out: dict[Hashable, float] = {}
    for key, value in values:
        if key in out:
            return None  # two runs of one side in a block: not a pair
        out[key] = value
    return out


def pair(baseline: Keyed, variant: Keyed) -> list[tuple[float, float]] | None:
    """(baseline, variant) per block, in the baseline's order; None unless every block of
    either side has exactly one value of each."""
    b, v = _by_block(baseline), _by_block(variant)
    if not b or v is None or set(b) != set(v):
        return None
    return [(b[k], v[k]) for k in b]


def _t_interval(ds: list[float], confidence: float) -> tuple[float, float, float, float, float]:
    """mean, sd, half-width, df and two-sided p of a one-sample t on `ds`."""
    n = len(ds)
    mean = math.fsum(ds) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in ds) / (n - 1))
    se = sd / math.sqrt(n)
    df = float(n - 1)
    half = t_ppf(1 - (1 - confidence) / 2, df) * se
    p = 2 * (1 - t_cdf(abs(mean) / se, df)) if se > 0 else (0.0 if mean else 1.0)
    return mean, sd, half, df, p


def compare_paired(
    pairs: Sequence[tuple[float, float]],
    *,
    metric: str,
    lower_is_better: bool | None = None,
    baseline_name: str = "baseline",
    variant_name: str = "variant",
    confidence: float = CONFIDENCE,
    design: str = DESIGN_PAIRED,
    matters: Mapping[str, float] | None = None,
) -> Comparison:
    """One variant against the baseline, block by block (see the module contract)."""
    xb = [float(b) for b, _ in pairs]
    xv = [float(v) for _, v in pairs]
    base = start(
        xb,
        xv,
        metric=metric,
        lower_is_better=lower_is_better,
        baseline_name=baseline_name,
        variant_name=variant_name,
        confidence=confidence,
        design=design,
        matters=matters,
    )
    if base.verdict:
        return base
    diffs = [v - b for b, v in pairs]
    d_mean, _, d_half, _, _ = _t_interval(diffs, confidence)
    c = replace(base, diff=d_mean, diff_ci_low=d_mean - d_half, diff_ci_high=d_mean + d_half)
    logs = all(b > 0 and v > 0 for b, v in pairs)
    ds = [math.log(v / b) for b, v in pairs] if logs else diffs
    mean, sd, half, df, p = _t_interval(ds, confidence)
    if logs:
        c = replace(c, ratio=math.exp(mean))
    if sd == 0.0:
        return exact(
            c,
            "no difference: both variants gave the same value in every repeat"
            if mean == 0.0
            else None,
            "the same in every repeat",
        )
    significant = abs(mean) > half
    c = replace(c, df=df, p_value=p, significant=significant)
    if logs:
        c = replace(
            c,
            ci_low=math.exp(mean - half),
            ci_high=math.exp(mean + half),
            method="paired-log-ratio",
        )
        observed: float | None = math.expm1(abs(mean))
    else:
        c = replace(c, ci_low=None, ci_high=None, method="paired-difference")
        mb = c.mean_baseline or 0.0
        observed = abs(mean) / mb if mb > 0 else abs(mean)
    relative = logs or (c.mean_baseline or 0.0) > 0
    var_d = sd * sd

    def pairs_for(effect: float) -> int | None:
        if logs:
            return power.n_paired(math.log1p(effect), var_d, MIN_RUNS)
        scale = (c.mean_baseline or 0.0) if relative else 1.0
        return power.n_paired(effect * scale, var_d, MIN_RUNS)

    return with_repeats(c, power.advise(observed, pairs_for, relative=relative, floor=floor_of(c)))


def compare_design(
    baseline: Keyed,
    variant: Keyed,
    *,
    metric: str,
    lower_is_better: bool | None = None,
    baseline_name: str = "baseline",
    variant_name: str = "variant",
    blocking: Blocking = PAIRED_BY_REPEAT,
    confidence: float = CONFIDENCE,
    matters: Mapping[str, float] | None = None,
) -> Comparison:
    """Paired by `blocking` when every block has one run of each, else independent (Welch)."""
    pairs = pair(baseline, variant)
    if pairs is not None:
        return compare_paired(
            pairs,
            metric=metric,
            lower_is_better=lower_is_better,
            baseline_name=baseline_name,
            variant_name=variant_name,
            confidence=confidence,
            design=blocking.design,
            matters=matters,
        )
    return compare(
        [v for _, v in baseline],
        [v for _, v in variant],
        metric=metric,
        lower_is_better=lower_is_better,
        baseline_name=baseline_name,
        variant_name=variant_name,
        confidence=confidence,
        matters=matters,
    )
