"""The Ray backend: each run is a Ray job (Jobs API), or with `mode = "actors"` a process that a
long-lived agent per node starts; either way runs outlive tuiprof.

    client.py     RayBackend: connect, submit, reattach, the log streams and the watcher (imports ray)
    actors.py     RayActorBackend: the agents, submit, reattach, a long-poll per node (imports ray)
    agent.py      the agent on each node: runs as subprocesses, their logs kept (stdlib only)
    handle.py     one run: its state, its end when Ray says the job is over, its stop
    logs.py       a finished job's whole log, from the Jobs API or the node's own log file
    placement.py  which nodes fit a run, blocks of runs pinned to one node (pure)
    stream.py     a run's job log back into its output, metrics and files (pure)
    node.py       the wrapper each job runs on its node (stdlib only; shipped as py_modules)

Only client.py and actors.py import ray, and only when the backend is chosen (`connect`).
"""

from __future__ import annotations

import socket
import urllib.parse
from typing import TYPE_CHECKING

from tui_prof.experiments.backends import BackendError

if TYPE_CHECKING:
    from tui_prof.experiments.backend_spec import BackendSpec
    from tui_prof.experiments.backends.ray.actors import RayActorBackend
    from tui_prof.experiments.backends.ray.client import RayBackend


def connect(spec: BackendSpec) -> RayBackend | RayActorBackend:
    """A backend connected to the spec's cluster; BackendError (one line) if it is not there,
    Ray is not installed, or no node can run what the spec asks for."""
    reachable(spec.resolved_address())  # before importing Ray: a wrong address costs no seconds
    try:
        from tui_prof.experiments.backends.ray.client import RayBackend

        if spec.mode == "actors":
            from tui_prof.experiments.backends.ray.actors import RayActorBackend
    except ImportError as exc:
        raise BackendError(
            f"the ray backend needs Ray on this machine ({exc.msg}): pip install 'tuiprof[ray]'"
        ) from None
    if spec.mode == "actors":
        return RayActorBackend.connect(spec)
    return RayBackend.connect(spec)


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """BackendError (one line) unless something listens at the dashboard address."""
    try:
        url = urllib.parse.urlsplit(address)
        host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)
    except ValueError as exc:
        raise BackendError(f"not a Ray dashboard address: {address!r} ({exc})") from None
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise BackendError(
            f"no Ray cluster at {address} ({why}): start one (`ray start --head`) or give its "
            "dashboard address (--ray-address HOST:PORT, [backend] address, or RAY_ADDRESS)"
        ) from None
