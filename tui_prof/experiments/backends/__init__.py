"""Where runs execute. The runner talks only to this interface, so a cluster engine (e.g. Ray)
can later run the same experiments: a backend launches one run and hands back a handle.

Contract: `Backend.launch(request)` starts the run and returns at once; the job's stdout and
stderr go to `request.log_path` and it reports metrics to `request.env["TUIPROF_METRICS_FILE"]`
(the runner follows both files). `RunHandle.wait(timeout)` returns the exit code or None while
it runs; `terminate(grace_s)` stops the whole run (all its processes), forcefully after grace_s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class LaunchRequest:
    """Everything needed to start one run."""

    run_id: str
    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]  # the complete environment of the job
    log_path: Path


class RunHandle(Protocol):
    """A started run."""

    pid: int | None
    pgid: int | None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (negative: killed by that signal), or None if still running after timeout."""
        ...

    def terminate(self, grace_s: float) -> None:
        """Ask every process of the run to stop; kill them if they have not after grace_s."""
        ...


class Backend(Protocol):
    """Starts runs."""

    name: str

    def launch(self, request: LaunchRequest) -> RunHandle:
        """Start a run; raise OSError if it cannot start."""
        ...


def get_backend(name: str = "local") -> Backend:
    if name == "local":
        from tui_prof.experiments.backends.local import LocalBackend

        return LocalBackend()
    raise ValueError(f"unknown backend {name!r} (available: local)")
