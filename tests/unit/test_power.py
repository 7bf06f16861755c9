"""`repeats_needed` checked by simulation: at the number it gives, the interval excludes "no
difference" in about 80% of experiments, and one repeat fewer would not do much better.

Seeded; 2,000 trials per point keep the binomial error of an 80% rate near 0.9%.
Measured (seeded), power at n-1 / n:
    independent (5% noise per run)   3%: 0.80 / 0.82 at n=46    5%: 0.80 / 0.83 at n=18
                                     8%: 0.85 / 0.89 at n=9    12%: 0.75 / 0.88 at n=5
    paired (5% noise in the ratio)   3%: 0.78 / 0.81 at n=25    5%: 0.78 / 0.83 at n=11
                                     8%: 0.74 / 0.83 at n=6    12%: 0.56 / 0.83 at n=4
The independent rule is conservative by up to about a repeat (see tui_prof.comparison.power).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tui_prof.comparison import power
from tui_prof.comparison.names import a_percent
from tui_prof.comparison.paired import compare_paired
from tui_prof.comparison.stats import compare

TRIALS = 2000
NOISE = 0.05


def _independent_power(effect: float, n: int) -> float:
    rng = np.random.default_rng([n, round(effect * 1000)])
    base = 10.0 * (1 + rng.normal(0.0, NOISE, size=(TRIALS, n)))
    fast = 10.0 * (1 - effect) + 10.0 * rng.normal(0.0, NOISE, size=(TRIALS, n))
    hits = sum(
        compare(a, b, metric="wall_time_s").significant
        for a, b in zip(base.tolist(), fast.tolist(), strict=True)
    )
    return hits / TRIALS


def _paired_power(effect: float, n: int) -> float:
    rng = np.random.default_rng([n, round(effect * 1000), 1])
    base = 10.0 * np.exp(rng.normal(0.0, 0.3, size=(TRIALS, n)))  # repeats differ a lot ...
    ratio = np.exp(rng.normal(math.log1p(effect), NOISE, size=(TRIALS, n)))  # ... ratios little
    hits = sum(
        compare_paired(list(zip(a, b, strict=True)), metric="wall_time_s").significant
        for a, b in zip(base.tolist(), (base * ratio).tolist(), strict=True)
    )
    return hits / TRIALS


@pytest.mark.parametrize("effect", [0.03, 0.05, 0.08, 0.12])
def test_independent_repeats_give_80_percent_power(effect: float) -> None:
    var = (10.0 * NOISE) ** 2
    n = power.n_independent(10.0 * effect, var, var)
    assert n is not None and n >= 3
    at_n = _independent_power(effect, n)
    assert 0.78 <= at_n <= 0.92, (n, at_n)
    if n > 3:
        assert _independent_power(effect, n - 1) <= 0.87, n  # not wasteful by more than ~1


@pytest.mark.parametrize("effect", [0.03, 0.05, 0.08, 0.12])
def test_paired_repeats_give_80_percent_power(effect: float) -> None:
    n = power.n_paired(math.log1p(effect), NOISE**2)
    assert n is not None and n >= 3
    at_n = _paired_power(effect, n)
    assert 0.78 <= at_n <= 0.92, (n, at_n)
    if n > 3:
        assert _paired_power(effect, n - 1) < 0.80, n


def test_verdict_says_how_many_repeats_would_resolve_the_difference() -> None:
    base = [10.0, 10.9, 9.4, 10.6, 9.6]
    mixed = [9.3, 10.1, 9.0, 9.9, 8.9]  # about 6% faster, within the spread at n=5
    c = compare(base, mixed, metric="wall_time_s", baseline_name="fp32", variant_name="mixed")
    assert not c.significant and c.repeats_needed is not None
    assert c.repeats_needed > 5 and not c.repeats_capped and c.repeats_note is None
    assert c.ratio is not None and c.repeats_effect_pct == pytest.approx(abs(c.ratio - 1) * 100)
    assert c.verdict == (
        f"no clear difference at n=5 — about {c.repeats_needed} repeats per variant would "
        f"resolve a {c.repeats_effect_pct:.0f}% difference"
    )


def test_resolved_and_equivalent_comparisons_need_no_more_repeats() -> None:
    resolved = compare([10.0, 10.1, 9.9], [9.0, 9.1, 8.9], metric="wall_time_s")
    assert resolved.significant and resolved.repeats_needed is None
    same = compare([10.0, 10.01, 9.99, 10.0], [10.0, 10.02, 9.99, 10.01], metric="wall_time_s")
    assert same.verdict.startswith("no difference larger than 5% at n=4 (95% CI 0.99")
    assert same.repeats_needed is None and same.winner is None
    few = compare([10.0, 10.1], [9.0, 9.1], metric="wall_time_s")
    assert few.repeats_needed is None


def test_a_difference_too_small_to_matter_is_capped_with_a_note() -> None:
    base = [10.0, 10.5, 9.5, 10.2, 9.8]
    same_ish = [10.04, 10.54, 9.54, 10.24, 9.84]  # 0.4% apart; the spread is ±2.5%
    one = {"wall_time_s": 1.0}  # the smallest difference that matters, set to 1%
    c = compare(base, same_ish, metric="wall_time_s", variant_name="v", matters=one)
    assert not c.significant and c.repeats_effect_pct == pytest.approx(1.0)
    assert c.repeats_observed_pct == pytest.approx(0.4, abs=0.01)
    assert c.repeats_note is not None and "under 1%, too small to matter" in c.repeats_note
    assert "the 0.4% seen is too small to matter" in c.verdict
    assert c.repeats_needed is not None and c.repeats_needed <= power.MAX_REPEATS


def test_more_than_a_hundred_repeats_is_capped() -> None:
    assert power.n_independent(0.01, 1.0, 1.0) is None
    advice = power.advise(0.02, lambda effect: None)
    assert advice is not None and advice.capped and advice.repeats == power.MAX_REPEATS
    assert advice.note == "over 100 repeats per variant would be needed to resolve a 2% difference"


def test_repeats_are_advised_only_for_the_smallest_difference_that_matters() -> None:
    """5% for times by default: a smaller difference seen is never chased; where the interval
    lies within ±5% the verdict says so and asks for nothing; set per metric it moves."""
    base = [10.0, 10.5, 9.5, 10.2, 9.8]
    same_ish = [10.04, 10.54, 9.54, 10.24, 9.84]  # 0.4% apart; the spread is ±2.5%
    c = compare(base, same_ish, metric="wall_time_s", variant_name="v")
    assert c.min_effect_pct == 5.0 and c.repeats_effect_pct == pytest.approx(5.0)
    assert c.repeats_needed is not None and c.repeats_needed < 20
    assert "would resolve 5%" in c.verdict
    tight = [10.0, 10.02, 9.98, 10.01, 9.99]
    c = compare(tight, [x * 1.01 for x in tight], metric="wall_time_s", variant_name="v")
    # a real 1% slowdown, resolved, but under what matters: said, and no winner named
    assert c.significant and c.winner is None and c.repeats_needed is None
    assert c.verdict.endswith("under the 5% that matters")
    c = compare(
        tight, [x * 1.01 for x in tight], metric="wall_time_s", matters={"wall_time_s": 0.5}
    )
    assert c.winner == "baseline" and c.min_effect_pct == 0.5
    acc = compare([0.9, 0.91, 0.89], [0.9, 0.91, 0.89], metric="accuracy")
    assert acc.min_effect_pct is None  # not a time: none unless given


def test_a_percent_takes_the_article_it_is_spoken_with() -> None:
    assert [a_percent(n) for n in ("6", "1.5", "12", "100", "118")] == [
        "a 6%",
        "a 1.5%",
        "a 12%",
        "a 100%",
        "a 118%",
    ]
    assert [a_percent(n) for n in ("8", "8.5", "11", "18", "80", "800", "11000")] == [
        "an 8%",
        "an 8.5%",
        "an 11%",
        "an 18%",
        "an 80%",
        "an 800%",
        "an 11000%",
    ]


def test_the_repeats_advice_reads_an_8_percent_difference() -> None:
    advice = power.advise(0.08, lambda effect: None)  # no number of repeats would resolve it
    assert advice is not None and advice.capped
    assert advice.note is not None and advice.note.endswith("to resolve an 8% difference"), (
        advice.note
    )


def test_the_verdict_reads_an_8_percent_difference() -> None:
    base, mixed = [10.0, 10.9, 9.4, 10.6, 9.6], [9.1, 10.4, 8.7, 9.9, 8.4]  # 7.9% apart, n=5
    c = compare(base, mixed, metric="wall_time_s", baseline_name="fp32", variant_name="mixed")
    assert not c.significant
    assert c.verdict.endswith("repeats per variant would resolve an 8% difference"), c.verdict
