"""Simulations: the 95% interval calls "no difference" wrong about 5% of the time, not more.

A/A data (both variants drawn from one distribution) at the repeat counts people actually use,
with normal and heavy-tailed or skewed noise shifted positive like timings. Seeded, so a
failure reproduces; 4,000 trials per cell keep the binomial error of a 5% rate near 0.35%.

Documented finding (`test_percentile_bootstrap_is_overconfident_at_small_n`): a percentile
bootstrap of the ratio of means, the other method the issue allows, calls a difference in
A/A data far more often than 5% at n=3 or 5, which is why `tui_prof.comparison.stats` uses Welch/Fieller.
"""

from __future__ import annotations

import numpy as np
import pytest

from tui_prof.comparison.stats import compare

TRIALS = 4000


def _draw(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "normal":
        return 10.0 + rng.normal(0.0, 1.0, size=(TRIALS, n))
    if kind == "student_t3":
        return 10.0 + rng.standard_t(3, size=(TRIALS, n))
    if kind == "lognormal":
        return 1.0 + rng.lognormal(0.0, 1.0, size=(TRIALS, n))
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["normal", "student_t3", "lognormal"])
@pytest.mark.parametrize("n", [3, 5, 10])
def test_aa_false_difference_rate_is_at_most_nominal(kind: str, n: int) -> None:
    rng = np.random.default_rng([n, len(kind), 2026])
    a, b = _draw(rng, kind, n), _draw(rng, kind, n)
    called = 0
    for xa, xb in zip(a.tolist(), b.tolist(), strict=True):
        c = compare(xa, xb, metric="wall_time_s", baseline_name="A", variant_name="B")
        if c.ci_low is not None and c.ci_high is not None:
            # The ratio interval and the verdict must agree on every single trial.
            assert c.significant == (c.ci_low > 1 or c.ci_high < 1)
        called += c.winner is not None
    rate = called / TRIALS
    assert rate <= 0.07, f"{kind} n={n}: {rate:.3f} of A/A comparisons named a winner"


def test_interval_covers_a_true_ratio_about_95_percent() -> None:
    rng = np.random.default_rng(11)
    n, true_ratio = 5, 0.9
    a = 10.0 + rng.normal(0.0, 1.0, size=(TRIALS, n))
    b = 9.0 + rng.normal(0.0, 1.0, size=(TRIALS, n))
    covered = 0
    for xa, xb in zip(a.tolist(), b.tolist(), strict=True):
        c = compare(xa, xb, metric="wall_time_s")
        assert c.ci_low is not None and c.ci_high is not None
        covered += c.ci_low <= true_ratio <= c.ci_high
    assert 0.93 <= covered / TRIALS <= 0.97


def test_a_real_ten_percent_speedup_is_named() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        base = (10.0 * (1 + rng.normal(0, 0.01, size=5))).tolist()
        fast = (9.0 * (1 + rng.normal(0, 0.01, size=5))).tolist()
        c = compare(base, fast, metric="wall_time_s", baseline_name="fp32", variant_name="mixed")
        assert c.winner == "mixed"
        assert c.verdict.startswith("mixed is 1.1") and "× faster, 95% CI 1." in c.verdict


def _bootstrap_calls_difference(rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> float:
    """Share of trials whose 95% percentile-bootstrap interval for mean(b)/mean(a) excludes 1."""
    trials, n = a.shape
    resamples = 1000
    idx_a = rng.integers(0, n, size=(trials, resamples, n))
    idx_b = rng.integers(0, n, size=(trials, resamples, n))
    ma = np.take_along_axis(a[:, None, :], idx_a, axis=2).mean(axis=2)
    mb = np.take_along_axis(b[:, None, :], idx_b, axis=2).mean(axis=2)
    lo, hi = np.percentile(mb / ma, [2.5, 97.5], axis=1)
    return float(np.mean((lo > 1) | (hi < 1)))


def test_percentile_bootstrap_is_overconfident_at_small_n() -> None:
    rng = np.random.default_rng(5)
    rates = {}
    for n in (3, 5):
        a = 10.0 + rng.normal(0.0, 1.0, size=(1000, n))
        b = 10.0 + rng.normal(0.0, 1.0, size=(1000, n))
        rates[n] = _bootstrap_calls_difference(rng, a, b)
    # Measured 0.187 at n=3 and 0.134 at n=5 (seeded; 0.089 at n=10): 2-4x the nominal 5%.
    assert rates[3] > 0.12 and rates[5] > 0.09, rates
