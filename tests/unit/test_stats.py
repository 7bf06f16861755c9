"""Statistics against scipy on the same data, and the wording rules of verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from tui_prof.comparison.stats import (
    MIN_RUNS,
    box_stats,
    compare,
    describe,
    is_time_metric,
    lower_is_better,
    metric_unit,
    welch_df,
)
from tui_prof.comparison.tdist import betainc, betaincinv, f_ppf, t_cdf, t_ppf

RNG = np.random.default_rng(20261122)
SAMPLES = [
    [12.1, 11.8, 12.4],
    [0.931, 0.928, 0.925, 0.934, 0.902],
    list(10 + RNG.standard_t(3, size=7)),
    list(RNG.lognormal(0, 1, size=12)),
    [5.0, 5.0, 5.0, 5.0],
]


@pytest.mark.parametrize("df", [0.5, 1, 1.5, 2, 2.7, 3, 4, 5, 7.3, 10, 30, 100, 1000, 1e5, 1e7])
def test_t_ppf_matches_scipy(df: float) -> None:
    for p in [1e-8, 1e-4, 0.001, 0.025, 0.05, 0.1, 0.3, 0.4999, 0.5, 0.5001, 0.9, 0.975, 0.9995]:
        want = float(sps.t.ppf(p, df))
        got = t_ppf(p, df)
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (p, df, got, want)
        # 1 - p is itself rounded, so symmetry holds to that rounding, amplified in the tails.
        assert t_ppf(1 - p, df) == pytest.approx(-got, rel=1e-6, abs=1e-12)


def test_t_cdf_betainc_and_f_ppf_match_scipy() -> None:
    for df in [1, 2.5, 4, 9, 50]:
        for t in [-30, -2.5, -0.1, 0, 0.7, 2.0, 12]:
            assert t_cdf(t, df) == pytest.approx(float(sps.t.cdf(t, df)), abs=1e-12)
    for a, b in [(0.5, 0.5), (2, 3), (0.5, 40), (40, 0.5), (300, 2)]:
        for x in [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999]:
            assert betainc(a, b, x) == pytest.approx(float(special.betainc(a, b, x)), abs=1e-11)
        for p in [1e-6, 0.025, 0.5, 0.975]:
            want = float(special.betaincinv(a, b, p))
            assert betaincinv(a, b, p) == pytest.approx(want, rel=1e-9, abs=1e-14)
    for dfn in [1, 2, 4, 9]:
        for dfd in [1, 2, 4, 9, 30]:
            for p in [0.025, 0.5, 0.975]:
                assert f_ppf(p, dfn, dfd) == pytest.approx(float(sps.f.ppf(p, dfn, dfd)), rel=1e-9)


def test_t_ppf_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        t_ppf(1.5, 3)
    with pytest.raises(ValueError):
        t_ppf(0.9, 0)
    assert t_ppf(1.0, 3) == math.inf


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
@pytest.mark.parametrize("values", SAMPLES)
def test_describe_matches_scipy_and_numpy_linear_quantiles(values: list[float]) -> None:
    d = describe(values)
    ref = sps.describe(values)
    assert d.n == ref.nobs
    assert d.mean == pytest.approx(ref.mean, rel=1e-12)
    assert d.std == pytest.approx(math.sqrt(ref.variance), rel=1e-12, abs=1e-15)
    assert (d.min, d.max) == (ref.minmax[0], ref.minmax[1])
    q = np.quantile(values, [0.25, 0.5, 0.75, 0.9], method="linear")
    assert [d.q1, d.median, d.q3, d.p90] == pytest.approx(list(q), rel=1e-12)
    assert d.q3 is not None and d.q1 is not None
    assert d.q3 - d.q1 == pytest.approx(sps.iqr(values), abs=1e-12)
    assert d.median == pytest.approx(float(np.median(values)))


def test_describe_small_and_empty() -> None:
    assert describe([]).to_dict() == {k: (0 if k == "n" else None) for k in describe([]).to_dict()}
    one = describe([3.5])
    assert (one.n, one.mean, one.std, one.median, one.p90) == (1, 3.5, None, 3.5, 3.5)


def test_box_stats_tukey_whiskers_and_outliers() -> None:
    b = box_stats([1, 2, 3, 4, 10])
    assert b is not None
    # q1=2, q3=4, IQR=2: fences at -1 and 7, so 10 is an outlier and the whisker stops at 4.
    assert (b.q1, b.median, b.q3, b.whisker_low, b.whisker_high) == (2, 3, 4, 1, 4)
    assert b.outliers == (10.0,)
    assert box_stats([]) is None


@pytest.mark.parametrize("i,j", [(0, 1), (2, 3), (3, 2), (1, 2)])
def test_welch_pieces_match_scipy(i: int, j: int) -> None:
    base, var = SAMPLES[i], SAMPLES[j]
    c = compare(base, var, metric="score")
    res = sps.ttest_ind(var, base, equal_var=False)
    assert c.df == pytest.approx(float(res.df), rel=1e-10)
    assert c.p_value == pytest.approx(float(res.pvalue), rel=1e-7, abs=1e-12)
    ci = res.confidence_interval(0.95)
    assert c.diff_ci_low == pytest.approx(float(ci.low), rel=1e-8)
    assert c.diff_ci_high == pytest.approx(float(ci.high), rel=1e-8)
    vb, vv = np.var(base, ddof=1), np.var(var, ddof=1)
    assert welch_df(vb, len(base), vv, len(var)) == pytest.approx(float(res.df), rel=1e-10)
    assert c.significant == (res.pvalue < 0.05)


def test_fieller_interval_solves_its_defining_equation_with_scipy_t() -> None:
    base, var = SAMPLES[0], [10.9, 11.3, 11.0, 11.2]
    c = compare(base, var, metric="wall_time_s")
    assert c.method == "fieller-welch"
    assert c.ci_low is not None and c.ci_high is not None and c.ratio is not None
    mb, mv = np.mean(base), np.mean(var)
    a, b = np.var(var, ddof=1) / len(var), np.var(base, ddof=1) / len(base)
    tq = sps.t.ppf(0.975, c.df)
    for theta in (c.ci_low, c.ci_high):
        assert (mv - theta * mb) ** 2 == pytest.approx(tq**2 * (a + theta**2 * b), rel=1e-9)
    assert c.ci_low < c.ratio < c.ci_high
    assert c.ratio == pytest.approx(mv / mb)


def test_spread_interval_matches_scipy_f() -> None:
    base, var = [0.930, 0.931, 0.929, 0.932, 0.930], [0.93, 0.91, 0.94, 0.92, 0.935]
    c = compare(base, var, metric="val_accuracy", baseline_name="fp32", variant_name="mixed")
    ratio = np.std(var, ddof=1) / np.std(base, ddof=1)
    f_obs = ratio**2
    assert c.spread_ratio == pytest.approx(ratio)
    assert c.spread_ci_low == pytest.approx(math.sqrt(f_obs / sps.f.ppf(0.975, 4, 4)), rel=1e-8)
    assert c.spread_ci_high == pytest.approx(math.sqrt(f_obs / sps.f.ppf(0.025, 4, 4)), rel=1e-8)
    assert c.spread_note is not None
    assert c.spread_note.startswith(f"mixed's val_accuracy varies {ratio:.1f}× more")


def test_time_verdict_names_the_faster_variant_with_its_interval() -> None:
    base = [10.0, 10.1, 9.9, 10.05, 9.95]
    fast = [9.4, 9.45, 9.35, 9.5, 9.42]
    c = compare(base, fast, metric="wall_time_s", baseline_name="fp32", variant_name="mixed")
    assert c.winner == "mixed" and c.significant
    assert c.ci_low is not None and c.ci_high is not None and c.ratio is not None
    speed, lo, hi = 1 / c.ratio, 1 / c.ci_high, 1 / c.ci_low
    assert c.verdict == f"mixed is {speed:.2f}× faster, 95% CI {lo:.2f}–{hi:.2f}"
    slow = compare(fast, base, metric="wall_time_s", baseline_name="mixed", variant_name="fp32")
    assert slow.winner == "mixed" and "fp32 is 1.06× slower, 95% CI" in slow.verdict


def test_non_time_verdict_in_percent_with_direction() -> None:
    base = [0.930, 0.931, 0.929, 0.932, 0.930]
    lower = [0.922, 0.923, 0.921, 0.924, 0.922]
    c = compare(base, lower, metric="val_accuracy", variant_name="mixed")
    assert c.verdict.startswith("val_accuracy: mixed is 0.9% lower (worse), 95% CI ")
    assert c.verdict.endswith("% lower") and c.winner == "baseline"
    loss = compare(base, lower, metric="val_loss", variant_name="mixed")
    assert "lower (better)" in loss.verdict and loss.winner == "mixed"


def test_no_winner_when_the_interval_includes_no_difference() -> None:
    c = compare([10.0, 10.6, 9.5], [9.8, 10.4, 9.9], metric="wall_time_s", variant_name="m")
    assert not c.significant and c.winner is None
    assert c.ci_low is not None and c.ci_high is not None
    assert c.ci_low < 1 < c.ci_high
    assert c.verdict == (  # repeats only to resolve the smallest difference that matters (5%)
        "no clear difference at n=3 — the 0.0% seen is too small to matter; "
        "about 15 repeats per variant would resolve 5%"
    )
    assert (c.repeats_needed, c.repeats_capped, c.design) == (15, False, "independent")
    assert c.repeats_note is not None and "under 5%" in c.repeats_note


def test_too_few_runs_give_no_interval() -> None:
    c = compare([10.0, 10.1], [5.0, 5.1], metric="wall_time_s", variant_name="m")
    assert c.verdict == f"too few runs (n=2): need at least {MIN_RUNS}"
    assert (c.ci_low, c.ci_high, c.winner, c.significant) == (None, None, None, False)
    assert c.ratio == pytest.approx(5.05 / 10.05)
    c = compare([10.0, 10.1, 10.2], [5.0], metric="wall_time_s", variant_name="m")
    assert c.verdict == "too few runs of m (n=1): need at least 3"
    assert compare([], [1.0], metric="x", baseline_name="b").verdict == "no finished runs of b"


def test_constant_values_and_non_positive_baselines() -> None:
    same = compare([5, 5, 5], [5, 5, 5], metric="epochs")
    assert same.verdict == "no difference: every run gave 5" and same.winner is None
    exact = compare([4, 4, 4], [2, 2, 2], metric="step_time_ms", variant_name="m")
    assert exact.verdict == "m is 2.00× faster (every run gave the same value)"
    # A baseline mean <= 0 makes a ratio meaningless: the verdict uses the difference.
    neg = compare([-1.0, -1.1, -0.9], [2.0, 2.1, 1.9], metric="log_score", variant_name="m")
    assert neg.ratio is None and neg.method == "welch-difference"
    assert neg.verdict.startswith("log_score: m is 3 higher (better), 95% CI ")


def test_direction_and_unit_rules() -> None:
    for name in ["wall_time_s", "epoch_time", "val_loss", "latency_p50", "step_ms", "error_rate"]:
        assert lower_is_better(name), name
    for name in ["val_accuracy", "accuracy", "throughput", "examples_per_sec", "f1"]:
        assert not lower_is_better(name), name
    assert is_time_metric("wall_time_s") and not is_time_metric("val_loss")
    units = [metric_unit(m) for m in ("wall_time_s", "step_ms", "latency_us", "val_accuracy")]
    assert units == ["s", "ms", "µs", ""]


def test_unbounded_fieller_set_falls_back_to_the_difference() -> None:
    # The baseline's mean is not distinguishable from zero, so no finite ratio interval exists.
    c = compare([0.1, 2.0, 0.05], [5.0, 5.1, 4.9], metric="score", variant_name="m")
    assert c.ratio is not None and c.ci_low is None and c.method == "welch-difference"
    assert c.significant and c.verdict.startswith("score: m is 4.28 higher (better), 95% CI ")


def test_other_confidence_levels_say_so() -> None:
    base, fast = [10.0, 10.1, 9.9, 10.05, 9.95], [9.4, 9.45, 9.35, 9.5, 9.42]
    c = compare(base, fast, metric="wall_time_s", variant_name="m", confidence=0.9)
    assert ", 90% CI " in c.verdict
    res = sps.ttest_ind(fast, base, equal_var=False).confidence_interval(0.9)
    assert (c.diff_ci_low, c.diff_ci_high) == pytest.approx((res.low, res.high), rel=1e-8)
