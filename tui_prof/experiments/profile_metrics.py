"""MFU and peak memory as metrics of a run, from the profiles it left in its own logdir.

Contract: `with_profile_metrics(exp)` returns the experiment with `mfu_percent` and
`peak_memory_mb` added to each finished run whose run directory holds a profile that has them
(the mean over its sessions), and to the experiment's metric names where any run has them, so
variants are compared on them with the same intervals and verdicts as any metric. Summaries come
through the cache; a profile that cannot be read adds nothing (its run keeps its own metrics).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tui_prof.model import RUN_FINISHED, ExperimentRecord, ProfileError, RunRecord

MFU = "mfu_percent"
PEAK_MEMORY = "peak_memory_mb"


def _profile_metrics(run_dir: str) -> dict[str, float]:
    from tui_prof.profiles.discover import discover
    from tui_prof.profiles.load import load_summary

    if not run_dir or not Path(run_dir).is_dir():
        return {}
    values: dict[str, list[float]] = {MFU: [], PEAK_MEMORY: []}
    try:
        sessions = discover(run_dir).sessions
    except OSError:
        return {}
    for session in sessions:
        try:
            s = load_summary(session)
        except ProfileError:
            continue
        if s.efficiency is not None and s.efficiency.mfu_percent is not None:
            values[MFU].append(s.efficiency.mfu_percent)
        if s.memory is not None and s.memory.peak_allocated_mb is not None:
            values[PEAK_MEMORY].append(s.memory.peak_allocated_mb)
    return {k: sum(v) / len(v) for k, v in values.items() if v}


def with_profile_metrics(exp: ExperimentRecord) -> ExperimentRecord:
    runs: list[RunRecord] = []
    added: set[str] = set()
    for r in exp.runs:
        extra = _profile_metrics(r.run_dir) if r.status == RUN_FINISHED else {}
        extra = {k: v for k, v in extra.items() if k not in r.metrics}  # the job's own win
        if extra:
            added |= extra.keys()
            r = dataclasses.replace(r, metrics={**r.metrics, **extra})
        runs.append(r)
    if not added:
        return exp
    names = (*exp.metrics, *(m for m in (MFU, PEAK_MEMORY) if m in added and m not in exp.metrics))
    return dataclasses.replace(exp, runs=tuple(runs), metrics=names)
