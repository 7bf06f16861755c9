"""Messages the TUI's workers post, named as past events; workers never touch widgets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from tui_prof.model import ExperimentRecord, ProfileSummary
from tui_prof.profiles.discover import Discovery, Session

if TYPE_CHECKING:  # these load only when their feature is first used (watchfiles, numpy, gRPC)
    from tui_prof.comparison.report import ComparisonReport
    from tui_prof.experiments.diff_targets import TargetRef
    from tui_prof.experiments.events import RunEvent
    from tui_prof.experiments.runner import Runner
    from tui_prof.live.capture import CaptureResult
    from tui_prof.live.follow import FollowEvent
    from tui_prof.profiles.diff import ProfileDiff


@dataclass
class LogdirScanned(Message):
    """Discovery of the open path finished."""

    discovery: Discovery


@dataclass
class ProfileLoaded(Message):
    session: Session
    summary: ProfileSummary
    seconds: float


@dataclass
class ProfileFailed(Message):
    session: Session
    error: str


@dataclass
class LoadProgressed(Message):
    """Progress of a session's analysis; floods coalesce, only the latest matters."""

    session: Session
    fraction: float
    text: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgressed) and message.session == self.session


@dataclass
class ExperimentsFound(Message, bubble=False):
    """Experiment directories found under the open path."""

    directories: tuple[str, ...]


@dataclass
class ExperimentCreated(Message):
    """The experiment's directory and store exist; its runner is ready to start."""

    directory: str
    runner: Runner
    warning: str | None = None  # the experiment runs; something about it is worth a word


@dataclass
class ExperimentNotCreated(Message):
    name: str
    error: str


@dataclass
class Reattached(Message):
    """Runs a cluster still ran are followed again (runner), or cannot be (error), or another
    tuiprof follows them (neither)."""

    directory: str
    runner: Runner | None
    error: str | None = None


@dataclass
class ExperimentLoaded(Message, bubble=False):
    """An experiment's store was read (in a worker): its record, or the one-line error."""

    directory: str
    record: ExperimentRecord | None
    error: str | None


@dataclass
class LogTailRead(Message, bubble=False):
    """The last lines of a run's log file, read in a worker."""

    run_id: str
    lines: list[str]


class ProfilesChanged(Message):
    """New profiles were written (an experiment finished): the browse tree should list again."""


@dataclass
class RunnerEventArrived(Message):
    """An event from a runner's thread (see tui_prof.experiments.events)."""

    directory: str
    event: RunEvent


@dataclass
class ComparisonReady(Message):
    directory: str
    report: ComparisonReport | None
    error: str | None


@dataclass
class CaptureProgressed(Message):
    fraction: float
    text: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CaptureProgressed)


@dataclass
class Captured(Message):
    """One capture finished: its result and, where it could be read, its summary."""

    result: CaptureResult
    summary: ProfileSummary | None
    error: str | None


@dataclass
class CaptureEnded(Message):
    """A capture (or series) ended: with an error line, or None when it simply finished."""

    error: str | None
    empty: bool


@dataclass
class LogdirChanged(Message):
    """The followed logdir has new or changed files (see tui_prof.live.follow)."""

    events: list[FollowEvent]


@dataclass
class DiffRequested(Message):
    """Compare A with B (sessions marked in Browse, or variants from Experiments)."""

    a: TargetRef
    b: TargetRef


@dataclass
class DiffProgressed(Message):
    fraction: float
    text: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DiffProgressed)


@dataclass
class DiffReady(Message):
    """A diff finished: the result, or the one-line reason there is none."""

    diff: ProfileDiff | None
    error: str | None
