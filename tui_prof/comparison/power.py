"""How many repeats a verdict needs: repeats per variant at which the 95% interval would exclude
"no difference" with 80% power, taking the observed difference and spread as the truth.

Contract:
- Independent design (Welch): the smallest n per variant with
  |effect| / sqrt((s_b² + s_v²) / n) >= t(0.975, ν) + t(0.80, ν), with ν = n − 1, the fewest
  degrees of freedom Welch's test can have at n runs each: its estimated ν varies below the
  expected 2n − 2, and taking the expected value fell short of 80% at 4–8 repeats.
- Paired design: the same on the per-repeat log-ratios (or differences), s_d their standard
  deviation, ν = n - 1.
  The t + t rule is the usual approximation of the noncentral t power (within a few points of 80%
  at these sizes; tests/unit/test_power.py checks it by simulation).
- "Too small to matter": a difference under the smallest difference that matters (the
  comparison's `min_effect`: 5% for times by default, else `MIN_EFFECT`, 1%). For a smaller
  observed difference the number is the repeats that would resolve that much, with a note.
- At most `MAX_REPEATS` (100): beyond, the number is capped and the note says "over 100".
- An estimate from a handful of runs: the observed difference and spread are themselves noisy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from tui_prof.comparison.names import a_percent
from tui_prof.comparison.tdist import t_ppf

CONFIDENCE = 0.95
POWER = 0.80
MIN_EFFECT = 0.01  # relative differences under 1% are too small to be worth resolving
MAX_REPEATS = 100
_Z = 1.959963984540054 + 0.8416212335729143  # normal quantiles: the starting guess


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom of a difference of two means."""
    a, b = var_a / n_a, var_b / n_b
    return (a + b) ** 2 / (a * a / (n_a - 1) + b * b / (n_b - 1))


@lru_cache(maxsize=4096)
def _t(p: float, df: int) -> float:
    return t_ppf(p, df)


def _critical(df: float, confidence: float) -> float:
    """t(1 - α/2) + t(power) at df rounded down (cached: the search calls it often)."""
    d = max(1, math.floor(df))
    return _t(1 - (1 - confidence) / 2, d) + _t(POWER, d)


def _search(
    effect: float, se_at: Callable[[int], float], df_at: Callable[[int], float], start: int
) -> int | None:
    """The smallest n >= start with effect / se(n) >= critical(n), or None above MAX_REPEATS."""
    for n in range(start, MAX_REPEATS + 1):
        if effect / se_at(n) >= _critical(df_at(n), CONFIDENCE):
            return n
    return None


def _start(effect: float, variance: float, minimum: int) -> int:
    """Normal-theory n, a lower bound of the t-based one: the search begins there."""
    guess = math.ceil(_Z * _Z * variance / (effect * effect)) if effect > 0 else MAX_REPEATS + 1
    return max(minimum, min(guess, MAX_REPEATS + 1))


def n_independent(effect: float, var_b: float, var_v: float, minimum: int = 3) -> int | None:
    """Runs per variant at which Welch's 95% interval excludes 0 with 80% power (None: > 100)."""
    total = var_b + var_v
    if effect <= 0 or total <= 0:
        return None

    return _search(
        effect, lambda n: math.sqrt(total / n), lambda n: n - 1.0, _start(effect, total, minimum)
    )


def n_paired(effect: float, var_d: float, minimum: int = 3) -> int | None:
    """Pairs at which the paired 95% interval excludes 0 with 80% power (None: > 100)."""
    if effect <= 0 or var_d <= 0:
        return None
    return _search(
        effect, lambda n: math.sqrt(var_d / n), lambda n: n - 1.0, _start(effect, var_d, minimum)
    )


@dataclass(frozen=True)
class RepeatsAdvice:
    """What a comparison that resolved nothing says about more repeats."""

    repeats: int  # per variant (pairs in the paired design); MAX_REPEATS when capped
    effect_pct: float | None  # the difference the number is for, in percent of the baseline
    observed_pct: float | None  # the difference seen, in percent (None where no ratio exists)
    capped: bool = False
    note: str | None = None


def advise(
    observed: float | None,
    n_for: Callable[[float], int | None],
    *,
    relative: bool = True,
    floor: float | None = None,
) -> RepeatsAdvice | None:
    """Repeats for the observed relative difference (at least `floor`, the smallest difference
    that matters, default MIN_EFFECT), or None when unknown: a difference smaller than the floor
    is never chased, only one as large as the floor resolved.

    `observed` is the relative difference (0.06 for 6%) when `relative`, else an absolute one
    with no "too small" floor; `n_for(effect)` turns a difference into runs per variant.
    """
    if observed is None or not math.isfinite(observed):
        return None
    least = MIN_EFFECT if floor is None else floor
    small = relative and observed < least
    target = least if small else observed
    n = n_for(target)
    pct = target * 100 if relative else None
    seen = observed * 100 if relative else None
    note = None
    if small:
        note = (
            f"the difference seen ({observed * 100:.1f}%) is under {least * 100:g}%, "
            f"too small to matter: the number is for {a_percent(f'{least * 100:g}')} difference"
        )
    if n is None:
        what = f"{a_percent(f'{pct:.0f}')} difference" if pct is not None else "this difference"
        note = (note + "; " if note else "") + (
            f"over {MAX_REPEATS} repeats per variant would be needed to resolve {what}"
        )
        return RepeatsAdvice(MAX_REPEATS, pct, seen, capped=True, note=note)
    return RepeatsAdvice(n, pct, seen, note=note)
