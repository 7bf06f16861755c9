"""The paired design: which runs pair up, what the comparison says, and the block key a cluster
backend will use. Numbers are checked against numpy/scipy on the same data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from tui_prof.comparison.paired import (
    PAIRED_BY_REPEAT,
    Blocking,
    compare_design,
    compare_paired,
    pair,
)
from tui_prof.comparison.report import compare_experiment
from tui_prof.experiments.spec import ExperimentSpec, VariantSpec
from tui_prof.experiments.store import load_experiment
from tui_prof.experiments.writer import ExperimentStore, PlannedRun
from tui_prof.model import RUN_FAILED, RUN_FINISHED, RunRecord, RunStatus

BASE = [10.0, 12.5, 9.1, 14.0, 11.2]  # repeats differ a lot (drift, seeds) ...
FAST = [9.4, 11.9, 8.5, 13.1, 10.6]  # ... the variant is ~5% faster in every one


def test_pairs_need_exactly_one_value_of_each_side_per_block() -> None:
    assert pair([(0, 1.0), (1, 2.0)], [(1, 20.0), (0, 10.0)]) == [(1.0, 10.0), (2.0, 20.0)]
    assert pair([(0, 1.0), (1, 2.0)], [(0, 10.0)]) is None  # a repeat without the variant
    assert pair([(0, 1.0), (0, 1.5)], [(0, 10.0)]) is None  # two runs of one side in a block
    assert pair([], []) is None


def test_paired_log_ratio_matches_a_paired_t_test_on_logs() -> None:
    c = compare_paired(list(zip(BASE, FAST, strict=True)), metric="wall_time_s",
                       baseline_name="fp32", variant_name="mixed")  # fmt: skip
    logs = np.log(np.array(FAST) / np.array(BASE))
    t = sps.ttest_rel(np.log(FAST), np.log(BASE))
    half = sps.t.ppf(0.975, 4) * logs.std(ddof=1) / math.sqrt(5)
    assert (c.design, c.method, c.df) == ("paired", "paired-log-ratio", 4.0)
    assert c.ratio == pytest.approx(math.exp(logs.mean()))
    assert (c.ci_low, c.ci_high) == pytest.approx(
        (math.exp(logs.mean() - half), math.exp(logs.mean() + half))
    )
    assert c.p_value == pytest.approx(t.pvalue, rel=1e-6)
    assert c.significant and c.winner == "mixed" and c.repeats_needed is None
    assert c.verdict == "mixed is 1.06× faster, 95% CI 1.05–1.07"
    d = np.array(FAST) - np.array(BASE)
    assert c.diff == pytest.approx(d.mean())
    assert c.diff_ci_high == pytest.approx(d.mean() + sps.t.ppf(0.975, 4) * d.std(ddof=1) / 5**0.5)


def test_the_same_runs_unpaired_find_nothing() -> None:
    """What pairing is for: the repeat-to-repeat spread hides a steady 5% in Welch's test."""
    ind = compare_design(list(enumerate(BASE)), list(enumerate(FAST[:4])), metric="wall_time_s")
    assert ind.design == "independent" and not ind.significant
    assert ind.repeats_needed == 100 and ind.repeats_capped
    assert ind.verdict == (
        "no clear difference at n=5 vs 4 — resolving a 6% difference would take over 100 "
        "repeats per variant"
    )


def test_non_positive_values_pair_by_differences() -> None:
    base, var = [-1.0, 0.5, 2.0, 1.0], [-0.5, 1.1, 2.4, 1.6]
    c = compare_paired(list(zip(base, var, strict=True)), metric="score_delta")
    assert c.method == "paired-difference" and c.ci_low is None
    d = np.array(var) - np.array(base)
    assert c.diff == pytest.approx(d.mean()) and c.significant
    assert c.verdict.startswith("score_delta: variant is 0.525 higher (better), 95% CI")


def test_a_constant_ratio_is_exact() -> None:
    c = compare_paired([(10.0, 9.0), (20.0, 18.0), (15.0, 13.5)], metric="wall_time_s")
    assert c.method == "exact" and c.winner == "variant"
    assert c.verdict == "variant is 1.11× faster (the same in every repeat)"
    same = compare_paired([(10.0, 10.0), (20.0, 20.0), (15.0, 15.0)], metric="wall_time_s")
    assert same.verdict == "no difference: both variants gave the same value in every repeat"


def _experiment(
    tmp_path: Path, runs: list[tuple[str, int, float, RunStatus]], nodes: bool = False
) -> Path:
    spec = ExperimentSpec(
        name="p",
        command=("python", "t.py"),
        variants=(VariantSpec("a"), VariantSpec("b")),
        repeats=5,
        baseline="a",
    )
    plan = [PlannedRun(v, r) for v, r, _, _ in runs]
    store = ExperimentStore.create(tmp_path / "exp", spec, plan)
    for v, r, wall, status in runs:
        store.finish(
            RunRecord(
                f"{v}-r{r}", v, r, status, wall_time_s=wall, metrics={"wall_time_s": wall},
                environment={"node": f"n{r % 2}"} if nodes else {},
            )
        )  # fmt: skip
    store.close()
    return tmp_path / "exp"


def test_the_report_pairs_by_repeat_unless_a_repeat_lacks_a_run(tmp_path: Path) -> None:
    runs = [(v, r, (BASE if v == "a" else FAST)[r], RUN_FINISHED) for r in range(5) for v in "ab"]
    exp = load_experiment(_experiment(tmp_path / "1", runs))
    (c,) = compare_experiment(exp).metric("wall_time_s").comparisons
    assert c.design == "paired" and c.significant
    runs[-1] = ("b", 4, 99.0, RUN_FAILED)
    exp = load_experiment(_experiment(tmp_path / "2", runs))
    (c,) = compare_experiment(exp).metric("wall_time_s").comparisons
    assert c.design == "independent" and (c.n_baseline, c.n_variant) == (5, 4)


def test_a_blocked_design_is_a_block_key(tmp_path: Path) -> None:
    """What a cluster backend adds: runs grouped by node and repeat, the design named for it."""
    runs = [(v, r, (BASE if v == "a" else FAST)[r], RUN_FINISHED) for r in range(5) for v in "ab"]
    exp = load_experiment(_experiment(tmp_path, runs, nodes=True))
    blocked = Blocking("blocked", lambda run: (run.environment.get("node"), run.repeat))
    report = compare_experiment(exp, blocking=blocked)
    (c,) = report.metric("wall_time_s").comparisons
    assert c.design == "blocked" and c.method == "paired-log-ratio"
    assert report.to_dict()["metrics"]["wall_time_s"]["comparisons"][0]["design"] == "blocked"
    assert PAIRED_BY_REPEAT.design == "paired"
    # Runs on several nodes are blocked by node without being told; the node and host they
    # differ in are by design, not a reason to distrust the comparison.
    auto = compare_experiment(exp)
    assert (
        auto.design == "blocked" and auto.metric("wall_time_s").comparisons[0].design == "blocked"
    )
    (diff,) = auto.comparability.differences
    assert diff.field == "node" and diff.intentional and auto.comparability.ok
    assert "by design" in diff.message
    assert [(r["variant"], r["repeat"], r["node"]) for r in auto.to_dict()["runs"]][:3] == [
        ("a", 0, "n0"), ("b", 0, "n0"), ("a", 1, "n1")
    ]  # fmt: skip
