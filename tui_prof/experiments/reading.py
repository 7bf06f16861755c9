"""An experiment read for comparison: the values `comparison.report.build_report` compares.

Contract: `read_experiment(dir)` reads the store (read-only, safe while a runner writes), adds MFU
and peak memory to finished runs whose profiles have them (`profile_metrics`), and takes from the
stored spec what each variant sets (its args and environment, which the comparability guard calls
intended differences) and the smallest differences that matter. A missing or partial spec leaves
those empty: everything is checked rather than the comparison failing. Errors are ValueError with
one line for the user. The comparison itself loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_prof.experiments.profile_metrics import with_profile_metrics
from tui_prof.experiments.store import StoreError, load_experiment, load_spec_from, sample_counts
from tui_prof.model import ExperimentRecord


@dataclass(frozen=True)
class ExperimentData:
    """An experiment as values: its runs, what each variant sets, and its kept samples."""

    record: ExperimentRecord
    # Variant name → (args, env) from the stored spec; {} where the spec cannot be read.
    variant_settings: dict[str, tuple[tuple[str, ...], dict[str, str]]] = field(
        default_factory=dict
    )
    min_difference_pct: dict[str, float] = field(default_factory=dict)
    distributions: dict[str, Any] = field(default_factory=dict)  # store.sample_counts


def read_experiment(experiment_dir: str | Path) -> ExperimentData:
    path = Path(experiment_dir)
    if not path.exists():
        raise ValueError(f"{path}: no such directory")
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory")
    try:
        record = load_experiment(path)
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    record = with_profile_metrics(record)  # MFU and peak memory where the runs' profiles have them
    settings: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {}
    matters: dict[str, float] = {}
    try:
        spec = load_spec_from(path)
        settings = {v.name: (tuple(v.args), dict(v.env)) for v in spec.variants}
        matters = dict(spec.min_difference_pct)
    except Exception:  # an older or partial spec: check everything rather than fail
        settings, matters = {}, {}
    return ExperimentData(record, settings, matters, sample_counts(path))
