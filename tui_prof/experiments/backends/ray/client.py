"""The Ray backend: each run is one Ray job, submitted through the Jobs API to the dashboard.

Why the Jobs API rather than detached actors: a job is a process the cluster keeps running after
its client has gone, with its own log, status and stop, all reachable over HTTP from any machine
that can reach the dashboard; the client never joins the cluster (no `ray.init`, no matching
Python, no driver to keep alive), and a run is found again by the id tuiprof chose for it
(`tuiprof-<experiment>-<run>-a<attempt>`, recorded before it is submitted). Detached actors would
need a connected driver to create, poll and stop them, and a driver's death takes its output.

Contract: `RayBackend.connect(spec)` checks, before anything starts, that a cluster answers at
the address and that some alive node can run what a run asks for (BackendError, one line, if
not). `launch` submits with the run's resources (`entrypoint_num_cpus/gpus`, the accelerator
type), pinned by the node-id label to its block's node when `placement = "blocked"`, and
`py_modules` carrying tuiprof itself (nothing to install on the nodes). The job's log streams
back (`tail_job_logs`) into the run's local files (stream.py); a monitor thread checks, once a
second, that each run's node is alive (else: ended, "node lost"), that a queued run has been
placed within `pending_timeout_s` (else: stopped, with what is missing), and concludes runs whose
stream ended. `terminate` is `stop_job` (Ray sends SIGTERM, then SIGKILL after its
RAY_JOB_STOP_WAIT_TIME_S). `close` lets go of the cluster and leaves the jobs running.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from ray.job_submission import JobStatus, JobSubmissionClient

import tui_prof
from tui_prof.experiments.backend_spec import BackendSpec
from tui_prof.experiments.backends import (
    ENDED,
    QUEUED,
    RUNNING,
    BackendError,
    LaunchRequest,
    RunOutcome,
)
from tui_prof.experiments.backends.ray import placement as pl
from tui_prof.experiments.backends.ray.node import PAYLOAD_VAR
from tui_prof.experiments.backends.ray.stream import Demux

# Their INFO lines ("Uploading package", "WebSocket closed") would cut into tuiprof's output.
for _name in ("ray", "ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk"):
    logging.getLogger(_name).setLevel(logging.WARNING)

ENTRY_MODULE = "tui_prof.experiments.backends.ray.node"
NODES_EVERY_S = 2.0  # how stale the node list may be
WATCH_EVERY_S = 1.0
RETAILS = 3  # a broken log stream is picked up again this often
LOCAL_ONLY = (
    "TUIPROF_RUN_DIR",
    "TUIPROF_METRICS_FILE",
    "TUIPROF_EXPERIMENT_DIR",
    "TUIPROF_PROFILER_PORT",
)


def one_line(exc: BaseException | str, limit: int = 300) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # Ray's HTTP errors carry a server traceback: its last line says what went wrong.
    line = (
        lines[-1] if len(lines) > 1 and "Traceback" in text else (lines[0] if lines else repr(exc))
    )
    return line[:limit]


def list_nodes(address: str) -> list[pl.Node]:
    """Every node the cluster knows, alive or dead, from the state API (HTTP)."""
    from ray.util.state import list_nodes as state_nodes

    fields = ("node_id", "node_name", "node_ip", "state", "state_message", "resources_total")
    out = []
    for n in state_nodes(address=address, detail=True, limit=10_000, raise_on_missing_output=False):
        d = {f: getattr(n, f, None) for f in fields}
        d["is_head_node"] = getattr(n, "is_head_node", False)
        out.append(pl.Node.from_state(d))
    return out


def _missing(exc: Exception) -> bool:
    text = str(exc)
    return "does not exist" in text or "404" in text


class RayBackend:
    """Runs as Ray jobs (see the module contract)."""

    name = "ray"
    remote = True

    def __init__(self, spec: BackendSpec, client: JobSubmissionClient, address: str) -> None:
        self.spec, self.client, self.address = spec, client, address
        self.placement = pl.Placement(spec)
        self._lock = threading.Lock()
        self._nodes: list[pl.Node] = []
        self._nodes_at = 0.0
        self._handles: dict[str, RayRunHandle] = {}
        self._closed = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(
            target=self._loop.run_forever, name="tuiprof-ray-logs", daemon=True
        ).start()
        self._watcher: threading.Thread | None = None
        self._env: dict[str, Any] = {
            "py_modules": [str(Path(tui_prof.__file__).parent)],
            "excludes": ["__pycache__", "*.pyc"],
        }
        self._upload(self._env, "_upload_py_modules_if_needed")
        self._workdirs: dict[str, dict[str, Any]] = {}
        params = inspect.signature(client.submit_job).parameters
        self._labels = "entrypoint_label_selector" in params  # else pin by node:<ip>

    @classmethod
    def connect(cls, spec: BackendSpec) -> RayBackend:
        address = spec.resolved_address()
        try:
            client = JobSubmissionClient(address)
        except Exception as exc:  # Ray raises several kinds; all mean "not usable"
            raise BackendError(f"no usable Ray cluster at {address}: {one_line(exc)}") from None
        backend = cls(spec, client, address)
        try:
            nodes = backend.nodes(fresh=True)
        except Exception as exc:
            backend.close()
            raise BackendError(
                f"the Ray cluster at {address} did not list its nodes: {one_line(exc)}"
            ) from None
        if not pl.eligible(nodes, spec):
            backend.close()
            raise BackendError(
                f"the Ray cluster at {address} cannot run this experiment: "
                f"{pl.describe_missing(spec, nodes)}"
            )
        return backend

    def _upload(self, env: dict[str, Any], method: str) -> None:
        """Upload py_modules / working_dir once (Ray re-hashes them on every submission otherwise)."""
        upload = getattr(self.client, method, None)
        if upload is not None:
            try:
                upload(env)
            except Exception as exc:
                raise BackendError(
                    f"could not send files to the Ray cluster: {one_line(exc)}"
                ) from None

    # -- the cluster ---------------------------------------------------------------------
    def nodes(self, fresh: bool = False) -> list[pl.Node]:
        with self._lock:
            stale = fresh or time.monotonic() - self._nodes_at > NODES_EVERY_S
        if stale:
            found = list_nodes(self.address)
            with self._lock:
                self._nodes, self._nodes_at = found, time.monotonic()
        with self._lock:
            return list(self._nodes)

    def node(self, node_id: str | None) -> pl.Node | None:
        if not node_id:
            return None
        for n in self.nodes():
            if n.node_id == node_id:
                return n
        return None

    def capacity(self) -> int:
        return max(1, pl.capacity(self.nodes(), self.spec))

    def reference(self, request: LaunchRequest) -> str:
        return f"tuiprof-{request.experiment_id}-{request.run_id}-a{request.attempt}"

    # -- runs ----------------------------------------------------------------------------
    def _runtime_env(self, request: LaunchRequest, payload: dict[str, Any]) -> dict[str, Any]:
        env: dict[str, Any] = dict(self._env)
        if self.spec.upload_workdir:
            key = str(request.cwd)
            if key not in self._workdirs:
                shipped: dict[str, Any] = {"working_dir": key, "excludes": env["excludes"]}
                self._upload(shipped, "_upload_working_dir_if_needed")
                self._workdirs[key] = shipped
            env["working_dir"] = self._workdirs[key]["working_dir"]
        env["env_vars"] = {PAYLOAD_VAR: json.dumps(payload)}
        return env

    def launch(self, request: LaunchRequest) -> RayRunHandle:
        sid, token = self.reference(request), secrets.token_hex(8)
        nodes = self.nodes()
        with self._lock:
            node = self.placement.choose(request.block, nodes)
            self.placement.submitted(node.node_id if node else None)
        payload = {
            "token": token,
            "argv": list(request.argv),
            "cwd": None if self.spec.upload_workdir else str(request.cwd),
            "env": {k: v for k, v in request.env.items() if k not in LOCAL_ONLY},
            "timeout_s": request.timeout_s,
            "kill_grace_s": request.kill_grace_s,
            "profiler_port": request.profiler_port,
            "storage": f"{self.spec.storage}/{request.experiment_id}/{sid}.tar.gz"
            if self.spec.storage
            else None,
        }
        kwargs: dict[str, Any] = {"entrypoint_num_cpus": self.spec.cpus_per_run}
        if self.spec.gpus_per_run:
            kwargs["entrypoint_num_gpus"] = self.spec.gpus_per_run
        extra = {k: v for k, v in pl.wants(self.spec).items() if k not in ("CPU", "GPU")}
        if node is not None and self._labels:
            kwargs["entrypoint_label_selector"] = {"ray.io/node-id": node.node_id}
        elif node is not None and node.node_ip:  # older Ray: the node's own IP resource
            extra[f"node:{node.node_ip}"] = pl.SLIVER
        if extra:
            kwargs["entrypoint_resources"] = extra
        metadata = {
            "tuiprof_token": token,
            "tuiprof_run": request.run_id,
            "tuiprof_node": node.node_id if node else "",
        }
        try:
            self.client.submit_job(
                entrypoint=f"exec {self.spec.python} -m {ENTRY_MODULE}",
                submission_id=sid,
                runtime_env=self._runtime_env(request, payload),
                metadata=metadata,
                **kwargs,
            )
        except Exception as exc:
            with self._lock:
                self.placement.ended(node.node_id if node else None)
            if "already exists" in str(exc):  # submitted by a tuiprof killed just after
                again = self.attach(sid, request)
                if again is not None:
                    return again
            raise OSError(f"the Ray cluster refused the run: {one_line(exc)}") from None
        handle = RayRunHandle(
            self, sid, token, request, node.node_id if node else None, pinned=node is not None
        )
        self._follow(handle)
        return handle

    def attach(self, ref: str, request: LaunchRequest) -> RayRunHandle | None:
        try:
            info = self.client.get_job_info(ref)
        except Exception as exc:
            if _missing(exc):
                return None
            raise OSError(
                f"the Ray cluster did not say what became of {ref}: {one_line(exc)}"
            ) from None
        meta = info.metadata or {}
        token = meta.get("tuiprof_token")
        if not token:
            return None
        node_id = info.driver_node_id or meta.get("tuiprof_node") or None
        with self._lock:
            if node_id:
                self.placement.pin(request.block, node_id)
            self.placement.submitted(node_id)
        for path in (request.log_path, request.metrics_path):  # the stream replays from the start
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        handle = RayRunHandle(
            self, ref, token, request, node_id, pinned=bool(meta.get("tuiprof_node"))
        )
        self._follow(handle)
        return handle

    def _follow(self, handle: RayRunHandle) -> None:
        with self._lock:
            self._handles[handle.sid] = handle
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=self._watch, name="tuiprof-ray-watch", daemon=True
                )
                self._watcher.start()
        self.tail(handle)

    def tail(self, handle: RayRunHandle) -> None:
        asyncio.run_coroutine_threadsafe(self._tail(handle, handle.demux), self._loop)

    async def _tail(self, handle: RayRunHandle, demux: Demux) -> None:
        try:
            async for chunk in self.client.tail_job_logs(handle.sid):
                handle.feed(chunk, demux)
        except Exception as exc:  # the watcher decides what a broken stream means
            handle.stream_closed(demux, one_line(exc))
            return
        handle.stream_closed(demux, None)

    def _watch(self) -> None:
        while not self._closed.wait(WATCH_EVERY_S):
            with self._lock:
                handles = [h for h in self._handles.values() if not h.ended]
            if not handles:
                continue
            try:
                by_id = {n.node_id: n for n in self.nodes()}
            except Exception:  # the dashboard hiccuped: try again next round
                continue
            for h in handles:
                try:
                    h.check(by_id)
                except Exception as exc:
                    h.note(f"tuiprof could not check {h.sid}: {one_line(exc)}")

    def done(self, handle: RayRunHandle) -> None:
        with self._lock:
            self._handles.pop(handle.sid, None)
            self.placement.ended(handle.placed_on)

    def close(self) -> None:
        """Let go of the cluster; its jobs go on (reattach with `tuiprof run --resume`)."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=5)

    async def _shutdown(self) -> None:
        """Close the log streams (the jobs are not touched), then stop the loop."""
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.get_running_loop().call_soon(asyncio.get_running_loop().stop)


class RayRunHandle:
    """One submitted run: its state from its log stream, its end from the stream or the watcher."""

    pid: int | None = None
    pgid: int | None = None

    def __init__(
        self,
        backend: RayBackend,
        sid: str,
        token: str,
        request: LaunchRequest,
        node_id: str | None,
        *,
        pinned: bool,
    ) -> None:
        self.backend, self.sid, self.token, self.request = backend, sid, token, request
        self.node_id = node_id
        self.placed_on = node_id  # what placement counted this run against
        self._driver_known = False
        self.demux = Demux(token, request.log_path, request.metrics_path, request.run_dir)
        self._start_seen: dict[str, Any] | None = None  # a broken stream's start record
        self._lock = threading.RLock()
        self._ended = threading.Event()
        self._outcome: RunOutcome | None = None
        self._since = time.monotonic()
        self._stream_error: str | None = None
        self._stream_done = False
        self._retails = 0
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
        return RUNNING if self.start_record is not None else QUEUED

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
        start = self.start_record
        if start is None:
            return None
        env = dict(start.get("environment") or {})
        n = self.backend.node(self.node_id)
        if n is not None:
            env["node"] = n.name
            env["ray_node_id"] = n.node_id
            env["ray_accelerator_type"] = n.accelerator
            if not env.get("gpu_model") and n.accelerator:
                env["gpu_model"] = n.accelerator  # no nvidia-smi there: the model Ray knows it by
        return env

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
                self._stream_done, self._stream_error = True, error

    def note(self, line: str) -> None:
        with self._lock, contextlib.suppress(OSError), open(self.request.log_path, "ab") as f:
            f.write(f"[tuiprof] {line}\n".encode())

    # -- the watcher's side --------------------------------------------------------------
    def check(self, nodes: dict[str, pl.Node]) -> None:
        """Once a second: node alive, placed in time, stream still flowing (see the contract)."""
        if self._ended.is_set():
            return
        if self.start_record is not None and not self._driver_known:
            info = self.backend.client.get_job_info(self.sid)
            if info.driver_node_id:
                self.node_id, self._driver_known = info.driver_node_id, True
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
        waited = time.monotonic() - self._since
        if (
            self.start_record is None
            and not self._stream_done
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
        if self._stream_done:
            self._after_stream()

    def _after_stream(self) -> None:
        info = self.backend.client.get_job_info(self.sid)
        if not info.status.is_terminal():
            if self._retails < RETAILS:  # the stream broke while it runs: pick it up again
                self._retails += 1
                self._restart(None)
            return
        if not self.demux.ended:
            with contextlib.suppress(Exception):  # the whole log once more, for what is missing
                self._restart(self.backend.client.get_job_logs(self.sid))
        if not self.demux.ended:
            self._conclude(self._from_info(info))

    def _restart(self, whole_log: str | None) -> None:
        with self._lock:
            old = self.demux
            if old.start is not None:
                self._start_seen = old.start
            fresh = Demux(
                self.token,
                self.request.log_path,
                self.request.metrics_path,
                self.request.run_dir,
                skip_output=old.output_chars,
                skip_metrics=old.metric_lines,
            )
            old.close()
            self.demux, self._stream_done, self._stream_error = fresh, False, None
            if whole_log is None:
                self.backend.tail(self)
                return
            fresh.feed(whole_log)
            if fresh.ended:
                self._conclude(self._from_records())

    def _from_records(self) -> RunOutcome:
        ex = self.demux.exit or {}
        wall = ex.get("wall_time_s")
        return RunOutcome(
            exit_code=int(ex.get("exit_code", 1)),
            wall_time_s=float(wall) if isinstance(wall, (int, float)) else None,
            error=ex.get("error") or None,
            timed_out=bool(ex.get("timed_out")),
            stopped=bool(ex.get("stopped")) or self._stopping,
            ran=bool(ex.get("ran", True)),
        )

    def _from_info(self, info: Any) -> RunOutcome:
        ran = self.start_record is not None
        if self.demux.exit is not None:
            self.note("the run's files were cut off before they all arrived")
            return self._from_records()
        if info.status == JobStatus.STOPPED:
            return RunOutcome(-15, stopped=True, ran=ran)
        said = one_line(info.message or "") or "no reason given"
        if not ran and self.demux.preamble:
            said += f" ({self.demux.preamble[-1].strip()[:200]})"
        return RunOutcome(1, error=f"the Ray job {info.status.value.lower()}: {said}", ran=ran)

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
