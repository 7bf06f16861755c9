"""The plain sentences of comparisons: "mixed is 1.07× faster, 95% CI 1.02–1.12".

Contract: `conclude(c)` names the winner and writes the verdict of a `Comparison` whose interval
and `significant` flag are set, for every design alike. A winner is named only when the interval
excludes "no difference" and reaches past the smallest difference that matters
(`c.min_effect_pct`; 5% for times by default, tui_prof.comparison.names). An interval inside
±that much says "no difference larger than 5%" (or, excluding 1, "… under the 5% that matters")
and asks for no repeats; otherwise the verdict says at which n, and how many repeats per
variant would resolve a difference at least that large (tui_prof.comparison.power).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tui_prof.comparison.names import a_percent, is_time_metric, metric_unit

if TYPE_CHECKING:
    from tui_prof.comparison.stats import Comparison

EQUIVALENCE_PCT = 2.0  # an interval within ±2% of "same" is reported as "under x%"


def _fmt_x(near: float) -> int:
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


def ci_text(c: Comparison) -> str:
    return f"{c.confidence * 100:g}% CI"


def n_text(nb: int, nv: int) -> str:
    return f"n={nb}" if nb == nv else f"n={nb} vs {nv}"


def num(x: float) -> str:
    return f"{x:.3g}"


def ratio_verdict(c: Comparison) -> str:
    """The verdict from the ratio interval (a "×" for time, "%" for other metrics)."""
    assert c.ratio is not None and c.ci_low is not None and c.ci_high is not None
    r, lo, hi, v = c.ratio, c.ci_low, c.ci_high, c.variant
    if is_time_metric(c.metric):
        if r < 1:
            s_lo, s_hi = 1 / hi, 1 / lo
            d = _fmt_x(s_lo)
            return f"{v} is {1 / r:.{d}f}× faster, {ci_text(c)} {s_lo:.{d}f}–{s_hi:.{d}f}"
        d = _fmt_x(lo)
        return f"{v} is {r:.{d}f}× slower, {ci_text(c)} {lo:.{d}f}–{hi:.{d}f}"
    higher = r > 1
    good = higher != c.lower_is_better
    p, p_lo, p_hi = ((r - 1) * 100, (lo - 1) * 100, (hi - 1) * 100)
    if not higher:
        p, p_lo, p_hi = -p, -p_hi, -p_lo
    d = _fmt_pct(p_lo)
    word = "higher" if higher else "lower"
    return (
        f"{c.metric}: {v} is {p:.{d}f}% {word} ({'better' if good else 'worse'}), "
        f"{ci_text(c)} {p_lo:.{d}f}–{p_hi:.{d}f}% {word}"
    )


def diff_verdict(c: Comparison) -> str:
    """The verdict from the difference interval, where no ratio is meaningful."""
    assert c.diff is not None and c.diff_ci_low is not None and c.diff_ci_high is not None
    unit = metric_unit(c.metric)
    u = f" {unit}" if unit else ""
    lo, hi = sorted((abs(c.diff_ci_low), abs(c.diff_ci_high)))
    higher = c.diff > 0
    if is_time_metric(c.metric):
        word = "slower" if higher else "faster"
        return f"{c.variant} is {num(abs(c.diff))}{u} {word}, {ci_text(c)} {num(lo)}–{num(hi)}{u}"
    good = higher != c.lower_is_better
    word = "higher" if higher else "lower"
    return (
        f"{c.metric}: {c.variant} is {num(abs(c.diff))}{u} {word} "
        f"({'better' if good else 'worse'}), {ci_text(c)} {num(lo)}–{num(hi)}{u} {word}"
    )


def equivalent_within(c: Comparison) -> float | None:
    """The largest difference (percent) the interval allows, when under the smallest difference
    that matters (EQUIVALENCE_PCT where none is set)."""
    if c.ci_low is None or c.ci_high is None:
        return None
    worst = max(abs(c.ci_low - 1), abs(c.ci_high - 1)) * 100
    limit = c.min_effect_pct if c.min_effect_pct is not None else EQUIVALENCE_PCT
    return worst if worst < limit else None


def _pct(x: float) -> str:
    """6% rather than 6.2%; 1.6% and 1% below 2%."""
    return f"{x:.0f}" if x >= 2 else f"{x:.1f}".removesuffix(".0")


def _repeats_text(c: Comparison) -> str:
    """ "about 14 repeats per variant would resolve a 6% difference", or why not."""
    n, pct, seen = c.repeats_needed, c.repeats_effect_pct, c.repeats_observed_pct
    if n is None:
        return "run more repeats"
    what = f"{a_percent(_pct(pct))} difference" if pct is not None else "this difference"
    small = seen is not None and pct is not None and seen < pct
    head = f"the {seen:.1f}% seen is too small to matter; " if small else ""
    if small:
        what = f"{_pct(pct)}%" if pct is not None else what
    if c.repeats_capped:
        return f"{head}resolving {what} would take over {n} repeats per variant"
    return f"{head}about {n} repeats per variant would resolve {what}"


def no_difference(c: Comparison) -> str:
    n = n_text(c.n_baseline, c.n_variant)
    worst = equivalent_within(c)
    if worst is not None and c.min_effect_pct is not None:
        assert c.ci_low is not None and c.ci_high is not None
        return (
            f"no difference larger than {_pct(c.min_effect_pct)}% at {n} "
            f"({ci_text(c)} {c.ci_low:.3f}–{c.ci_high:.3f})"
        )
    if worst is not None:
        assert c.ci_low is not None and c.ci_high is not None
        return (
            f"no clear difference at {n}: any difference is under {worst:.1f}% "
            f"({ci_text(c)} {c.ci_low:.3f}–{c.ci_high:.3f})"
        )
    return f"no clear difference at {n} — {_repeats_text(c)}"


def winner(c: Comparison) -> str:
    """The better one by the estimate the interval is about (the ratio where there is one)."""
    if c.ratio is not None and c.ci_low is not None:
        variant_better = (c.ratio < 1) == c.lower_is_better
    else:
        assert c.diff is not None
        variant_better = (c.diff < 0) == c.lower_is_better
    return c.variant if variant_better else c.baseline


def conclude(c: Comparison) -> Comparison:
    """The winner (only where significant, and where the interval reaches the smallest
    difference that matters) and the verdict sentence."""
    if not c.significant:
        return replace(c, winner=None, verdict=no_difference(c))
    if c.min_effect_pct is not None and c.ci_low is not None and equivalent_within(c) is not None:
        # Real but smaller than what matters: said, and no winner is named for it.
        text = f"{ratio_verdict(c)}: under the {_pct(c.min_effect_pct)}% that matters"
        return replace(c, winner=None, verdict=text)
    c = replace(c, winner=winner(c))
    text = ratio_verdict(c) if c.ci_low is not None else diff_verdict(c)
    return replace(c, verdict=text)


def under_load(c: Comparison, noisy: int, runs: int) -> Comparison:
    """An unresolved comparison most of whose runs were measured under load or throttled: more
    repeats would measure the load, not the variants, so none are advised (pyperf's advice for
    an unstable benchmark: quiet the machine)."""
    if c.significant or c.repeats_needed is None or 2 * noisy < runs:
        return c
    why = (
        f"{noisy} of {runs} runs were measured under load or throttled: quiet the machine "
        "rather than add repeats"
    )
    return replace(
        c,
        repeats_needed=None,
        repeats_capped=False,
        repeats_note=why,
        verdict=f"no clear difference at {n_text(c.n_baseline, c.n_variant)} — {why}",
    )
