"""The Ray backend's actor mode (`mode = "actors"`): each run is a process started by a
long-lived agent on its node (agent.py), not a Ray job.

Why: a Ray job per run costs seconds (Ray starts a fresh Python driver that imports Ray for each
job); a warm agent per node starts a run as a plain subprocess and hands its log back as the
return values of actor calls, a path Ray guarantees. What jobs give is kept: the agents are
named, detached actors (`tuiprof-agent-<code version>-<node id>`, namespace `tuiprof`), so they
and their runs outlive tuiprof; `attach` asks every agent for a run id; `terminate` signals the
run's process group. The price: tuiprof joins the cluster (`ray.init` at the GCS address, the same
Ray and Python as the cluster), and Ray does not see the runs' CPUs and GPUs (the agent keeps
within its node's, for tuiprof's runs only: other Ray work on those nodes can collide).

Contract: `RayActorBackend.connect(spec)` checks the cluster as the job mode does (dashboard,
nodes, what fits), then connects to the GCS (`gcs_address`, default the head node's address at
port 6379). `launch` places a block on a node as the job mode does (placement.py), creates the
node's agent if it is not there yet, and submits the run to it. One follower thread per node
long-polls its agent (`poll`, which answers at once on news: new bytes, a state change, a new
run), feeds each run's log into its Demux (stream.py: output, metrics, artifacts, as in the job
mode) and ends a run when its whole log is in. An agent that dies (its node died, or it was
killed) ends its runs as `node lost`, which the runner retries elsewhere.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import logging
import math
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any

import ray
from ray.job_submission import JobSubmissionClient
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

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
from tui_prof.experiments.backends.ray import agent as agent_module
from tui_prof.experiments.backends.ray import node as node_module
from tui_prof.experiments.backends.ray import placement as pl
from tui_prof.experiments.backends.ray.agent import NodeAgent
from tui_prof.experiments.backends.ray.client import NodeList
from tui_prof.experiments.backends.ray.handle import environment_there, one_line, run_payload
from tui_prof.experiments.backends.ray.stream import Demux

NAMESPACE = "tuiprof"
GCS_PORT = 6379
WAIT_S = 1.0  # a poll waits this long for news
BATCH_S = 0.05  # after news, so that a chatty run is read in batches, not line by line
CALL_TIMEOUT_S = 120.0  # an agent's first call waits for Ray to start it (seconds, once)
NODES_EVERY_S = 2.0


def code_version() -> str:
    """Agents run the code they were started with: a changed wrapper or agent gets new ones."""
    h = hashlib.sha256()
    for module in (agent_module, node_module):
        h.update(Path(str(module.__file__)).read_bytes())
    return h.hexdigest()[:10]


class ActorRunHandle:
    """One run on a node's agent (see the module contract)."""

    pid: int | None = None
    pgid: int | None = None

    def __init__(
        self, backend: RayActorBackend, sid: str, token: str, request: LaunchRequest, node_id: str
    ) -> None:
        self.backend, self.sid, self.request, self.node_id = backend, sid, request, node_id
        self.demux = Demux(token, request.log_path, request.metrics_path, request.run_dir)
        self.offset = 0
        self.agent_state = QUEUED
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ended = threading.Event()
        self._outcome: RunOutcome | None = None
        self._since = time.monotonic()
        self._stopping = False

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def state(self) -> str:
        if self._ended.is_set():
            return ENDED
        return RUNNING if self.agent_state != QUEUED or self.demux.start else QUEUED

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._ended.wait(timeout):
            return None
        return self.outcome().exit_code

    def terminate(self, grace_s: float) -> None:
        """Ask the agent to stop the run, again while the call fails (a busy or restarting agent):
        a stop asked once and lost left tuiprof waiting for a run that never ends."""
        self._stopping = True
        deadline = time.monotonic() + max(120.0, 4 * grace_s)
        while not self._ended.is_set() and time.monotonic() < deadline:
            try:
                ray.get(self.backend.agent(self.node_id).stop.remote(self.sid, grace_s), timeout=30)
                return
            except Exception:  # Ray's errors (a timeout, a dead or restarting actor) vary
                self._ended.wait(1.0)

    def outcome(self) -> RunOutcome:
        return self._outcome or RunOutcome(-9, ran=False, error="still running")

    def node(self) -> str | None:
        n = self.backend.node(self.node_id)
        return n.name if n is not None else f"node/{self.node_id[:6]}"

    def environment(self) -> dict[str, Any] | None:
        return environment_there(self.demux.start, self.backend.node(self.node_id))

    # -- the follower's side -------------------------------------------------------------
    def update(self, news: dict[str, Any]) -> None:
        """What the agent said about this run in one poll."""
        if self._ended.is_set():
            return
        if news["state"] == "unknown":
            self._end(RunOutcome(-9, error=f"the agent on {self.node()} lost it", lost=True))
            return
        self.agent_state = news["state"]
        data: bytes = news["data"]
        self.offset += len(data)
        text = self._decoder.decode(data, final=bool(news["eof"]))
        if text:
            self.demux.feed(text)
        if self.demux.ended:
            self._end(self._from_records())
        elif news["eof"]:
            self._end(self._unfinished(news))
        elif self.agent_state == QUEUED:
            waited = time.monotonic() - self._since
            if waited > self.backend.spec.pending_timeout_s:
                self.terminate(0)
                self._end(
                    RunOutcome(
                        -9,
                        error=f"not placed on node {self.node()} after {waited:.0f} s "
                        "(pending_timeout_s): its CPUs or GPUs stayed busy",
                        ran=False,
                    )
                )

    def lost(self, why: str) -> None:
        ran = self.demux.start is not None
        when = "" if ran else " before the run started"
        line = f"node lost{when}: {self.node()} ({why})"
        self.note(line)
        self._end(RunOutcome(-9, error=line, lost=True, ran=ran))

    def note(self, line: str) -> None:
        with contextlib.suppress(OSError), open(self.request.log_path, "ab") as f:
            f.write(f"[tuiprof] {line}\n".encode())

    def _from_records(self) -> RunOutcome:
        return self.demux.outcome(self._stopping)

    def _unfinished(self, news: dict[str, Any]) -> RunOutcome:
        """The wrapper ended without its end record: stopped while queued, or it failed."""
        if news.get("stopped") and self.demux.start is None:
            return RunOutcome(-15, stopped=True, ran=False)
        if self.demux.exit is not None:
            self.note("the run's files were cut off before they all arrived")
            return self._from_records()
        said = self.demux.preamble[-1].strip()[:200] if self.demux.preamble else "no output"
        code = news.get("exit_code")
        return RunOutcome(
            code if isinstance(code, int) and code else 1,
            error=f"tuiprof's run wrapper on {self.node()} ended ({code}) without its records: "
            f"{said}",
            stopped=bool(news.get("stopped")),
            ran=self.demux.start is not None,
        )

    def _end(self, outcome: RunOutcome) -> None:
        if self._ended.is_set():
            return
        self.demux.close()
        for line in self.demux.problems:
            self.note(line)
        self._outcome = outcome
        self.backend.done(self)
        self._ended.set()


class RayActorBackend:
    """Runs on a long-lived agent per node (see the module contract)."""

    name = "ray"
    remote = True

    def __init__(self, spec: BackendSpec, address: str) -> None:
        self.spec, self.address = spec, address
        self.placement = pl.Placement(spec)
        self.version = code_version()
        self._lock = threading.Lock()
        self._node_list = NodeList(self.address)
        self._agents: dict[str, Any] = {}
        self._handles: dict[str, ActorRunHandle] = {}
        self._followers: dict[str, threading.Event] = {}
        self._closed = threading.Event()
        self._joined = False  # this backend called ray.init (and so leaves with ray.shutdown)
        self._env: dict[str, Any] = {
            "py_modules": [str(Path(tui_prof.__file__).parent)],
            "excludes": ["__pycache__", "*.pyc"],
        }

    @classmethod
    def connect(cls, spec: BackendSpec) -> RayActorBackend:
        address = spec.resolved_address()
        backend = cls(spec, address)
        try:
            nodes = backend.nodes(fresh=True)
        except Exception as exc:
            raise BackendError(
                f"the Ray cluster at {address} did not list its nodes: {one_line(exc)}"
            ) from None
        if not pl.eligible(nodes, spec):
            raise BackendError(
                f"the Ray cluster at {address} cannot run this experiment: "
                f"{pl.describe_missing(spec, nodes)}"
            )
        head = next((n for n in nodes if n.is_head and n.alive), None)
        gcs = spec.gcs_address or f"{head.node_ip if head else '127.0.0.1'}:{GCS_PORT}"
        host, _, port = gcs.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                pass
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"the actor mode needs the cluster's GCS, and nothing answers at {gcs} "
                f"({getattr(exc, 'strerror', None) or exc}): give [backend] gcs_address"
            ) from None
        # Ray's notes would cut into tuiprof's output or the TUI's screen (from the TUI's worker
        # thread, ray.init warns that it set no SIGTERM handler: tuiprof keeps its own anyway).
        for name in ("ray", "ray._private.worker"):
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            if not ray.is_initialized():  # else this process joined already (a notebook)
                ray.init(
                    address=gcs,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
                backend._joined = True
            # tuiprof itself goes to the cluster once, as a package the agents' runtime_env names
            # (Ray takes local directories only in ray.init's; the Jobs client uploads them).
            JobSubmissionClient(address)._upload_py_modules_if_needed(backend._env)
        except Exception as exc:
            backend.close()
            raise BackendError(
                f"could not join the Ray cluster at {gcs}: {one_line(exc)}"
            ) from None
        return backend

    # -- the cluster ---------------------------------------------------------------------
    def nodes(self, fresh: bool = False) -> list[pl.Node]:
        return self._node_list.get(fresh)

    def node(self, node_id: str | None) -> pl.Node | None:
        for n in self.nodes() if node_id else ():
            if n.node_id == node_id:
                return n
        return None

    def capacity(self) -> int:
        return max(1, pl.capacity(self.nodes(), self.spec))

    def reference(self, request: LaunchRequest) -> str:
        return f"tuiprof-{request.experiment_id}-{request.run_id}-a{request.attempt}"

    def agent_name(self, node_id: str) -> str:
        return f"tuiprof-agent-{self.version}-{node_id}"

    def agent(self, node_id: str, node: pl.Node | None = None) -> Any:
        """The node's agent, started there if it is not running yet."""
        with self._lock:
            if node_id in self._agents:
                return self._agents[node_id]
        node = node or self.node(node_id)
        res = node.resources if node is not None else {}
        gpu_ids = [str(i) for i in range(int(res.get("GPU", 0)))]
        actor = (
            ray.remote(NodeAgent)
            .options(
                name=self.agent_name(node_id),
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                max_concurrency=64,
                max_restarts=0,
                runtime_env=self._env,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            )
            .remote(node_id, float(res.get("CPU", 1)), gpu_ids)
        )
        with self._lock:
            return self._agents.setdefault(node_id, actor)

    # -- runs ----------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> ActorRunHandle:
        if self.spec.upload_workdir:
            raise OSError('upload_workdir needs mode = "jobs" (an agent has no working_dir)')
        sid = self.reference(request)
        nodes = self.nodes()
        with self._lock:
            node = self.placement.choose(request.block, nodes)
            if node is None:  # spread: the eligible node with the most free slots
                fit = pl.eligible(nodes, self.spec)
                if not fit:
                    raise OSError(f"no node can run it: {pl.describe_missing(self.spec, nodes)}")
                node = max(
                    fit, key=lambda n: pl.slots(n, self.spec) - self.placement.in_flight[n.node_id]
                )
            self.placement.submitted(node.node_id)
        payload = run_payload(self.spec, request, sid, secrets.token_hex(8))
        try:
            token = ray.get(
                self.agent(node.node_id, node).submit.remote(
                    sid,
                    payload,
                    self.spec.python,
                    self.spec.cpus_per_run,
                    math.ceil(self.spec.gpus_per_run),
                ),
                timeout=CALL_TIMEOUT_S,
            )
        except Exception as exc:
            with self._lock:
                self.placement.ended(node.node_id)
            raise OSError(
                f"the agent on {node.name} did not take the run: {one_line(exc)}"
            ) from None
        handle = ActorRunHandle(self, sid, str(token), request, node.node_id)
        self._follow(handle)
        return handle

    def attach(self, ref: str, request: LaunchRequest) -> ActorRunHandle | None:
        prefix = f"tuiprof-agent-{self.version}-"
        names = [
            a["name"]
            for a in ray.util.list_named_actors(all_namespaces=True)
            if a.get("namespace") == NAMESPACE and str(a.get("name", "")).startswith(prefix)
        ]
        asked: dict[str, Any] = {}
        for name in names:
            with contextlib.suppress(Exception):
                asked[name[len(prefix) :]] = ray.get_actor(name, namespace=NAMESPACE).known.remote()
        for node_id, call in asked.items():
            try:
                known = ray.get(call, timeout=CALL_TIMEOUT_S)
            except Exception:
                continue  # that agent is gone: its runs are lost with it
            if ref not in known:
                continue
            with self._lock:
                self.placement.pin(request.block, node_id)
                self.placement.submitted(node_id)
            for path in (request.log_path, request.metrics_path):  # read again from the start
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"")
            handle = ActorRunHandle(self, ref, known[ref], request, node_id)
            self._follow(handle)
            return handle
        return None

    def _follow(self, handle: ActorRunHandle) -> None:
        with self._lock:
            self._handles[handle.sid] = handle
            wake = self._followers.get(handle.node_id)
            if wake is None:
                wake = self._followers[handle.node_id] = threading.Event()
                threading.Thread(
                    target=self._follower,
                    args=(handle.node_id, wake),
                    name=f"tuiprof-ray-agent-{handle.node_id[:6]}",
                    daemon=True,
                ).start()
        wake.set()

    def _follower(self, node_id: str, wake: threading.Event) -> None:
        """Long-polls one node's agent for its runs' news (see the module contract)."""
        while not self._closed.is_set():
            with self._lock:
                mine = [h for h in self._handles.values() if h.node_id == node_id]
            if not mine:
                wake.wait(1.0)
                wake.clear()
                continue
            seen = {h.sid: (h.offset, h.agent_state) for h in mine}
            try:
                news = ray.get(
                    self.agent(node_id).poll.remote(seen, WAIT_S), timeout=CALL_TIMEOUT_S
                )
            except Exception as exc:
                self._agent_gone(node_id, mine, exc)
                continue
            for h in mine:
                if h.sid in news:
                    h.update(news[h.sid])
            if any(n["data"] for n in news.values()):
                time.sleep(BATCH_S)

    def _agent_gone(self, node_id: str, handles: list[ActorRunHandle], exc: Exception) -> None:
        if self._closed.is_set():
            return
        node = None
        with contextlib.suppress(Exception):
            node = next((n for n in self.nodes(fresh=True) if n.node_id == node_id), None)
        if isinstance(exc, ray.exceptions.GetTimeoutError) and node is not None and node.alive:
            return  # a slow answer, not a dead agent: ask again
        why = (node.message if node is not None and not node.alive else "") or (
            f"its tuiprof agent died: {one_line(exc)}"
        )
        with self._lock:
            self._agents.pop(node_id, None)
            self.placement.avoid.add(node_id)  # no new block there (Ray may not know it dead yet)
        for h in handles:
            h.lost(why)

    def done(self, handle: ActorRunHandle) -> None:
        with self._lock:
            self._handles.pop(handle.sid, None)
            self.placement.ended(handle.node_id)

    def close(self) -> None:
        """Let go of the cluster; the agents and their runs go on (`--resume` reattaches)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._joined:
            with contextlib.suppress(Exception):
                ray.shutdown()
