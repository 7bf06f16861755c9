"""The experiment runner: variants × repeats as separate processes, recorded run by run.

Contract: `Runner.create(spec)` (a new experiment) or `Runner.resume(dir)` (its unfinished runs)
then `start()`, which returns at once: the runs go on in background threads and report through
`on_event` (see events.py). `stop(run_id)`, `stop_all()` and the `cancel` event stop them;
`wait()` blocks until the end. Runs are interleaved (A B A B …, warm-ups first) so a drifting
machine affects every variant alike. Wall time is measured where the run runs (here, or on its
cluster node), so even a script that reports nothing gets one; a run that fails, times out or is
stopped is recorded with the tail of its log and the others go on.

The backend (the spec's `[backend]`, see backends/) is connected before the experiment directory
is made, so a cluster that is not there costs one line and nothing else. A cluster's runs outlive
the runner: `resume` reattaches the ones still in flight (collecting those that ended meanwhile)
before it starts anything new, and `resume(..., attach_only=True)` only reattaches. A run whose
node was lost is retried on another node up to `[backend] retries` times (unread ones: once).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tui_prof.experiments import durable, launch
from tui_prof.experiments import events as ev
from tui_prof.experiments.backends import (
    QUEUED,
    Backend,
    LaunchRequest,
    RunHandle,
    RunOutcome,
    get_backend,
)
from tui_prof.experiments.fingerprint import host_fingerprint, run_fingerprint
from tui_prof.experiments.noise import MachineProbe
from tui_prof.experiments.plan import block_of, check_parallel, pick, plan_runs
from tui_prof.experiments.protocol import MetricsReader, tail_text
from tui_prof.experiments.runio import LineTail, free_port
from tui_prof.experiments.samples import seed_for
from tui_prof.experiments.spec import (
    MAX_PARALLEL,
    WALL_TIME,
    ExperimentSpec,
    check_counts,
    check_executable,
    default_experiment_dir,
)
from tui_prof.experiments.store import load_experiment
from tui_prof.experiments.writer import ExperimentStore
from tui_prof.model import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_RUNNING,
    RUN_STOPPED,
    RUN_TIMEOUT,
    ExperimentRecord,
    RunRecord,
    RunStatus,
)

EventCallback = Callable[[Any], None]
# A run's log and metrics files are read every poll_interval_s while it writes, backing off to
# QUIET_POLL_S while it is quiet: the observer stays out of what it measures.
QUIET_POLL_S = 0.5
LOG_TAIL_LINES = 30


class Runner:
    """Runs one experiment's unfinished runs in background threads; never blocks its caller."""

    def __init__(
        self,
        store: ExperimentStore,
        on_event: EventCallback | None = None,
        backend: Backend | None = None,
        parallel: int | None = None,
        poll_interval_s: float = 0.1,
        cancel: threading.Event | None = None,
        profiler_ports: bool = True,
        attach_only: bool = False,
    ) -> None:
        self.store = store
        self.profiler_ports = profiler_ports  # give each run a free port for its profiler server
        self.spec = store.spec
        self.experiment_dir = store.directory
        self.on_event = on_event
        self.backend = backend or get_backend(self.spec.backend)
        self.parallel = min(check_parallel(parallel) or self.backend.capacity(), MAX_PARALLEL)
        self.poll_interval_s = poll_interval_s
        self.cancel = cancel or threading.Event()
        self.problem = ""  # why the runner stopped the experiment itself (one line), if it did
        self.recovered: list[str] = []  # runs whose result kept on disk was recorded on resume
        self._refs = store.in_flight() if self.backend.remote else {}
        self._todo = list(self._refs) if attach_only else store.unfinished()
        self._lock = threading.Lock()
        self._stop_requested: set[str] = set()
        self._active: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()
        self._started = False
        self._closed = False
        self._readers: dict[str, MetricsReader] = {}
        self._probes: dict[str, MachineProbe] = {}  # local runs: the machine's state meanwhile
        self._retried: dict[str, int] = {}  # run id -> retries after a lost node
        self._host: dict[str, Any] = {}  # filled in the background: nvidia-smi can take seconds
        self._experiment_id = store.experiment_id if self.backend.remote else ""
        # On a cluster with blocked placement a worker keeps to one block (a repeat's variants,
        # one node) until it is done, so the workers spread over the nodes instead of queueing
        # a block's runs behind each other on one node while another idles.
        self._affinity = self.backend.remote and self.spec.backend.placement == "blocked"
        self._blocks: dict[str, str] = {}  # block -> the worker thread that has it
        self._last_block: dict[str, str] = {}  # worker thread -> the block of its last run

    # -- construction --------------------------------------------------------------------
    @classmethod
    def create(
        cls, spec: ExperimentSpec, experiment_dir: str | Path | None = None, **kwargs: Any
    ) -> Runner:
        """A new experiment directory (default: `<output>/<name>-<timestamp>`) and its runner;
        the backend is connected first (BackendError: nothing was made)."""
        check_counts(spec)  # before planning: a count past the limits is refused, not planned
        check_parallel(kwargs.get("parallel"))
        if kwargs.get("backend") is None:
            kwargs["backend"] = get_backend(spec.backend)
        d = Path(experiment_dir) if experiment_dir else default_experiment_dir(spec)
        try:
            store = ExperimentStore.create(d, spec, plan_runs(spec))
        except BaseException:
            kwargs["backend"].close()
            raise
        try:
            return cls(store, **kwargs)
        except BaseException:
            store.close()
            raise

    @classmethod
    def resume(
        cls, experiment_dir: str | Path, repeats: int | None = None, **kwargs: Any
    ) -> Runner:
        """Reopen an experiment; the runner reattaches what a cluster still runs and runs only
        what has not finished (plus new repeats). `backend_spec` overrides the stored one."""
        check_parallel(kwargs.get("parallel"))
        override = kwargs.pop("backend_spec", None)
        store = ExperimentStore.open(experiment_dir)
        try:  # results kept on disk while the store did not answer: recorded, not run again
            recovered = durable.recover(store)
        except BaseException:
            store.close()
            raise
        spec = store.spec
        try:
            if override is not None:
                spec = replace(spec, backend=override)
            check_executable(spec)
            if repeats is not None:
                check_counts(replace(spec, repeats=repeats))
            if kwargs.get("backend") is None:
                kwargs["backend"] = get_backend(spec.backend)
        except BaseException:
            store.close()
            raise
        try:
            if spec.backend != store.spec.backend:
                store.set_spec(spec)
            if repeats is not None and repeats > spec.repeats:
                spec = replace(spec, repeats=repeats)
                store.set_spec(spec)
                store.add_runs(plan_runs(spec))
            runner = cls(store, **kwargs)
            runner.recovered = recovered
            return runner
        except BaseException:
            store.close()
            kwargs["backend"].close()
            raise

    # -- control -------------------------------------------------------------------------
    @property
    def pending(self) -> list[str]:
        """Run ids this runner will still start (or reattach), in order."""
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
        """Stop one run (local: SIGTERM to its process group, SIGKILL after the grace time; a
        cluster: cancelled there); the rest go on. A run not started yet is recorded as stopped."""
        with self._lock:
            self._stop_requested.add(run_id)
            skipped = run_id in self._todo and run_id not in self._active and not self._closed
            if skipped and run_id in self._refs:
                skipped = False  # on the cluster already: reattached first, then cancelled
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
            self._stop_requested.update(r for r in self._todo if r in self._refs)

    def result(self) -> ExperimentRecord:
        """The experiment as stored now (also after the end)."""
        return load_experiment(self.experiment_dir) if self._closed else self.store.record()

    # -- the work ------------------------------------------------------------------------
    def _emit(self, event: Any) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            print("tuiprof: an experiment event handler failed:", file=sys.stderr)
            traceback.print_exc()

    def _next(self, worker: str) -> str | None:
        with self._lock:
            for block, owner in list(self._blocks.items()):
                if owner == worker:
                    del self._blocks[block]
            if not self._todo:
                return None
            todo = self._todo
            if self.cancel.is_set():  # what a cluster runs already is still followed
                todo = [r for r in todo if r in self._refs]
            run_id = pick(todo, self._last_block.get(worker), self._blocks, self._affinity)
            if run_id is None:
                return None
            self._todo.remove(run_id)
            self._active[run_id] = None
            if self._affinity:
                self._blocks[block_of(run_id)] = worker
            return run_id

    def _worker(self) -> None:
        worker = threading.current_thread().name
        while (run_id := self._next(worker)) is not None:
            self._last_block[worker] = block_of(run_id)
            try:
                self._execute(run_id)
            except Exception as exc:  # a bug or a full disk: record it, go on with the others
                if durable.disk_full(exc) or isinstance(exc, durable.StoreUnavailable):
                    self._halt(run_id, exc)  # the next runs would fail alike: stop cleanly
                    continue
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

    def _halt(self, run_id: str, exc: Exception) -> None:
        """The store cannot take results (a full disk, a lock that does not end): no more runs
        start, and the experiment says why in one line; `--resume` finishes it."""
        why = "the disk is full" if durable.disk_full(exc) else str(exc)
        with self._lock:
            if not self.problem:
                self.problem = (
                    f"stopped: {why} ({run_id}); free space (or the store) and run "
                    f"tuiprof run --resume {self.experiment_dir}"
                )
        self.cancel.set()

    def _main(self) -> None:
        counts: dict[str, int] = {}
        try:
            self._host = host_fingerprint()
            self._emit(ev.ExperimentStarted(str(self.experiment_dir), tuple(self.store.runs())))
            n = max(self.parallel, min(len(self._refs), MAX_PARALLEL))  # every reattached one
            workers = [
                threading.Thread(target=self._worker, name=f"tuiprof-run-{i}", daemon=True)
                for i in range(n)
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
            self.backend.close()
            self._closed = True
            self._emit(
                ev.ExperimentFinished(
                    str(self.experiment_dir), counts, self.cancel.is_set(), self.problem
                )
            )
            self._done.set()

    def _request(self, rec: RunRecord, port: int | None) -> LaunchRequest:
        env = launch.run_env(self.spec, rec, self.experiment_dir, port)
        remote, ports, exp_id = self.backend.remote, self.profiler_ports, self._experiment_id
        return launch.launch_request(self.spec, rec, env, remote, ports, exp_id)

    def _execute(self, run_id: str) -> None:
        handle: RunHandle | None = None
        ref = self._refs.get(run_id)
        rec = self.store.run(run_id)
        if ref is not None:  # submitted by an earlier runner: follow it, from its first line
            request = self._request(rec, None)
            handle = self.backend.attach(ref, request)
        if handle is None:
            if ref is None:
                self.store.prepare_rerun(run_id)
                rec = self.store.run(run_id)
            Path(rec.run_dir).mkdir(parents=True, exist_ok=True)
            Path(rec.metrics_path).touch()
            remote = self.backend.remote
            port = free_port() if self.profiler_ports and not remote else None
            request = self._request(rec, port)
            ref = self.backend.reference(request)
            submitted_at = time.time()
            if ref is not None:
                self.store.mark_queued(run_id, ref, submitted_at)
            try:
                handle = self.backend.launch(request)
            except OSError as exc:
                rec = replace(
                    rec,
                    status=RUN_FAILED,
                    started_at=submitted_at,
                    ended_at=time.time(),
                    error=f"could not start {request.argv[0]!r}: {exc.strerror or exc}",
                )
                self.store.finish(rec)
                self._emit(ev.RunFailed(rec))
                return
        with self._lock:
            self._active[run_id] = handle
        if handle.state() == QUEUED:
            self._emit(ev.RunQueued(replace(self.store.run(run_id), node=handle.node() or "")))
        self._follow(run_id, handle, request)

    def _on_running(self, run_id: str, handle: RunHandle, port: int | None) -> None:
        node = handle.node() or ""
        env = handle.environment() or self._host
        rec = self.store.run(run_id)
        reattached = rec.status == RUN_RUNNING and rec.started_at is not None
        started = rec.started_at if reattached and rec.started_at else time.time()
        self.store.mark_running(run_id, started, handle.pid, handle.pgid, port, dict(env), node)
        self._emit(ev.RunStarted(self.store.run(run_id)))

    def _follow(self, run_id: str, handle: RunHandle, request: LaunchRequest) -> None:
        """Stream output and progress until the run ended, then record it."""
        log = LineTail(request.log_path)
        metrics = self._readers[run_id] = MetricsReader(request.metrics_path, seed=seed_for(run_id))
        port_text = request.env.get("TUIPROF_PROFILER_PORT")
        port = int(port_text) if port_text else None
        last_progress = ""
        outcome = RUN_FINISHED
        timeout = self.spec.timeout_s
        if timeout is not None and self.backend.remote:  # enforced on the node; this is a backstop
            timeout += self.spec.kill_grace_s + 30.0
        t_run: float | None = None
        if not self.backend.remote:  # what else this machine does while the run runs
            self._probes[run_id] = MachineProbe.start()
        if handle.state() != QUEUED:
            t_run = time.perf_counter()
            self._on_running(run_id, handle, port)
        interval = self.poll_interval_s
        while True:
            code = handle.wait(interval)
            if t_run is None and (code is not None or handle.state() != QUEUED):
                t_run = time.perf_counter()
                if code is None or handle.outcome().ran:  # one never placed did not run
                    self._on_running(run_id, handle, port)
            wall = time.perf_counter() - t_run if t_run is not None else 0.0
            final = code is not None
            lines = log.poll(final=final)
            if lines:
                self._emit(
                    ev.RunOutput(run_id, tuple(launch.capped_lines(lines, request.log_path)))
                )
            # Quiet: look less often, up to QUIET_POLL_S (an exit still ends the wait at once).
            interval = min(interval * 2, max(QUIET_POLL_S, self.poll_interval_s))
            if lines:
                interval = self.poll_interval_s
            if metrics.poll(final=final):
                interval = self.poll_interval_s
                progress = metrics.state.progress()
                if progress != last_progress:
                    last_progress = progress
                    self.store.set_progress(run_id, progress)
                self._emit(ev.RunProgress(run_id, progress, dict(metrics.state.final)))
            if final:
                if hasattr(handle, "kill_leftovers"):
                    handle.kill_leftovers()
                self._finish(run_id, handle, outcome, wall, request)
                return
            with self._lock:
                stop = run_id in self._stop_requested
            late = timeout is not None and t_run is not None and wall > timeout
            if outcome == RUN_FINISHED and (stop or late):
                outcome = RUN_STOPPED if stop else RUN_TIMEOUT
                threading.Thread(
                    target=handle.terminate, args=(self.spec.kill_grace_s,), daemon=True
                ).start()

    def _finish(
        self,
        run_id: str,
        handle: RunHandle,
        outcome: RunStatus,
        wall: float,
        request: LaunchRequest,
    ) -> None:
        out: RunOutcome = handle.outcome()
        state = self._readers.pop(run_id).state
        if state.dropped_names:  # protocol.MAX_NAMES: said where the run's output is read
            note = launch.dropped_names_note(state.dropped_names)
            with contextlib.suppress(OSError), open(request.log_path, "a") as f:
                f.write(note + "\n")
            self._emit(ev.RunOutput(run_id, (note,)))
        code = out.exit_code
        if out.wall_time_s is not None:
            wall = out.wall_time_s  # measured around the process itself, where it ran
        metrics = state.results()  # distributions as NAME:p50|p90|p99
        metrics[WALL_TIME] = wall  # tuiprof's own measurement always wins
        tail = tail_text(request.log_path, LOG_TAIL_LINES)
        status, error = launch.ending(outcome, out, self.spec.timeout_s, tail)
        allowed = max(self.spec.backend.retries, 1 if out.unread else 0)  # unread: at least once
        retry = out.lost and self._retried.get(run_id, 0) < allowed
        if retry:
            error = f"{error}; retrying on another node"
        rec = self.store.run(run_id)
        started_at = rec.started_at if rec.started_at is not None else time.time() - wall
        env = handle.environment() or self._host
        environment = run_fingerprint(env, state.info)
        probe = self._probes.pop(run_id, None)
        if probe is not None:
            environment["machine_state"] = probe.finish(getattr(handle, "cpu_time_s", None))
        rec = replace(
            rec,
            status=status,
            started_at=started_at,
            ended_at=started_at + wall,
            wall_time_s=wall,
            exit_code=code,
            metrics=metrics,
            environment=environment,
            error=error,
            log_tail=tail if status != RUN_FINISHED else "",
            progress=state.progress(),
            node=handle.node() or rec.node,
        )
        durable.finish(self.store, rec, state.distributions())
        self._emit(ev.RunFinished(rec) if status == RUN_FINISHED else ev.RunFailed(rec))
        if retry:
            with self._lock:
                self._retried[run_id] = self._retried.get(run_id, 0) + 1
                self._refs.pop(run_id, None)
                if not self.cancel.is_set():
                    self._todo.insert(0, run_id)
