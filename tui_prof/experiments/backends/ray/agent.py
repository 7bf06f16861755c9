"""The long-lived worker on each Ray node of the actor mode: it runs tuiprof's run wrapper
(node.py) as a real subprocess per run and keeps its log until tuiprof has collected it.

Why: a Ray job per run pays Ray's start of a new Python driver (seconds); a named, detached actor
per node, started once, starts each run as a plain process (a fraction of a second), as Ray
Tune's trial workers do. The actor is detached, so it and its runs outlive the tuiprof that
started them; tuiprof finds it again by its name.

Contract (stdlib only; actors.py makes it a Ray actor, threaded, so a long `poll` never holds
up `submit` or `stop`):
- `submit(sid, payload, python, cpus, gpus)` queues a run under tuiprof's id for it and returns
  the token of its records (idempotent: a known id is left as it is, its first token returned),
  and starts it, first come first served, as soon as the node's CPUs (`cpus` counted against the
  node's total) and `gpus` of its GPU ids are free; the ids go to CUDA_VISIBLE_DEVICES. Ray does
  not see these runs: the agent keeps tuiprof's runs within the node's CPUs and GPUs.
- The run is `python -m ...node` in a session (process group) of its own, its stdout and
  stderr to a file on the node: the wrapper's records (stream.py reads them) and the job's output.
- `poll({sid: (offset, state)}, wait_s)` returns, per known id, its state (queued, running, ended), the
  log's bytes from `offset` (at most MAX_READ), the wrapper's exit code once it ended and
  whether the log has been read to its end; it waits up to `wait_s` for something new (bytes,
  or a state other than the caller's),
  so a follower sees an end within POLL_S without asking more often.
- `stop(sid, grace_s)`: a queued run is dropped, a running one gets SIGTERM in its process
  group, then SIGKILL after `grace_s` (as Ray's `stop_job` does).
- A run's log is deleted KEEP_S after its end was read (a tuiprof killed meanwhile finds it
  still); `known()` maps each id held to its token.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import tui_prof
from tui_prof.experiments.backends.ray.node import PAYLOAD_VAR

ENTRY_MODULE = "tui_prof.experiments.backends.ray.node"
QUEUED, RUNNING, ENDED = "queued", "running", "ended"
KEEP_S = 3600.0
MAX_READ = 4 << 20  # bytes of a log per poll: a run's artifacts come in several polls
POLL_S = 0.02
# Ray's settings for its own workers, which a run must not inherit.
_NOT_PASSED = ("CUDA_VISIBLE_DEVICES", "RAY_JOB_ID", "RAY_RAYLET_PID", "RAY_CLIENT_MODE")


class _Run:
    def __init__(
        self, sid: str, payload: dict[str, Any], python: str, cpus: float, gpus: int, log: Path
    ) -> None:
        self.sid, self.payload, self.python, self.log = sid, payload, python, log
        self.cpus, self.gpus = cpus, gpus
        self.read_out_at: float | None = None  # when its end was read
        self.state = QUEUED
        self.proc: subprocess.Popen[bytes] | None = None
        self.gpu_ids: list[str] = []
        self.exit_code: int | None = None
        self.stopped = False


class NodeAgent:
    """One node's runs (see the module contract)."""

    def __init__(self, node_id: str, cpus: float, gpu_ids: list[str]) -> None:
        self.node_id, self.cpus = node_id, cpus
        self.free_gpus = list(gpu_ids)
        self.generation = 0  # bumped by each submit: a waiting poll answers at once
        self.dir = Path(tempfile.gettempdir()) / f"tuiprof-agent-{node_id[:16]}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.runs: dict[str, _Run] = {}
        self.waiting: deque[str] = deque()
        self.changed = threading.Condition()
        self.pythonpath = str(Path(tui_prof.__file__).resolve().parents[1])

    # -- tuiprof's calls -----------------------------------------------------------------
    def node(self) -> str:
        return self.node_id

    def known(self) -> dict[str, str]:
        with self.changed:
            return {sid: str(r.payload.get("token")) for sid, r in self.runs.items()}

    def submit(
        self, sid: str, payload: dict[str, Any], python: str, cpus: float = 1.0, gpus: int = 0
    ) -> str:
        with self.changed:
            run = self.runs.get(sid)
            if run is None:
                log = self.dir / f"{sid}.log"
                run = self.runs[sid] = _Run(sid, payload, python, cpus, gpus, log)
                self.waiting.append(sid)
                self.generation += 1
                self._schedule()
            return str(run.payload.get("token"))

    def poll(
        self, seen: dict[str, tuple[int, str]], wait_s: float = 0.0
    ) -> dict[str, dict[str, Any]]:
        """Per id the caller follows (`seen`: the log offset and state it has), what is new."""
        deadline = time.monotonic() + wait_s
        generation = self.generation
        while True:
            with self.changed:
                self._schedule()
                out = {sid: self._read(sid, off) for sid, (off, _) in seen.items()}
            news = generation != self.generation or any(
                r["state"] != seen[sid][1] or r["data"] for sid, r in out.items()
            )
            if news or time.monotonic() >= deadline:
                return out
            time.sleep(POLL_S)

    def stop(self, sid: str, grace_s: float = 5.0) -> None:
        with self.changed:
            run = self.runs.get(sid)
            if run is None or run.state == ENDED:
                return
            run.stopped = True
            if run.state == QUEUED:
                with contextlib.suppress(ValueError):
                    self.waiting.remove(sid)
                run.state, run.exit_code = ENDED, -signal.SIGTERM
                return
            proc = run.proc
        if proc is not None:
            _killpg(proc.pid, signal.SIGTERM)
            threading.Timer(grace_s, _killpg, (proc.pid, signal.SIGKILL)).start()

    # -- inside ---------------------------------------------------------------------------
    def _read(self, sid: str, offset: int) -> dict[str, Any]:
        run = self.runs.get(sid)
        if run is None:
            return {"state": "unknown", "data": b"", "eof": True, "exit_code": None}
        data = b""
        size = 0
        with contextlib.suppress(OSError), open(run.log, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(MAX_READ)
        eof = run.state == ENDED and offset + len(data) >= size
        if eof and run.read_out_at is None:
            run.read_out_at = time.monotonic()
        return {
            "state": run.state,
            "data": data,
            "eof": eof,
            "exit_code": run.exit_code,
            "stopped": run.stopped,
        }

    def _schedule(self) -> None:
        """Reap ended runs, start queued ones that fit, drop old logs (the caller holds the lock)."""
        now = time.monotonic()
        for run in list(self.runs.values()):
            if run.state == RUNNING and run.proc is not None and run.proc.poll() is not None:
                run.state, run.exit_code = ENDED, run.proc.returncode
                self.free_gpus += run.gpu_ids
                run.gpu_ids = []
            if run.read_out_at is not None and now - run.read_out_at > KEEP_S:
                del self.runs[run.sid]
                with contextlib.suppress(OSError):
                    run.log.unlink()
        used = sum(r.cpus for r in self.runs.values() if r.state == RUNNING)
        while self.waiting:
            run = self.runs[self.waiting[0]]
            busy = any(r.state == RUNNING for r in self.runs.values())
            if busy and (used + run.cpus > self.cpus + 1e-9 or run.gpus > len(self.free_gpus)):
                break  # first come, first served: a big run is not overtaken forever
            self.waiting.popleft()
            run.gpu_ids, self.free_gpus = self.free_gpus[: run.gpus], self.free_gpus[run.gpus :]
            self._start(run)
            used += run.cpus if run.state == RUNNING else 0

    def _start(self, run: _Run) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
        env[PAYLOAD_VAR] = json.dumps(run.payload)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (self.pythonpath, os.environ.get("PYTHONPATH")) if p
        )
        if run.gpu_ids:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(run.gpu_ids)
        try:
            with open(run.log, "wb") as log:
                run.proc = subprocess.Popen(
                    [run.python, "-m", ENTRY_MODULE],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
            run.state = RUNNING
        except OSError as exc:
            with contextlib.suppress(OSError), open(run.log, "ab") as log:
                log.write(f"could not start {run.python!r}: {exc.strerror or exc}\n".encode())
            run.state, run.exit_code = ENDED, 127
            self.free_gpus += run.gpu_ids
            run.gpu_ids = []


def _killpg(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)
