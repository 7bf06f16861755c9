"""The experiment runner: variants × repeats as separate processes, recorded run by run.

Contract: `Runner.create(spec)` (a new experiment) or `Runner.resume(dir)` (its unfinished runs)
then `start()`, which returns at once: the runs go on in background threads and report through
`on_event` (see events.py). `stop(run_id)`, `stop_all()` and the `cancel` event stop them;
`wait()` blocks until the end. Runs are interleaved (A B A B …, warm-ups first) so a drifting
machine affects every variant alike. Wall time is measured here, so even a script that reports
nothing gets one; a run that fails, times out or is stopped is recorded with the tail of its log
and the others go on.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tui_prof.experiments import events as ev
from tui_prof.experiments.backends import Backend, LaunchRequest, get_backend
from tui_prof.experiments.fingerprint import host_fingerprint, run_fingerprint
from tui_prof.experiments.protocol import MetricsReader, tail_text
from tui_prof.experiments.samples import seed_for
from tui_prof.experiments.spec import (
    MAX_PARALLEL,
    WALL_TIME,
    ExperimentSpec,
    check_counts,
    check_executable,
    default_experiment_dir,
)
from tui_prof.experiments.store import ExperimentStore, PlannedRun
from tui_prof.model import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STOPPED,
    RUN_TIMEOUT,
    ExperimentRecord,
    RunRecord,
    RunStatus,
)

EventCallback = Callable[[Any], None]
MAX_LINES_PER_EVENT = 1000
LOG_TAIL_LINES = 30


def plan_runs(spec: ExperimentSpec) -> list[PlannedRun]:
    """Warm-ups first, then the counted runs, interleaved (A B A B …) or sequential (A A B B …)."""
    names = [v.name for v in spec.variants]
    plan = [PlannedRun(v, k, True) for k in range(spec.warmup) for v in names]
    if spec.order == "sequential":
        plan += [PlannedRun(v, r) for v in names for r in range(spec.repeats)]
    else:
        plan += [PlannedRun(v, r) for r in range(spec.repeats) for v in names]
    return plan


def check_parallel(parallel: int) -> int:
    """Runs at once: 1 to MAX_PARALLEL (0 would run nothing; see spec.MAX_PARALLEL for why)."""
    if (
        isinstance(parallel, bool)
        or not isinstance(parallel, int)
        or not 1 <= parallel <= MAX_PARALLEL
    ):
        raise ValueError(f"--parallel must be 1 to {MAX_PARALLEL}, got {parallel!r}")
    return parallel


_VAR_RE = re.compile(r"\$\{(TUIPROF_[A-Z_]+)\}")


def expand_args(argv: list[str], env: dict[str, str]) -> list[str]:
    """Replace `${TUIPROF_...}` in arguments by the run's value, e.g. `--seed ${TUIPROF_REPEAT}`
    (only tuiprof's own variables: there is no shell, and other text stays as written)."""
    return [_VAR_RE.sub(lambda m: env.get(m.group(1), m.group(0)), a) for a in argv]


def free_port() -> int:
    """A TCP port nothing listens on now, for the job's profiler server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _LineTail:
    """Follows a log file and returns the complete lines appended since the last call."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset, self._partial = path, 0, b""

    def poll(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(4 << 20)
        except OSError:
            return []
        self._offset += len(data)
        parts = (self._partial + data).split(b"\n")
        self._partial = parts.pop()
        if final and self._partial:
            parts.append(self._partial)
            self._partial = b""
        # A progress bar redraws with carriage returns: keep what it shows last.
        return [p.decode("utf-8", errors="replace").rstrip("\r").rsplit("\r", 1)[-1] for p in parts]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Runner:
    """Runs one experiment's unfinished runs in background threads; never blocks its caller."""

    def __init__(
        self,
        store: ExperimentStore,
        on_event: EventCallback | None = None,
        backend: Backend | None = None,
        parallel: int = 1,
        poll_interval_s: float = 0.1,
        cancel: threading.Event | None = None,
        profiler_ports: bool = True,
    ) -> None:
        self.store = store
        self.profiler_ports = profiler_ports  # give each run a free port for its profiler server
        self.spec = store.spec
        self.experiment_dir = store.directory
        self.on_event = on_event
        self.backend = backend or get_backend("local")
        self.parallel = check_parallel(parallel)
        self.poll_interval_s = poll_interval_s
        self.cancel = cancel or threading.Event()
        self._todo = store.unfinished()
        self._lock = threading.Lock()
        self._stop_requested: set[str] = set()
        self._active: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()
        self._started = False
        self._closed = False
        self._readers: dict[str, MetricsReader] = {}
        self._host: dict[str, Any] = {}  # filled in the background: nvidia-smi can take seconds

    # -- construction --------------------------------------------------------------------
    @classmethod
    def create(
        cls, spec: ExperimentSpec, experiment_dir: str | Path | None = None, **kwargs: Any
    ) -> Runner:
        """A new experiment directory (default: `<output>/<name>-<timestamp>`) and its runner."""
        check_counts(spec)  # before planning: a count past the limits is refused, not planned
        check_parallel(kwargs.get("parallel", 1))
        d = Path(experiment_dir) if experiment_dir else default_experiment_dir(spec)
        store = ExperimentStore.create(d, spec, plan_runs(spec))
        try:
            return cls(store, **kwargs)
        except BaseException:
            store.close()
            raise

    @classmethod
    def resume(
        cls, experiment_dir: str | Path, repeats: int | None = None, **kwargs: Any
    ) -> Runner:
        """Reopen an experiment; the runner will run only what has not finished (plus new repeats)."""
        check_parallel(kwargs.get("parallel", 1))
        store = ExperimentStore.open(experiment_dir)
        spec = store.spec
        try:
            check_executable(spec)
            if repeats is not None:
                check_counts(replace(spec, repeats=repeats))
            if repeats is not None and repeats > spec.repeats:
                spec = replace(spec, repeats=repeats)
                store.set_spec(spec)
                store.add_runs(plan_runs(spec))
            return cls(store, **kwargs)
        except BaseException:
            store.close()
            raise

    # -- control -------------------------------------------------------------------------
    @property
    def pending(self) -> list[str]:
        """Run ids this runner will still start, in order."""
        with self._lock:
            return list(self._todo)

    @property
    def active(self) -> list[str]:
        with self._lock:
            return list(self._active)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def start(self) -> Runner:
        """Start running in background threads and return at once."""
        if self._started:
            raise RuntimeError("runner already started")
        self._started = True
        main = threading.Thread(target=self._main, name="tuiprof-runner", daemon=True)
        self._threads.append(main)
        main.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every run ended (True) or the timeout passed (False)."""
        return self._done.wait(timeout)

    def stop(self, run_id: str) -> None:
        """Stop one run (SIGTERM to its process group, SIGKILL after the grace time); the rest go on.
        A run that has not started yet is recorded as stopped and skipped."""
        with self._lock:
            self._stop_requested.add(run_id)
            skipped = run_id in self._todo and run_id not in self._active and not self._closed
            if skipped:
                self._todo.remove(run_id)
        if skipped:
            rec = replace(
                self.store.run(run_id), status=RUN_STOPPED, error="stopped before it started"
            )
            self.store.finish(rec)
            self._emit(ev.RunFailed(rec))

    def stop_all(self) -> None:
        """Stop the running runs and start no more (the pending ones stay pending for --resume)."""
        self.cancel.set()
        with self._lock:
            self._stop_requested.update(self._active)

    def result(self) -> ExperimentRecord:
        """The experiment as stored now (also after the end)."""
        return _load(self.experiment_dir) if self._closed else self.store.record()

    # -- the work ------------------------------------------------------------------------
    def _emit(self, event: Any) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            print("tuiprof: an experiment event handler failed:", file=sys.stderr)
            traceback.print_exc()

    def _next(self) -> str | None:
        with self._lock:
            if self.cancel.is_set() or not self._todo:
                return None
            run_id = self._todo.pop(0)
            self._active[run_id] = None
            return run_id

    def _worker(self) -> None:
        while (run_id := self._next()) is not None:
            try:
                self._execute(run_id)
            except Exception as exc:  # a bug or a full disk: record it, go on with the others
                rec = replace(
                    self.store.run(run_id),
                    status=RUN_FAILED,
                    ended_at=time.time(),
                    error=f"tuiprof error: {type(exc).__name__}: {exc}",
                )
                try:
                    self.store.finish(rec)
                finally:
                    self._emit(ev.RunFailed(rec))
            finally:
                with self._lock:
                    self._active.pop(run_id, None)

    def _main(self) -> None:
        counts: dict[str, int] = {}
        try:
            self._host = host_fingerprint()
            self._emit(ev.ExperimentStarted(str(self.experiment_dir), tuple(self.store.runs())))
            workers = [
                threading.Thread(target=self._worker, name=f"tuiprof-run-{i}", daemon=True)
                for i in range(self.parallel)
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            for r in self.store.runs():
                counts[r.status] = counts.get(r.status, 0) + 1
        except Exception:
            print("tuiprof: the experiment runner failed:", file=sys.stderr)
            traceback.print_exc()
        finally:
            self.store.close()
            self._closed = True
            self._emit(
                ev.ExperimentFinished(str(self.experiment_dir), counts, self.cancel.is_set())
            )
            self._done.set()

    def _env(
        self, rec: RunRecord, run_dir: Path, metrics_path: Path, port: int | None
    ) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")  # so the log (and the live view) is current
        env.update(self.spec.variant(rec.variant).env)
        env.update(
            {
                "TUIPROF_METRICS_FILE": str(metrics_path),
                "TUIPROF_RUN_DIR": str(run_dir),
                "TUIPROF_VARIANT": rec.variant,
                "TUIPROF_REPEAT": str(rec.repeat),
                "TUIPROF_WARMUP": "1" if rec.is_warmup else "0",
                "TUIPROF_RUN_ID": rec.run_id,
                "TUIPROF_EXPERIMENT_DIR": str(self.experiment_dir),
            }
        )
        env.pop("TUIPROF_PROFILER_PORT", None)
        if port is not None:
            env["TUIPROF_PROFILER_PORT"] = str(port)
        return env

    def _execute(self, run_id: str) -> None:
        self.store.prepare_rerun(run_id)
        rec = self.store.run(run_id)
        run_dir, log_path, metrics_path = (
            Path(rec.run_dir),
            Path(rec.log_path),
            Path(rec.metrics_path),
        )
        run_dir.mkdir(parents=True, exist_ok=True)
        metrics_path.touch()
        port = free_port() if self.profiler_ports else None
        env = self._env(rec, run_dir, metrics_path, port)
        argv = tuple(expand_args(self.spec.argv(rec.variant), env))
        request = LaunchRequest(run_id, argv, Path(self.spec.workdir), env, log_path)
        started_at = time.time()
        t0 = time.perf_counter()
        try:
            handle = self.backend.launch(request)
        except OSError as exc:
            rec = replace(
                rec,
                status=RUN_FAILED,
                started_at=started_at,
                ended_at=time.time(),
                error=f"could not start {request.argv[0]!r}: {exc.strerror or exc}",
            )
            self.store.finish(rec)
            self._emit(ev.RunFailed(rec))
            return
        with self._lock:
            self._active[run_id] = handle
        self.store.mark_running(run_id, started_at, handle.pid, handle.pgid, port, dict(self._host))
        self._emit(ev.RunStarted(self.store.run(run_id)))
        code, outcome, wall = self._follow(run_id, handle, t0, log_path, metrics_path)
        self._finish(rec, code, outcome, wall, started_at, port, log_path, metrics_path)

    def _follow(
        self, run_id: str, handle: Any, t0: float, log_path: Path, metrics_path: Path
    ) -> tuple[int, RunStatus, float]:
        """Stream output and progress until the run exits; returns (code, outcome, wall time)."""
        log = _LineTail(log_path)
        metrics = self._readers[run_id] = MetricsReader(metrics_path, seed=seed_for(run_id))
        last_progress = ""
        outcome = RUN_FINISHED
        timeout = self.spec.timeout_s
        while True:
            code = handle.wait(self.poll_interval_s)
            wall = time.perf_counter() - t0
            if code is not None and getattr(handle, "t_end", None) is not None:
                wall = handle.t_end - getattr(handle, "t_start", t0)  # the process's own lifetime
            final = code is not None
            lines = log.poll(final=final)
            if lines:
                if len(lines) > MAX_LINES_PER_EVENT:
                    skipped = len(lines) - MAX_LINES_PER_EVENT
                    lines = [
                        f"[tuiprof: {skipped} lines not shown; see {log_path}]",
                        *lines[-MAX_LINES_PER_EVENT:],
                    ]
                self._emit(ev.RunOutput(run_id, tuple(lines)))
            if metrics.poll(final=final):
                progress = metrics.state.progress()
                if progress != last_progress:
                    last_progress = progress
                    self.store.set_progress(run_id, progress)
                self._emit(ev.RunProgress(run_id, progress, dict(metrics.state.final)))
            if final:
                if hasattr(handle, "kill_leftovers"):
                    handle.kill_leftovers()
                return code, outcome, wall
            with self._lock:
                stop = run_id in self._stop_requested
            if outcome == RUN_FINISHED and (stop or (timeout is not None and wall > timeout)):
                outcome = RUN_STOPPED if stop else RUN_TIMEOUT
                threading.Thread(
                    target=handle.terminate, args=(self.spec.kill_grace_s,), daemon=True
                ).start()

    def _finish(
        self,
        rec: RunRecord,
        code: int,
        outcome: RunStatus,
        wall: float,
        started_at: float,
        port: int | None,
        log_path: Path,
        metrics_path: Path,
    ) -> None:
        state = self._readers.pop(rec.run_id).state
        metrics = state.results()  # distributions as NAME:p50|p90|p99
        metrics[WALL_TIME] = wall  # tuiprof's own measurement always wins
        status, error = outcome, None
        if outcome == RUN_TIMEOUT:
            error = f"timed out after {self.spec.timeout_s:g} s ({_describe_exit(code)})"
        elif outcome == RUN_STOPPED:
            error = f"stopped by the user ({_describe_exit(code)})"
        elif code != 0:
            status, error = RUN_FAILED, _describe_exit(code)
        tail = tail_text(log_path, LOG_TAIL_LINES)
        if error and tail:
            error += ": " + tail.splitlines()[-1][:200]
        rec = replace(
            rec,
            status=status,
            started_at=started_at,
            ended_at=started_at + wall,
            wall_time_s=wall,
            exit_code=code,
            metrics=metrics,
            environment=run_fingerprint(self._host, state.info),
            error=error,
            log_tail=tail if status != RUN_FINISHED else "",
            progress=state.progress(),
            profiler_port=port,
        )
        self.store.finish(rec, state.distributions())
        self._emit(ev.RunFinished(rec) if status == RUN_FINISHED else ev.RunFailed(rec))


def _load(directory: Path) -> ExperimentRecord:
    from tui_prof.experiments.store import load_experiment

    return load_experiment(directory)
