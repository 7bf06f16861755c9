"""An experiment's comparison: statistics per metric and variant, verdicts, the trade-off and
the guard.

Contract: `compare_experiment(exp)` is pure (no I/O): it counts only finished, non-warm-up runs;
runs (warm-ups included) that failed, timed out, were stopped or interrupted are counted in
`failed_runs` and listed, never averaged. Each variant is compared with the baseline paired by
repeat where every repeat has one counted run of each (tui_prof.comparison.paired), by block
(node and repeat: design "blocked") where the runs ran on several cluster nodes, else as
independent samples; each comparison says which (`design`), and `runs` lists every run with its
status, node and wall time. `ComparisonReport.to_dict()` is the
`tuiprof compare --json` document: the contract in docs/json.md (metrics → variants/comparisons,
comparability, failed_runs, tradeoff) plus extra fields. The TUI and the CLI render the same
report, so they cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_prof.comparison.comparability import Comparability, check_comparability
from tui_prof.comparison.names import (
    base_name,
    is_time_metric,
    lower_is_better,
    metric_unit,
    percentile_of,
)
from tui_prof.comparison.paired import (
    DESIGN_BLOCKED,
    PAIRED_BY_REPEAT,
    Blocking,
    blocking_for,
    compare_design,
    node_of,
)
from tui_prof.comparison.stats import Comparison, Describe, describe
from tui_prof.comparison.tradeoff import Tradeoff, build_tradeoff, default_axes
from tui_prof.comparison.verdicts import under_load
from tui_prof.experiments.noise import noise_reasons
from tui_prof.experiments.reading import ExperimentData
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
# What differs from node to node by design when runs are blocked by node: each block is one node.
BLOCKED_FIELDS = ("node", "host")
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
    blocks: dict[str, tuple[Hashable, ...]] = field(default_factory=dict)  # parallel to values

    def keyed(self, variant: str) -> list[tuple[Hashable, float]]:
        """(block, value) of a variant's runs, what the paired design pairs by."""
        return list(zip(self.blocks.get(variant, ()), self.values.get(variant, ()), strict=True))

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
    tradeoff: Tradeoff | None = None  # speed against quality, where both metrics exist
    distributions: dict[str, Any] = field(default_factory=dict)  # kept samples, per metric
    runs: tuple[RunRecord, ...] = ()  # every run, as `runs` in the JSON
    design: str = (
        "paired"  # how runs were grouped: "paired" (by repeat) or "blocked" (node, repeat)
    )

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
            "tradeoff": self.tradeoff.to_dict() if self.tradeoff is not None else None,
            "distributions": self.distributions,
            "runs": [run_entry(r) for r in self.runs],
        }


def run_entry(run: RunRecord) -> dict[str, Any]:
    """A run as `tuiprof compare --json` lists it (`node`: the cluster node, else the host)."""
    return {
        "variant": run.variant,
        "repeat": run.repeat,
        "status": run.status,
        "node": node_of(run) or run.environment.get("host") or None,
        "wall_time_s": run.wall_time_s,
        "run_id": run.run_id,
        "is_warmup": run.is_warmup,
        "attempt": run.attempt,
        "gpu_model": run.environment.get("gpu_model"),
        "error": run.error,
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


def expand_metrics(names: Iterable[str], reported: Sequence[str]) -> list[str]:
    """Names with a distribution's name (`latency_ms`) replaced by its percentiles
    (`latency_ms:p50`, `:p90`, `:p99`) where the runs reported those and not the name itself."""
    out: list[str] = []
    for name in names:
        pcts = [k for k in reported if percentile_of(k) is not None and base_name(k) == name]
        out.extend(pcts if pcts and name not in reported else [name])
    return list(dict.fromkeys(out))


def _reported(exp: ExperimentRecord) -> list[str]:
    names: dict[str, None] = {}
    for run in counted_runs(exp.runs):
        names.update(dict.fromkeys(run.metrics))
    return list(names)


def available_metrics(exp: ExperimentRecord) -> list[str]:
    """The spec's metrics first (a distribution as its percentiles), then any other number a
    counted run reported."""
    reported = _reported(exp)
    names = expand_metrics([WALL_TIME, *exp.metrics], reported)
    return names + [k for k in reported if k not in names]


# The largest magnitude a metric may have to be compared: squares and sums of such values stay
# finite (1e308 overflowed the statistics' sums); no real measurement comes near it.
MAX_METRIC = 1e100


def _usable(x: float) -> bool:
    return math.isfinite(x) and abs(x) <= MAX_METRIC


def _metric_report(
    name: str,
    runs: Sequence[RunRecord],
    variants: Sequence[str],
    baseline: str,
    blocking: Blocking = PAIRED_BY_REPEAT,
    matters: Mapping[str, float] | None = None,
) -> MetricReport:
    lib = lower_is_better(name)
    values: dict[str, tuple[float, ...]] = {}
    blocks: dict[str, tuple[Hashable, ...]] = {}
    warnings: list[str] = []
    for v in variants:
        raw = [(blocking.key(r), metric_value(r, name)) for r in runs if r.variant == v]
        bad = sum(1 for _, x in raw if x is not None and not _usable(x))
        missing = sum(1 for _, x in raw if x is None)
        if bad:
            warnings.append(
                f"{v}: {bad} run(s) reported a non-finite {name}, or one beyond "
                f"±{MAX_METRIC:.0e} (left out)"
            )
        if missing and len(raw) > missing:
            warnings.append(f"{v}: {missing} finished run(s) did not report {name}")
        kept = [(k, x) for k, x in raw if x is not None and _usable(x)]
        values[v] = tuple(x for _, x in kept)
        blocks[v] = tuple(k for k, _ in kept)
    report = MetricReport(
        name=name,
        unit=metric_unit(name),
        lower_is_better=lib,
        values=values,
        variants={v: describe(xs) for v, xs in values.items()},
        comparisons=(),
        warnings=tuple(warnings),
        blocks=blocks,
    )
    comparisons: tuple[Comparison, ...] = tuple(
        compare_design(
            report.keyed(baseline),
            report.keyed(v),
            metric=name,
            lower_is_better=lib,
            baseline_name=baseline,
            variant_name=v,
            blocking=blocking,
            matters=matters,
        )
        for v in variants
        if v != baseline
    )
    if is_time_metric(name):  # a loaded machine slows times; it is not why accuracy varies
        noisy = {r.run_id for r in runs if noise_reasons(r.environment.get("machine_state"))}
        comparisons = tuple(
            under_load(c, *_noisy_of(runs, noisy, baseline, c.variant)) for c in comparisons
        )
    return MetricReport(
        name=name,
        unit=report.unit,
        lower_is_better=lib,
        values=values,
        variants=report.variants,
        comparisons=comparisons,
        warnings=report.warnings,
        blocks=blocks,
    )


def _noisy_of(
    runs: Sequence[RunRecord], noisy: set[str], baseline: str, variant: str
) -> tuple[int, int]:
    """(noisy, all) counted runs of the two variants a comparison weighs."""
    pair = [r for r in runs if r.variant in (baseline, variant)]
    return sum(r.run_id in noisy for r in pair), len(pair)


def compare_experiment(
    exp: ExperimentRecord,
    metrics: Sequence[str] | None = None,
    *,
    intentional: Iterable[str] = (),
    speed: str | None = None,
    quality: str | None = None,
    blocking: Blocking | None = None,
    distributions: Mapping[str, Any] | None = None,
    matters: Mapping[str, float] | None = None,
) -> ComparisonReport:
    """Statistics, verdicts, the trade-off and the comparability check for `exp` (see the
    module contract).

    `metrics` restricts and orders the metrics (default: `available_metrics(exp)`); a metric
    no run reported still gets a report with n=0 everywhere. `intentional` names fields the
    variants change on purpose (see `tui_prof.comparison.comparability.intentional_fields`).
    `speed` and `quality` are the trade-off's axes (default: wall time and the first
    accuracy-like metric); `blocking` says how runs pair up (default: by node and repeat where
    the runs spread over several cluster nodes, else by repeat); `matters` the smallest
    difference that matters per metric, in percent (default: 5% for times).
    """
    variants = list(exp.variants)
    for r in exp.runs:
        if r.variant not in variants:
            variants.append(r.variant)
    baseline = exp.baseline if exp.baseline in variants else variants[0]
    variants.remove(baseline)
    variants.insert(0, baseline)
    runs = counted_runs(exp.runs)
    blocking = blocking or blocking_for(runs)
    names = list(metrics) if metrics is not None else available_metrics(exp)
    failed = tuple(
        FailedRun(r.run_id, r.variant, r.repeat, r.status, r.error, r.is_warmup)
        for r in exp.runs
        if r.status in FAILED_STATUSES
    )
    pending = sum(1 for r in exp.runs if r.status not in (RUN_FINISHED, *FAILED_STATUSES))
    reports = {n: _metric_report(n, runs, variants, baseline, blocking, matters) for n in names}
    axes = default_axes(names, speed, quality)  # --metric X alone leaves the trade-off out
    tradeoff = None
    if axes is not None:
        pair = [
            reports.get(a) or _metric_report(a, runs, variants, baseline, blocking, matters)
            for a in axes
        ]
        tradeoff = build_tradeoff(pair[0], pair[1], blocking)
    return ComparisonReport(
        experiment=exp.name,
        directory=exp.directory,
        baseline=baseline,
        variants=tuple(variants),
        metrics=tuple(reports.values()),
        comparability=check_comparability(
            runs,
            intentional=intentional,
            by_design=BLOCKED_FIELDS if blocking.design == DESIGN_BLOCKED else (),
        ),
        failed=failed,
        counted_runs=len(runs),
        pending_runs=pending,
        tradeoff=tradeoff,
        distributions=dict(distributions or {}),
        runs=tuple(exp.runs),
        design=blocking.design,
    )


def build_report(
    data: ExperimentData,
    metrics: list[str] | None = None,
    *,
    speed: str | None = None,
    quality: str | None = None,
    matters: Mapping[str, float] | None = None,
) -> ComparisonReport:
    """Compare an experiment read by `experiments.reading.read_experiment` (values only: this
    loads nothing); ValueError with a one-line message for an unknown metric. The smallest
    difference that matters is the spec's, overridden per metric by `matters`."""
    from tui_prof.comparison.comparability import intentional_fields

    exp = data.record
    intended = intentional_fields(data.variant_settings)
    given = {**data.min_difference_pct, **(matters or {})}
    known, reported = available_metrics(exp), _reported(exp)
    if metrics:
        metrics = expand_metrics(metrics, reported)
    speed = expand_metrics([speed], reported)[0] if speed else None
    quality = expand_metrics([quality], reported)[0] if quality else None
    for m in [*(metrics or []), *(a for a in (speed, quality) if a)]:
        if m not in known:
            raise ValueError(f"unknown metric {m!r} (this experiment has: {', '.join(known)})")
    return compare_experiment(
        exp,
        metrics,
        intentional=intended,
        speed=speed,
        quality=quality,
        distributions=data.distributions,
        matters=given,
    )
