"""Simulations: the 95% interval calls "no difference" wrong about 5% of the time, not more.

A/A data (both variants drawn from one distribution) at the repeat counts people actually use,
with normal and heavy-tailed or skewed noise shifted positive like timings, for both designs
(independent: Welch/Fieller; paired: log-ratios per repeat), with and without a drift between
repeats (the machine slows by up to 50% over the experiment, with ±20% from repeat to repeat;
both runs of a repeat share it, as interleaved runs do). Seeded, so a failure reproduces; 4,000
trials per cell keep the binomial error of a 5% rate near 0.35%.

Measured (seeded), rate of false differences at n = 3 / 5 / 10:
    independent  no drift  normal 0.038 0.047 0.048  t3 0.028 0.037 0.043  lognormal 0.018 0.020 0.024
    independent  drift     normal 0.002 0.002 0.000  t3 0.004 0.002 0.001  lognormal 0.013 0.015 0.019
    paired       no drift  normal 0.052 0.052 0.049  t3 0.043 0.037 0.040  lognormal 0.038 0.043 0.045
    paired       drift     normal 0.051 0.051 0.052  t3 0.041 0.045 0.036  lognormal 0.037 0.046 0.045
Under drift the independent design stays calibrated only by becoming blind (its interval widens
with the drift); `test_pairing_narrows_the_interval_under_drift` shows what pairing gains.

Documented finding (`test_tuiprofs_interval_holds_where_a_percentile_bootstrap_is_overconfident`): a percentile
bootstrap of the ratio of means, the usual alternative, calls a difference in
A/A data far more often than 5% at n=3 or 5, which is why `tui_prof.comparison.stats` uses Welch/Fieller.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tui_prof.comparison.paired import compare_paired
from tui_prof.comparison.stats import Comparison, compare

TRIALS = 4000


def _draw(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "normal":
        return 10.0 + rng.normal(0.0, 1.0, size=(TRIALS, n))
    if kind == "student_t3":
        return 10.0 + rng.standard_t(3, size=(TRIALS, n))
    if kind == "lognormal":
        return 1.0 + rng.lognormal(0.0, 1.0, size=(TRIALS, n))
    raise ValueError(kind)


def _drift(rng: np.random.Generator, n: int, trials: int = TRIALS) -> np.ndarray:
    """Per-repeat machine speed: a steady slowdown to +50% and ±20% noise, shared in a repeat."""
    trend = 1.0 + 0.5 * np.arange(n) / (n - 1)
    return trend * np.exp(rng.normal(0.0, 0.2, size=(trials, n)))


def _compare(design: str, xa: list[float], xb: list[float]) -> Comparison:
    if design == "paired":
        return compare_paired(
            list(zip(xa, xb, strict=True)),
            metric="wall_time_s",
            baseline_name="A",
            variant_name="B",
        )
    return compare(xa, xb, metric="wall_time_s", baseline_name="A", variant_name="B")


@pytest.mark.parametrize("design", ["independent", "paired"])
@pytest.mark.parametrize("drift", [False, True], ids=["no_drift", "drift"])
@pytest.mark.parametrize("kind", ["normal", "student_t3", "lognormal"])
@pytest.mark.parametrize("n", [3, 5, 10])
def test_aa_false_difference_rate_is_at_most_nominal(
    kind: str, n: int, drift: bool, design: str
) -> None:
    rng = np.random.default_rng([n, len(kind), int(drift), 2026])
    a, b = _draw(rng, kind, n), _draw(rng, kind, n)
    if drift:
        f = _drift(rng, n)
        a, b = a * f, b * f
    called = 0
    for xa, xb in zip(a.tolist(), b.tolist(), strict=True):
        c = _compare(design, xa, xb)
        assert c.design == design
        if c.ci_low is not None and c.ci_high is not None:
            # The ratio interval and the verdict must agree on every single trial.
            assert c.significant == (c.ci_low > 1 or c.ci_high < 1)
        called += c.winner is not None
    rate = called / TRIALS
    assert rate <= 0.07, f"{design} {kind} n={n}: {rate:.3f} of A/A comparisons named a winner"


@pytest.mark.parametrize("design", ["independent", "paired"])
@pytest.mark.parametrize("kind", ["normal", "student_t3"])
def test_aa_with_timing_noise_names_no_winner_and_chases_no_noise(kind: str, design: str) -> None:
    """A/A at 2% run-to-run noise (normal, or Student t with 3 degrees of freedom: heavy tails),
    n = 3, 5, 10, with the default smallest difference that matters (5% for times): a winner is
    named in at most 5% of trials; repeats are asked only to resolve 5% or more (never the noise
    seen); at n = 10 the verdict is "no difference larger than 5%" in most trials.

    Measured (seeded, 2,000 trials), winner / repeats asked / "no difference larger than 5%":
        independent normal  n=3 0.026/0.67/0.29  n=5 0.016/0.13/0.82  n=10 0.001/0.00/0.95
        independent t3      n=3 0.020/0.81/0.16  n=5 0.021/0.57/0.40  n=10 0.021/0.20/0.75
        paired      normal  n=3 0.019/0.72/0.22  n=5 0.013/0.28/0.68  n=10 0.002/0.00/0.94
        paired      t3      n=3 0.015/0.83/0.14  n=5 0.023/0.63/0.32  n=10 0.018/0.23/0.73
    """
    trials = 1500
    for n in (3, 5, 10):
        rng = np.random.default_rng([n, len(kind), len(design), 18])
        noise = (
            rng.normal(0, 1, (2, trials, n))
            if kind == "normal"
            else rng.standard_t(3, (2, trials, n))
        )
        a, b = 10.0 * (1 + 0.02 * noise[0]), 10.0 * (1 + 0.02 * noise[1])
        winners = within = 0
        for xa, xb in zip(a.tolist(), b.tolist(), strict=True):
            c = _compare(design, xa, xb)
            winners += c.winner is not None
            within += c.verdict.startswith("no difference larger than 5%")
            if c.repeats_needed is not None:
                assert (c.repeats_effect_pct or 0) >= 5.0, c.verdict
        assert winners / trials <= 0.05, f"{design} {kind} n={n}: {winners / trials:.3f}"
        if n == 10:
            assert within / trials >= (0.85 if kind == "normal" else 0.6), within / trials


def test_pairing_narrows_the_interval_under_drift() -> None:
    """A real 10% speed-up, 2% run-to-run noise, and the drift above: five repeats each.

    Measured (seeded): the paired interval is 0.086× as wide as Welch/Fieller's (median over
    1,000 trials); pairing names the speed-up in 100% of trials, the independent design in 0.9%.
    """
    rng = np.random.default_rng(7)
    trials, n = 1000, 5
    f = _drift(rng, n, trials)
    a = 10.0 * (1 + rng.normal(0.0, 0.02, size=(trials, n))) * f
    b = 9.0 * (1 + rng.normal(0.0, 0.02, size=(trials, n))) * f
    widths, named, covered = [], {"independent": 0, "paired": 0}, 0
    for xa, xb in zip(a.tolist(), b.tolist(), strict=True):
        ind, par = _compare("independent", xa, xb), _compare("paired", xa, xb)
        assert par.ci_low is not None and par.ci_high is not None
        wide = math.inf if ind.ci_low is None or ind.ci_high is None else ind.ci_high - ind.ci_low
        widths.append((par.ci_high - par.ci_low) / wide)
        named["independent"] += ind.winner == "B"
        named["paired"] += par.winner == "B"
        covered += par.ci_low <= 0.9 <= par.ci_high
    assert float(np.median(widths)) < 0.2, np.median(widths)
    assert named["paired"] / trials > 0.95 and named["independent"] / trials < 0.2, named
    assert 0.93 <= covered / trials <= 0.97  # narrower, and still honest about the true ratio


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


def test_tuiprofs_interval_holds_where_a_percentile_bootstrap_is_overconfident() -> None:
    """On the same A/A samples at n=3 and 5, tuiprof's interval (what `compare` decides) calls a
    difference about 5% of the time; the percentile bootstrap, the method it was chosen over,
    2-4x as often. Fails if `compare` drifts to the bootstrap's overconfidence."""
    rng = np.random.default_rng(5)
    for n in (3, 5):
        a = 10.0 + rng.normal(0.0, 1.0, size=(1000, n))
        b = 10.0 + rng.normal(0.0, 1.0, size=(1000, n))
        bootstrap = _bootstrap_calls_difference(rng, a, b)
        ours = np.mean(
            [
                compare(x.tolist(), y.tolist(), metric="wall_time_s").winner is not None
                for x, y in zip(a, b, strict=True)
            ]
        )
        # Measured (seeded): bootstrap 0.187 at n=3 and 0.134 at n=5; tuiprof about 0.04.
        assert ours <= 0.065, (n, ours)
        assert bootstrap > 0.09 and bootstrap > 2 * ours, (n, bootstrap, ours)
