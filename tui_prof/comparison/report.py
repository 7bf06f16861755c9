"""An experiment's comparison: statistics per metric and variant, verdicts, and the guard.

Contract: `compare_experiment(exp)` is pure (no I/O): it counts only finished, non-warm-up runs;
runs (warm-ups included) that failed, timed out, were stopped or interrupted are counted in
`failed_runs` and listed, never averaged. `ComparisonReport.to_dict()` is the `tuiprof compare --json` document:
exactly the issue's contract (metrics → variants/comparisons, comparability, failed_runs) plus
extra fields. The TUI and the CLI render the same report, so they cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_prof.comparison.comparability import Comparability, check_comparability
from tui_prof.comparison.stats import (
    Comparison,
    Describe,
    compare,
    describe,
    lower_is_better,
    metric_unit,
)
from tui_prof.model import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_INTERRUPTED,
    RUN_STOPPED,
    RUN_TIMEOUT,
    ExperimentRecord,
    RunRecord,
)

WALL_TIME = "wall_time_s"
FAILED_STATUSES = (RUN_FAILED, RUN_TIMEOUT, RUN_INTERRUPTED, RUN_STOPPED)


@dataclass(frozen=True)
class MetricReport:
    """One metric: each variant's values and summary, and each variant against the baseline."""

    name: str
    unit: str
    lower_is_better: bool
    values: dict[str, tuple[float, ...]]  # variant -> counted runs' values, in run order
    variants: dict[str, Describe]
    comparisons: tuple[Comparison, ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "variants": {v: d.to_dict() for v, d in self.variants.items()},
            "comparisons": [c.to_dict() for c in self.comparisons],
            "unit": self.unit,
            "lower_is_better": self.lower_is_better,
            "values": {v: list(xs) for v, xs in self.values.items()},
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class FailedRun:
    """A run left out of the statistics, and why."""

    run_id: str
    variant: str
    repeat: int
    status: str
    error: str | None
    is_warmup: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "variant": self.variant,
            "repeat": self.repeat,
            "status": self.status,
            "error": self.error,
            "is_warmup": self.is_warmup,
        }


@dataclass(frozen=True)
class ComparisonReport:
    """Everything `tuiprof compare` shows about an experiment."""

    experiment: str
    directory: str
    baseline: str
    variants: tuple[str, ...]
    metrics: tuple[MetricReport, ...]
    comparability: Comparability
    failed: tuple[FailedRun, ...]
    counted_runs: int
    pending_runs: int  # pending or still running: the numbers will change

    @property
    def failed_runs(self) -> int:
        return len(self.failed)

    def metric(self, name: str) -> MetricReport:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": {m.name: m.to_dict() for m in self.metrics},
            "comparability": self.comparability.to_dict(),
            "failed_runs": self.failed_runs,
            "experiment": self.experiment,
            "directory": self.directory,
            "baseline": self.baseline,
            "variants": list(self.variants),
            "counted_runs": self.counted_runs,
            "pending_runs": self.pending_runs,
            "failed": [f.to_dict() for f in self.failed],
        }


def counted_runs(runs: Iterable[RunRecord]) -> list[RunRecord]:
    """The runs statistics use: finished and not warm-ups."""
    return [r for r in runs if r.status == RUN_FINISHED and not r.is_warmup]


def metric_value(run: RunRecord, metric: str) -> float | None:
    """A run's final value of `metric`; wall time falls back to the runner's own measurement."""
    value = run.metrics.get(metric)
    if value is None and metric == WALL_TIME:
        value = run.wall_time_s
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def available_metrics(exp: ExperimentRecord) -> list[str]:
    """The spec's metrics first, then any other number a counted run reported."""
    names = list(dict.fromkeys([WALL_TIME, *exp.metrics]))
    for run in counted_runs(exp.runs):
        names.extend(k for k in run.metrics if k not in names)
    return names


def _metric_report(
    name: str, runs: Sequence[RunRecord], variants: Sequence[str], baseline: str
) -> MetricReport:
    lib = lower_is_better(name)
    values: dict[str, tuple[float, ...]] = {}
    warnings: list[str] = []
    for v in variants:
        raw = [metric_value(r, name) for r in runs if r.variant == v]
        bad = sum(1 for x in raw if x is not None and not math.isfinite(x))
        missing = sum(1 for x in raw if x is None)
        if bad:
            warnings.append(f"{v}: {bad} run(s) reported a non-finite {name} (left out)")
        if missing and len(raw) > missing:
            warnings.append(f"{v}: {missing} finished run(s) did not report {name}")
        values[v] = tuple(x for x in raw if x is not None and math.isfinite(x))
    comparisons = tuple(
        compare(
            values[baseline],
            values[v],
            metric=name,
            lower_is_better=lib,
            baseline_name=baseline,
            variant_name=v,
        )
        for v in variants
        if v != baseline
    )
    return MetricReport(
        name=name,
        unit=metric_unit(name),
        lower_is_better=lib,
        values=values,
        variants={v: describe(xs) for v, xs in values.items()},
        comparisons=comparisons,
        warnings=tuple(warnings),
    )


def compare_experiment(
    exp: ExperimentRecord,
    metrics: Sequence[str] | None = None,
    *,
    intentional: Iterable[str] = (),
) -> ComparisonReport:
    """Statistics, verdicts and the comparability check for `exp` (see the module contract).

    `metrics` restricts and orders the metrics (default: `available_metrics(exp)`); a metric
    no run reported still gets a report with n=0 everywhere. `intentional` names fields the
    variants change on purpose (see `tui_prof.comparison.comparability.intentional_fields`).
    """
    variants = list(exp.variants)
    for r in exp.runs:
        if r.variant not in variants:
            variants.append(r.variant)
    baseline = exp.baseline if exp.baseline in variants else variants[0]
    variants.remove(baseline)
    variants.insert(0, baseline)
    runs = counted_runs(exp.runs)
    names = list(metrics) if metrics is not None else available_metrics(exp)
    failed = tuple(
        FailedRun(r.run_id, r.variant, r.repeat, r.status, r.error, r.is_warmup)
        for r in exp.runs
        if r.status in FAILED_STATUSES
    )
    pending = sum(1 for r in exp.runs if r.status not in (RUN_FINISHED, *FAILED_STATUSES))
    return ComparisonReport(
        experiment=exp.name,
        directory=exp.directory,
        baseline=baseline,
        variants=tuple(variants),
        metrics=tuple(_metric_report(n, runs, variants, baseline) for n in names),
        comparability=check_comparability(runs, intentional=intentional),
        failed=failed,
        counted_runs=len(runs),
        pending_runs=pending,
    )


def build_report(experiment_dir: str | Path, metrics: list[str] | None = None) -> ComparisonReport:
    """Load and compare; raises ValueError with a one-line message for the user."""
    from tui_prof.comparison.comparability import intentional_fields
    from tui_prof.experiments.store import StoreError, load_experiment, load_spec_from

    path = Path(experiment_dir)
    if not path.exists():
        raise ValueError(f"{path}: no such directory")
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory")
    try:
        exp = load_experiment(path)
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    intended: set[str] = set()
    try:
        spec = load_spec_from(path)
        intended = intentional_fields({v.name: (v.args, v.env) for v in spec.variants})
    except Exception:  # an older or partial spec: check everything rather than fail
        intended = set()
    if metrics:
        known = available_metrics(exp)
        unknown = [m for m in metrics if m not in known]
        if unknown:
            raise ValueError(
                f"unknown metric {unknown[0]!r} (this experiment has: {', '.join(known)})"
            )
    return compare_experiment(exp, metrics, intentional=intended)
