"""Which runs an experiment makes and in what order: warm-ups first, then the counted runs
interleaved (A B A B …) so a drifting machine affects every variant alike; a run's block (its
repeat) is what a cluster keeps on one node."""

from __future__ import annotations

from collections.abc import Container

from tui_prof.experiments.spec import MAX_PARALLEL, ExperimentSpec
from tui_prof.experiments.writer import PlannedRun


def plan_runs(spec: ExperimentSpec) -> list[PlannedRun]:
    """Warm-ups first, then the counted runs, interleaved (A B A B …) or sequential (A A B B …)."""
    names = [v.name for v in spec.variants]
    plan = [PlannedRun(v, k, True) for k in range(spec.warmup) for v in names]
    if spec.order == "sequential":
        plan += [PlannedRun(v, r) for v in names for r in range(spec.repeats)]
    else:
        plan += [PlannedRun(v, r) for r in range(spec.repeats) for v in names]
    return plan


def block_of(run_id: str) -> str:
    """A run's block: its repeat (`r3`) or warm-up (`w0`), the part of its id after the variant."""
    return run_id.rsplit("-", 1)[-1]


def pick(todo: list[str], mine: str | None, taken: Container[str], affinity: bool) -> str | None:
    """The next run of `todo` for a worker: in order, or with block affinity (a cluster's blocked
    placement) the block of its last run (`mine`) first and never a block another worker has
    (`taken`); None: what is left is theirs."""
    if not todo or not affinity:
        return todo[0] if todo else None
    for run_id in todo:
        if block_of(run_id) == mine:
            return run_id
    return next((r for r in todo if block_of(r) not in taken), None)


def check_parallel(parallel: int | None) -> int | None:
    """Runs at once: 1 to MAX_PARALLEL (0 would run nothing; see spec.MAX_PARALLEL for why);
    None: as many as the backend fits (one at a time on this machine)."""
    if parallel is None:
        return None
    if (
        isinstance(parallel, bool)
        or not isinstance(parallel, int)
        or not 1 <= parallel <= MAX_PARALLEL
    ):
        raise ValueError(f"--parallel must be 1 to {MAX_PARALLEL}, got {parallel!r}")
    return parallel
