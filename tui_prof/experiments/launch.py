"""One run's terms, apart from the runner's threads: what it is started with (its argv and the
TUIPROF_* environment, as a backend's LaunchRequest) and what its end means (a status and the
one-line error the run table shows). Pure: the runner does the starting and the recording."""

from __future__ import annotations

import os
from pathlib import Path

from tui_prof.experiments.backends import LaunchRequest, RunOutcome
from tui_prof.experiments.plan import block_of
from tui_prof.experiments.protocol import MAX_NAMES
from tui_prof.experiments.runio import describe_exit, expand_args
from tui_prof.experiments.spec import ExperimentSpec
from tui_prof.model import RUN_FAILED, RUN_STOPPED, RUN_TIMEOUT, RunRecord, RunStatus

MAX_LINES_PER_EVENT = 1000


def run_env(
    spec: ExperimentSpec, rec: RunRecord, experiment_dir: Path, port: int | None
) -> dict[str, str]:
    """What tuiprof sets for a run (the backend adds it to the environment it runs in)."""
    env = {"PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}  # a current log
    env.update(spec.variant(rec.variant).env)
    env.update(
        {
            "TUIPROF_METRICS_FILE": rec.metrics_path,
            "TUIPROF_RUN_DIR": rec.run_dir,
            "TUIPROF_VARIANT": rec.variant,
            "TUIPROF_REPEAT": str(rec.repeat),
            "TUIPROF_WARMUP": "1" if rec.is_warmup else "0",
            "TUIPROF_RUN_ID": rec.run_id,
            "TUIPROF_EXPERIMENT_DIR": str(experiment_dir),
        }
    )
    if port is not None:
        env["TUIPROF_PROFILER_PORT"] = str(port)
    return env


def launch_request(
    spec: ExperimentSpec,
    rec: RunRecord,
    env: dict[str, str],
    remote: bool,
    profiler_ports: bool,
    experiment_id: str,
) -> LaunchRequest:
    """The backend's request for a run; a cluster's node expands the argv with its own paths."""
    argv = spec.argv(rec.variant)
    return LaunchRequest(
        run_id=rec.run_id,
        argv=tuple(argv if remote else expand_args(argv, env)),
        cwd=Path(spec.workdir),
        env=env,
        log_path=Path(rec.log_path),
        metrics_path=Path(rec.metrics_path),
        run_dir=Path(rec.run_dir),
        attempt=rec.attempt,
        block=block_of(rec.run_id),
        timeout_s=spec.timeout_s,
        kill_grace_s=spec.kill_grace_s,
        profiler_port=profiler_ports,
        experiment_id=experiment_id,
    )


def capped_lines(lines: list[str], log_path: Path) -> list[str]:
    """At most MAX_LINES_PER_EVENT of a poll's new log lines, the last ones, and a note of the
    rest (a job printing in a tight loop must not flood the screen; the log keeps all)."""
    if len(lines) <= MAX_LINES_PER_EVENT:
        return lines
    skipped = len(lines) - MAX_LINES_PER_EVENT
    return [
        f"[tuiprof: {skipped} lines not shown; see {log_path}]",
        *lines[-MAX_LINES_PER_EVENT:],
    ]


def dropped_names_note(dropped: int) -> str:
    """The log's line for reports of metric names past protocol.MAX_NAMES."""
    return (
        f"[tuiprof: the job reported more than {MAX_NAMES} metric names; "
        f"{dropped} reports of further names were left out]"
    )


def ending(
    outcome: RunStatus, out: RunOutcome, timeout_s: float | None, tail: str
) -> tuple[RunStatus, str | None]:
    """A run's status and error from how the runner saw it end (`outcome`: stopped or timed out
    by the runner, else finished) and the backend's RunOutcome; the log's last line joins the
    error of a run that failed without the backend's own reason."""
    code = out.exit_code
    status, error = outcome, None
    if outcome == RUN_STOPPED or (out.stopped and outcome != RUN_TIMEOUT):
        status, error = RUN_STOPPED, f"stopped by the user ({describe_exit(code)})"
    elif outcome == RUN_TIMEOUT or out.timed_out:
        status = RUN_TIMEOUT
        error = f"timed out after {timeout_s:g} s ({describe_exit(code)})"
    elif out.error:
        status, error = RUN_FAILED, out.error
    elif code != 0:
        status, error = RUN_FAILED, describe_exit(code)
    if error and tail and not out.error:
        error += ": " + tail.splitlines()[-1][:200]
    return status, error
