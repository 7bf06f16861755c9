"""One run submitted as a Ray job: its state, its end, and its results collected once.

Contract: the backend's log stream (the node's own log file through the state API once the node
is known, else the Jobs API's `tail_job_logs`) feeds `feed` as the job prints, so output and
metrics appear live; the backend's watcher calls `check` every WATCH_EVERY_S, and each check
asks Ray for the job's status at most every `poll_every` seconds. A run is RUNNING once its
log's start record or Ray's RUNNING status says so, and ends, whichever comes first, when the
stream delivers the wrapper's `end` record or when Ray reports the job terminal:
then its whole log is read once (logs.py: the Jobs API, else the node's log file through the
state API) and split into output, metrics and files, skipping what the stream already wrote.
A job whose entrypoint ran but whose records can be read from nowhere is "results lost on
NODE", with `lost` set so that the runner runs it again on another node (the backend stops
placing runs where logs cannot be read); never a failure in 0.00 s. A node that dies is "node
lost"; a run not placed within `pending_timeout_s` is stopped and says what it waited for.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

from tui_prof.experiments.backends import ENDED, QUEUED, RUNNING, LaunchRequest, RunOutcome
from tui_prof.experiments.backends.ray import logs
from tui_prof.experiments.backends.ray import placement as pl
from tui_prof.experiments.backends.ray.stream import Demux

if TYPE_CHECKING:
    from tui_prof.experiments.backends.ray.client import RayBackend

LOCAL_ONLY = (
    "TUIPROF_RUN_DIR",
    "TUIPROF_METRICS_FILE",
    "TUIPROF_EXPERIMENT_DIR",
    "TUIPROF_PROFILER_PORT",
)
RETAILS = 5  # a broken log stream is picked up again this often, once Ray says the job runs,
RETAIL_EVERY_S = 1.0  # at most this often (its node's file may not be there yet)
NODE_DEATH_WAIT_S = 10.0  # for Ray to call a node dead after a job's supervisor died on it


def one_line(exc: BaseException | str, limit: int = 300) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # Ray's HTTP errors carry a server traceback: its last line says what went wrong.
    line = (
        lines[-1] if len(lines) > 1 and "Traceback" in text else (lines[0] if lines else repr(exc))
    )
    return line[:limit]


def run_payload(spec: Any, request: LaunchRequest, sid: str, token: str) -> dict[str, Any]:
    """What the run wrapper (node.py) is told about one run, whichever way it is started."""
    return {
        "token": token,
        "argv": list(request.argv),
        "cwd": None if spec.upload_workdir else str(request.cwd),
        "env": {k: v for k, v in request.env.items() if k not in LOCAL_ONLY},
        "timeout_s": request.timeout_s,
        "kill_grace_s": request.kill_grace_s,
        "profiler_port": request.profiler_port,
        "storage": f"{spec.storage}/{request.experiment_id}/{sid}.tar.gz" if spec.storage else None,
    }


def environment_there(start: dict[str, Any] | None, node: pl.Node | None) -> dict[str, Any] | None:
    """The fingerprint the wrapper took on its node, with what Ray knows of that node."""
    if start is None:
        return None
    env = dict(start.get("environment") or {})
    if node is not None:
        env["node"] = node.name
        env["ray_node_id"] = node.node_id
        env["ray_accelerator_type"] = node.accelerator
        if not env.get("gpu_model") and node.accelerator:
            env["gpu_model"] = node.accelerator  # no nvidia-smi there: the model Ray knows it by
    return env


class RayRunHandle:
    """One submitted run (see the module contract)."""

    pid: int | None = None
    pgid: int | None = None

    def __init__(
        self,
        backend: RayBackend,
        sid: str,
        token: str,
        request: LaunchRequest,
        node_id: str | None,
    ) -> None:
        self.backend, self.sid, self.token, self.request = backend, sid, token, request
        self.node_id = node_id
        self.placed_on = node_id  # what placement counted this run against
        self.demux = Demux(token, request.log_path, request.metrics_path, request.run_dir)
        self._start_seen: dict[str, Any] | None = None  # a replaced reader's start record
        self._seen_output = 0  # of the job's output written locally (by any reader)
        self._seen_metrics = 0
        self._lock = threading.RLock()
        self._ended = threading.Event()
        self._outcome: RunOutcome | None = None
        self._since = time.monotonic()
        self._next_poll = 0.0
        self._stream_done = False
        self._ray_running = False  # Ray says its entrypoint runs (the log may not say so yet)
        self._retails = 0
        self._next_tail = 0.0
        self.streamed_from: str | None = None  # the node whose own log file the stream follows
        self._stopping = False

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    @property
    def start_record(self) -> dict[str, Any] | None:
        """The wrapper's start record: the run began on its node. Kept when a broken log stream
        is picked up again, whose fresh reader has not yet reached it (the run did not stop
        having started: a node lost then is lost mid-run, not before it)."""
        return self.demux.start if self.demux.start is not None else self._start_seen

    # -- the runner's side ---------------------------------------------------------------
    def state(self) -> str:
        if self._ended.is_set():
            return ENDED
        started = self.start_record is not None or self._ray_running
        return RUNNING if started else QUEUED

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._ended.wait(timeout):
            return None
        return self.outcome().exit_code

    def terminate(self, grace_s: float) -> None:
        self._stopping = True
        with contextlib.suppress(Exception):
            self.backend.client.stop_job(self.sid)

    def outcome(self) -> RunOutcome:
        return self._outcome or RunOutcome(-9, ran=False, error="still running")

    def node(self) -> str | None:
        n = self.backend.node(self.node_id)
        return n.name if n is not None else (f"node/{self.node_id[:6]}" if self.node_id else None)

    def environment(self) -> dict[str, Any] | None:
        return environment_there(self.start_record, self.backend.node(self.node_id))

    # -- the stream's side ---------------------------------------------------------------
    def feed(self, text: str, demux: Demux) -> None:
        with self._lock:
            if demux is not self.demux or self._ended.is_set():
                return
            demux.feed(text)
            if demux.ended:
                self._conclude(self._from_records())

    def stream_closed(self, demux: Demux, error: str | None) -> None:
        with self._lock:
            if demux is self.demux:
                self._stream_done = True

    def note(self, line: str) -> None:
        with self._lock, contextlib.suppress(OSError), open(self.request.log_path, "ab") as f:
            f.write(f"[tuiprof] {line}\n".encode())

    # -- the watcher's side --------------------------------------------------------------
    def check(self, nodes: dict[str, pl.Node], poll_every: float) -> None:
        """Node alive, placed in time, the job's status (see the module contract)."""
        if self._ended.is_set():
            return
        info = None
        now = time.monotonic()
        if now >= self._next_poll or self._stream_done:
            self._next_poll = now + poll_every
            info = self.backend.client.get_job_info(self.sid)
            if info.driver_node_id:
                self.node_id = info.driver_node_id
            self._ray_running = self._ray_running or info.status == "RUNNING"
        node = nodes.get(self.node_id or "")
        if node is not None and not node.alive:
            with contextlib.suppress(Exception):
                self.backend.client.stop_job(self.sid)
            why = node.message or "it stopped answering"
            ran = self.start_record is not None
            when = "" if ran else " before the run started"
            self.note(f"node lost{when}: {node.name} ({why})")
            self._conclude(
                RunOutcome(-9, error=f"node lost{when}: {node.name} ({why})", lost=True, ran=ran)
            )
            return
        terminal = info is not None and info.status.is_terminal()
        waited = now - self._since
        if (
            self.start_record is None
            and not self._ray_running
            and not terminal
            and waited > self.backend.spec.pending_timeout_s
        ):
            with contextlib.suppress(Exception):
                self.backend.client.stop_job(self.sid)
            missing = pl.describe_missing(self.backend.spec, list(nodes.values()))
            pinned = f" on node {node.name}" if node is not None else ""
            self._conclude(
                RunOutcome(
                    -9,
                    error=f"not placed{pinned} after {waited:.0f} s (pending_timeout_s): {missing}",
                    ran=False,
                )
            )
            return
        if terminal:
            self._collect(info)
        elif self.node_id and self.streamed_from is None and self._ray_running:
            self._restart(None)  # now its node is known: follow that node's own file
        elif (
            self._stream_done
            and self._retails < RETAILS
            and now >= self._next_tail
            and (self._ray_running or self.start_record is not None)
        ):
            self._retails += 1  # the stream broke (or began too early) while it runs: again
            self._next_tail = now + RETAIL_EVERY_S
            self._restart(None)

    def _collect(self, info: Any) -> None:
        """Ray says the job is over: its whole log, once, from the first place that has it."""
        failed: list[str] = []
        own = False  # a copy written on the node that ran it (Ray's line about the entrypoint)
        for way, text, why in logs.whole_logs(
            self.backend.client, self.backend.address, self.sid, self.node_id
        ):
            if self._ended.is_set():  # the stream got there first
                return
            if text is None:
                failed.append(f"{way}: {why}")
                continue
            mine = f"entrypoint for job {self.sid}" in text
            own = own or mine
            self._restart(text)
            if self._ended.is_set():
                return
            if not mine:
                failed.append(f"{way}: another node's copy, without the run")
        if not self._ended.is_set():
            self._conclude(self._from_info(info, failed, own))

    def _restart(self, whole_log: str | None) -> None:
        """A fresh reader of the log: the stream again (None) or the whole log, writing only
        what no reader wrote before."""
        with self._lock:
            if self._ended.is_set():
                return
            old = self.demux
            if old.start is not None:
                self._start_seen = old.start
            self._seen_output = max(self._seen_output, old.output_chars)
            self._seen_metrics = max(self._seen_metrics, old.metric_lines)
            fresh = Demux(
                self.token,
                self.request.log_path,
                self.request.metrics_path,
                self.request.run_dir,
                skip_output=self._seen_output,
                skip_metrics=self._seen_metrics,
            )
            old.close()
            self.demux, self._stream_done = fresh, False
            if whole_log is None:
                self.backend.tail(self)
                return
            fresh.feed(whole_log)
            if fresh.ended:
                self._conclude(self._from_records())

    def _from_records(self) -> RunOutcome:
        return self.demux.outcome(self._stopping)

    def _from_info(self, info: Any, failed: list[str], own: bool) -> RunOutcome:
        """The end when no copy of the log holds the wrapper's `end` record. `own`: the node's
        own copy was read (a wrapper that never started is a failure there, not a loss)."""
        status = str(getattr(info.status, "value", info.status))
        code = getattr(info, "driver_exit_code", None)
        if self.demux.exit is not None:
            self.note("the run's files were cut off before they all arrived")
            return self._from_records()
        if status == "STOPPED":
            return RunOutcome(-15, stopped=True, ran=self.start_record is not None)
        said = one_line(info.message or "") or "no reason given"
        node = self._dead_node()
        deadline = time.monotonic() + NODE_DEATH_WAIT_S
        while node is None and "actor died" in said and time.monotonic() < deadline:
            time.sleep(0.5)  # Ray fails the job as soon as its supervisor dies: is the node dead?
            node = self._dead_node()
        if node is not None:
            ran = self.start_record is not None
            when = "" if ran else " before the run started"
            why = node.message or "it stopped answering"
            self.note(f"node lost{when}: {node.name} ({why})")
            return RunOutcome(-9, error=f"node lost{when}: {node.name} ({why})", lost=True, ran=ran)
        entrypoint_ran = code is not None or status == "SUCCEEDED"
        if self.start_record is not None or (entrypoint_ran and not own):
            where = self.node() or "an unknown node"
            why = "; ".join(failed) or "no copy of its log holds tuiprof's records"
            if self.node_id:
                self.backend.unreadable(self.node_id, why)
            line = (
                f"results lost on {where}: the Ray job {status.lower()} ({said}), "
                f"but its log could not be read ({why})"
            )
            self.note(line)
            return RunOutcome(code if code else 1, error=line, lost=True, unread=True, ran=True)
        if self.demux.preamble:
            said += f" ({self.demux.preamble[-1].strip()[:200]})"
        return RunOutcome(1, error=f"the Ray job {status.lower()}: {said}", ran=False)

    def _dead_node(self) -> pl.Node | None:
        """The node it ran on, if Ray now knows it dead (asked afresh)."""
        try:
            nodes = self.backend.nodes(fresh=True)
        except Exception:
            return None
        for n in nodes:
            if n.node_id == self.node_id and not n.alive:
                return n
        return None

    def _conclude(self, outcome: RunOutcome) -> None:
        with self._lock:
            if self._ended.is_set():
                return
            self.demux.close()
            for line in self.demux.problems:
                self.note(line)
            self._outcome = outcome
            self.backend.done(self)
            self._ended.set()
