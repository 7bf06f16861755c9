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
back (`tail_job_logs`) into the run's local files (stream.py) while it runs; a watcher thread
checks every WATCH_EVERY_S each run's node, placement and job status (handle.py), and a run ends
as soon as Ray reports its job terminal, its whole log read once (logs.py). `terminate` is
`stop_job` (Ray sends SIGTERM, then SIGKILL after its RAY_JOB_STOP_WAIT_TIME_S). `close` lets
go of the cluster and leaves the jobs running.
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
import urllib.parse
from pathlib import Path
from typing import Any

from ray.job_submission import JobSubmissionClient

import tui_prof
from tui_prof.experiments.backend_spec import BackendSpec
from tui_prof.experiments.backends import BackendError, LaunchRequest
from tui_prof.experiments.backends.ray import placement as pl
from tui_prof.experiments.backends.ray.handle import RayRunHandle, one_line, run_payload
from tui_prof.experiments.backends.ray.node import PAYLOAD_VAR
from tui_prof.experiments.backends.ray.stream import Demux

# Their INFO lines ("Uploading package", "WebSocket closed") would cut into tuiprof's output.
for _name in ("ray", "ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk"):
    logging.getLogger(_name).setLevel(logging.WARNING)

ENTRY_MODULE = "tui_prof.experiments.backends.ray.node"
NODES_EVERY_S = 2.0  # how stale the node list may be
WATCH_EVERY_S = 0.1
STREAM_EVERY_S = 0.2  # how often a node's agent looks for new lines of a run's log
# Each run's status is asked for every POLL_S, slower with many runs in flight, so that the
# dashboard sees at most about 1 / POLL_PER_RUN_S requests a second however many there are.
POLL_S = 0.2
POLL_PER_RUN_S = 0.05


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


class NodeList:
    """The cluster's nodes, read from the state API again once older than NODES_EVERY_S (or
    when asked `fresh`): both Ray backends place runs by it."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._lock = threading.Lock()
        self._nodes: list[pl.Node] = []
        self._at = 0.0

    def get(self, fresh: bool = False) -> list[pl.Node]:
        with self._lock:
            stale = fresh or time.monotonic() - self._at > NODES_EVERY_S
        if stale:
            found = list_nodes(self.address)
            with self._lock:
                self._nodes, self._at = found, time.monotonic()
        with self._lock:
            return list(self._nodes)


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
        self._node_list = NodeList(self.address)
        self._handles: dict[str, RayRunHandle] = {}
        self._streams: dict[str, Any] = {}  # run id -> the future of its log stream
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
        return self._node_list.get(fresh)

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
        payload = run_payload(self.spec, request, sid, token)
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
        handle = RayRunHandle(self, sid, token, request, node.node_id if node else None)
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
        handle = RayRunHandle(self, ref, token, request, node_id)
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
        """Follow the run's log: from its node's own file where the node is known, else through
        the Jobs API (whose copy may be another node's: see logs.py)."""
        handle.streamed_from = handle.node_id
        if handle.node_id:
            coro = self._tail_node(handle, handle.demux, handle.node_id)
        else:
            coro = self._tail(handle, handle.demux)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        with self._lock:
            self._streams[handle.sid] = future

    async def _tail_node(self, handle: RayRunHandle, demux: Demux, node_id: str) -> None:
        """The job's log as its node writes it, through the state API's log stream (the node's
        agent reads its own file every STREAM_EVERY_S), until the run ends."""
        import codecs

        import aiohttp

        query = urllib.parse.urlencode(
            {
                "node_id": node_id,
                "filename": f"job-driver-{handle.sid}.log",
                "lines": -1,
                "interval": STREAM_EVERY_S,
            }
        )
        url = f"{self.address.rstrip('/')}/api/v0/logs/stream?{query}"
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            async with aiohttp.ClientSession() as session, session.get(url) as resp:
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}: {one_line(await resp.text())}")
                async for data in resp.content.iter_any():
                    text = decoder.decode(data)
                    if text:
                        handle.feed(text, demux)
                    if handle.ended or demux is not handle.demux:
                        return
        except asyncio.CancelledError:
            return
        except Exception as exc:  # the watcher decides what a broken stream means
            handle.stream_closed(demux, one_line(exc))
            return
        handle.stream_closed(demux, None)

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
            poll_every = max(POLL_S, POLL_PER_RUN_S * len(handles))
            for h in handles:
                try:
                    h.check(by_id, poll_every)
                except Exception as exc:
                    h.note(f"tuiprof could not check {h.sid}: {one_line(exc)}")

    def unreadable(self, node_id: str, why: str) -> None:
        """A run's results could not be read from this node: place no new block there."""
        with self._lock:
            self.placement.avoid.add(node_id)

    def done(self, handle: RayRunHandle) -> None:
        with self._lock:
            self._handles.pop(handle.sid, None)
            self.placement.ended(handle.placed_on)
            stream = self._streams.pop(handle.sid, None)
        if stream is not None:
            stream.cancel()  # a node's log stream follows the file forever

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
