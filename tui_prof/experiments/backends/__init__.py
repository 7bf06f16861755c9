"""Where runs execute. The runner talks only to this interface: local processes (`local`, the
default, no dependencies) and a Ray cluster (`ray`, imported only when chosen) fit behind it,
and a Slurm backend would be one more module (docs/backends.md says how it would map).

Contract:
- `Backend.launch(request)` submits one run and returns at once with a `RunHandle`. Whatever
  the engine, the run's output appears in `request.log_path` and its metrics in
  `request.metrics_path` on this machine as they are produced (a local job writes them itself;
  a cluster backend writes what arrives), so the runner follows two local files either way, and
  when the run has ended its artifacts (the profile logdir) are in `request.run_dir`.
- `RunHandle.state()` is QUEUED (submitted, waiting for resources), RUNNING or ENDED;
  `wait(timeout)` returns the exit code once ENDED (None before); `terminate(grace_s)` stops
  the run wherever it runs; `outcome()` (after the end) says how it ended: exit code, wall time
  measured where it ran, and an engine-side reason ("node lost: …") where the job itself could
  not say. `node()` names where it runs once known; `environment()` is the fingerprint taken
  there (None: the runner's own machine's).
- Remote backends (`remote = True`) keep runs going after tuiprof exits: `reference(request)`
  is the id the run will have, recorded before `launch` so that a tuiprof killed in between
  never submits a run twice, and `attach(ref, request)` follows a run submitted earlier (None if
  the engine does not know it). `request.env` holds only what tuiprof sets (the variant's
  environment and the TUIPROF_* settings); the backend adds them to the environment where the
  run executes.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tui_prof.experiments.backend_spec import BackendSpec

QUEUED = "queued"
RUNNING = "running"
ENDED = "ended"


class BackendError(Exception):
    """A backend that cannot run anything (no cluster there, nothing fits): one line for the user."""


@dataclass(frozen=True)
class LaunchRequest:
    """Everything needed to start one run."""

    run_id: str
    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]  # what tuiprof sets: the variant's environment and TUIPROF_*
    log_path: Path  # this machine's copy of the run's output (stdout and stderr)
    metrics_path: Path = Path()  # ... of its metrics file ($TUIPROF_METRICS_FILE)
    run_dir: Path = Path()  # ... of its logdir ($TUIPROF_RUN_DIR): artifacts end up here
    attempt: int = 1
    block: Hashable = None  # runs of one block run on one node (a cluster's fair placement)
    timeout_s: float | None = None
    kill_grace_s: float = 5.0
    profiler_port: bool = True  # give the job a free TUIPROF_PROFILER_PORT where it runs
    experiment_id: str = ""  # unique per experiment: a cluster's job ids start with it


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: its exit code (negative: killed by that signal) and what else is known."""

    exit_code: int
    wall_time_s: float | None = None  # measured where it ran; None: the runner measures
    error: str | None = None  # the engine's reason when the job could not say ("node lost: …")
    lost: bool = False  # the node died under it: a retry may help
    unread: bool = False  # it ran, but nothing of it could be read back: worth one retry anyway
    timed_out: bool = False  # the engine enforced the spec's timeout
    stopped: bool = False  # stopped on request (tuiprof's or the cluster's)
    ran: bool = True  # False: it ended before it ever started (never placed, never launched)


class RunHandle(Protocol):
    """A submitted run."""

    pid: int | None  # local runs: the process (and its group), for orphans after a crash
    pgid: int | None

    def state(self) -> str:
        """QUEUED, RUNNING or ENDED."""
        ...

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the run ended (and its files are here), else None after timeout."""
        ...

    def terminate(self, grace_s: float) -> None:
        """Stop every process of the run; forcefully if they have not stopped after grace_s."""
        ...

    def outcome(self) -> RunOutcome:
        """How it ended (call after `wait` returned a code)."""
        ...

    def node(self) -> str | None:
        """Where it runs: a name that tells nodes apart; None for this machine or not yet known."""
        ...

    def environment(self) -> dict[str, Any] | None:
        """The fingerprint of the machine it ran on, taken there; None: this machine's."""
        ...


class Backend(Protocol):
    """Starts runs."""

    name: str
    remote: bool  # runs execute elsewhere and outlive tuiprof

    def capacity(self) -> int:
        """How many runs fit at once (the default for `--parallel`)."""
        ...

    def reference(self, request: LaunchRequest) -> str | None:
        """The id `launch(request)` will give the run (None where there is nothing to reattach)."""
        ...

    def launch(self, request: LaunchRequest) -> RunHandle:
        """Submit a run; raise OSError if it cannot start."""
        ...

    def attach(self, ref: str, request: LaunchRequest) -> RunHandle | None:
        """Follow a run submitted earlier by `reference` (None: the engine does not know it)."""
        ...

    def close(self) -> None:
        """Let go of the engine (the runs go on)."""
        ...


def get_backend(name: str | BackendSpec = "local") -> Backend:
    """The backend a spec names; Ray is imported here only when it is chosen (BackendError: it
    cannot run anything, e.g. no cluster at the address)."""
    from tui_prof.experiments.backend_spec import BackendSpec

    spec = BackendSpec(kind=name) if isinstance(name, str) else name
    if spec.kind == "local":
        from tui_prof.experiments.backends.local import LocalBackend

        return LocalBackend()
    if spec.kind == "ray":
        from tui_prof.experiments.backends.ray import connect

        return connect(spec)
    raise ValueError(f"unknown backend {spec.kind!r} (available: local, ray)")
