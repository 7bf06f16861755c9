"""Events a runner emits while an experiment runs, in the order they happen.

Contract: the runner calls `on_event(event)` from its own threads (never the caller's), so a UI
must hand each event to its own thread (Textual: `post_message`/`call_from_thread`). Per run the
order is RunQueued (cluster backends: submitted, waiting for a node), RunStarted, then any
RunOutput/RunProgress, then exactly one of RunFinished or RunFailed (a run that could not start,
could not be placed, or was stopped before it started, has no RunStarted). A run whose node was
lost and that the spec retries starts over at RunQueued after its RunFailed.
`ExperimentStarted` comes first and `ExperimentFinished` last, once, before `Runner.wait()` returns. A callback that raises is
reported on stderr and otherwise ignored: a broken UI never stops an experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_prof.model import RunRecord


@dataclass(frozen=True)
class ExperimentStarted:
    """The plan: every run of this session of the experiment, most still pending."""

    experiment_dir: str
    runs: tuple[RunRecord, ...]


@dataclass(frozen=True)
class RunQueued:
    """A run was submitted to a cluster and waits for resources; `run.node` where it is pinned."""

    run: RunRecord

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclass(frozen=True)
class RunStarted:
    """A run's process started; `run` has its pid-independent details (dir, port, start time,
    and on a cluster the node it runs on)."""

    run: RunRecord

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclass(frozen=True)
class RunOutput:
    """New complete lines of a run's output (stdout and stderr), batched per poll (~0.1 s)."""

    run_id: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class RunProgress:
    """The job reported something: progress text (e.g. "epoch 3/5") and metrics so far."""

    run_id: str
    progress: str
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFinished:
    """A run exited 0; `run` is its stored record (status finished, metrics, wall time)."""

    run: RunRecord

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclass(frozen=True)
class RunFailed:
    """A run failed, timed out, was stopped or could not start; `run.status` says which,
    `run.error` why in one line and `run.log_tail` the end of its output."""

    run: RunRecord

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclass(frozen=True)
class ExperimentFinished:
    """No more runs will start; `counts` maps status to number of runs; `cancelled` if stopped."""

    experiment_dir: str
    counts: dict[str, int]
    cancelled: bool
    problem: str = ""  # why the runner stopped it (a full disk, a store that did not answer)


RunEvent = (
    ExperimentStarted
    | RunQueued
    | RunStarted
    | RunOutput
    | RunProgress
    | RunFinished
    | RunFailed
    | ExperimentFinished
)
