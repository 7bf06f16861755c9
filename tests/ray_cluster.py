"""A real multi-node Ray cluster on loopback, for tests and benchmarks, inside a network namespace.

Ray listens on every interface and probes outside addresses, so a cluster is only ever started
inside a network namespace of its own (`in_namespace` re-runs a script there with loopback up):
nothing leaves loopback. Each node is `ray start --block` in a session of its own, started
here, made like a machine of its own: its own address (the head 127.0.0.1, workers 127.0.0.2,
127.0.0.3, ...), its own temp dir (its logs, as on a separate disk) and its own ports (one
network namespace is one port space; real machines each have theirs). Custom resources stand in
for GPU models (`accelerator_type:A100`, which is what Ray gives a node with that GPU). The
head runs nothing (`head_cpus = 0`, as a dedicated head) or jobs too (Ray's default).
`agent_port` gives a worker the head's dashboard agent port, as two default `ray start`s on one
machine do: its agent's HTTP server cannot bind, so the dashboard cannot serve its job logs. A node is removed by killing the processes it started (its
process tree, found from the pid we started); the whole cluster is stopped by killing every
process in the namespace, which holds only what this script started. Never `ray stop`, never
anything by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GCS_PORT = 6391
DASHBOARD_PORT = 8275
ADDRESS = f"127.0.0.1:{DASHBOARD_PORT}"
# Fast failure detection, so a removed node is declared dead in seconds, not half a minute.
HEAD_ENV = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "0",
}


def in_namespace(
    prefix: list[str], argv: Sequence[str], **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run argv in a new network namespace with loopback up; everything it leaves is killed."""
    script = 'ip link set lo up && exec "$@"'
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*prefix, "sh", "-c", script, "sh", *argv], text=True, capture_output=True, **kwargs
    )


def _ray() -> str:
    exe = shutil.which(
        "ray", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )
    if exe is None:
        raise RuntimeError("the `ray` command is not installed")
    return exe


# An optional import that costs each Ray process about a second of CPU (jsonschema's format
# checker builds a grammar on import; Ray's runtime-env schema check pulls it in): on a loaded
# 2-core machine, a node's dozen processes then take minutes to start. The nodes' processes find
# a module of that name that raises ImportError, as where it is not installed (jsonschema skips
# the format then; benchmarks/README.md section 7 measured it).
SLOW_OPTIONAL_IMPORTS = ("rfc3987_syntax",)


def _node_env(shim: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if shim is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # Jobs' `python3` is this interpreter (its site-packages has Ray and tuiprof's dependencies).
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("RAY_ADDRESS", None)
    # A loaded machine starts a raylet slower than Ray's default 60 s wait for its registration.
    env.setdefault("RAY_raylet_start_wait_time_s", "180")
    env.setdefault("RAY_agent_register_timeout_ms", "180000")
    return env


class Cluster:
    """A head plus workers, each like a machine of its own; see the module docstring."""

    def __init__(
        self,
        gcs_port: int = GCS_PORT,
        dashboard_port: int = DASHBOARD_PORT,
        port_base: int = 24400,  # below the kernel's and Ray's own random ports (32768+)
        hide_slow_imports: bool = True,
    ) -> None:
        if [name for _, name in socket.if_nameindex()] != ["lo"]:
            raise RuntimeError("refusing to start Ray outside a private network namespace")
        self.temp = Path(tempfile.mkdtemp(prefix="trc", dir="/tmp"))  # short: unix socket paths
        self.shim = self.temp / "shim"
        self.shim.mkdir()
        for name in SLOW_OPTIONAL_IMPORTS if hide_slow_imports else ():
            (self.shim / f"{name}.py").write_text(f"raise ImportError('{name}: not here')\n")
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self.ips: dict[str, str] = {}
        self.agent_ports: dict[str, int] = {}  # node -> its dashboard agent's HTTP port
        self.gcs_port, self.dashboard_port = gcs_port, dashboard_port
        self.address = f"127.0.0.1:{dashboard_port}"
        self._port = port_base
        self._how: dict[str, tuple[list[str], dict[str, str] | None, int | None]] = {}
        self._restarts: dict[str, int] = {}

    def _start(
        self,
        name: str,
        args: list[str],
        extra_env: dict[str, str] | None = None,
        agent_port: int | None = None,
    ) -> None:
        self._how[name] = (args, extra_env, agent_port)
        self._port += 10
        p = self._port
        ip = self.ips.setdefault(name, f"127.0.0.{len(self.ips) + 1}")
        self.agent_ports[name] = agent_port or p
        ports = [
            "--dashboard-agent-listen-port", str(agent_port or p),
            "--dashboard-agent-grpc-port", str(p + 1),
            "--runtime-env-agent-port", str(p + 2),
            "--metrics-export-port", str(p + 3),
        ]  # fmt: skip
        temp = self.temp / name
        temp.mkdir(exist_ok=True)
        log = open(self.temp / f"{name}.out", "ab")  # noqa: SIM115 - the node's life
        self.nodes[name] = subprocess.Popen(
            [
                _ray(),
                "start",
                "--block",
                "--node-ip-address",
                ip,
                "--temp-dir",
                str(temp),
                "--disable-usage-stats",
                "--object-store-memory",
                "80000000",
                "--node-name",
                name,
                *ports,
                *args,
            ],
            env={**_node_env(self.shim), **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_head(self, cpus: int = 0) -> None:
        """The head: no CPUs (runs nothing but Ray's own processes) or `cpus` (runs jobs too)."""
        self._start(
            "head",
            [
                "--head",
                "--port",
                str(self.gcs_port),
                "--dashboard-host",
                "127.0.0.1",
                "--dashboard-port",
                str(self.dashboard_port),
                "--include-dashboard",
                "true",
                "--num-cpus",
                str(cpus),
                "--num-gpus",
                "0",
            ],
            HEAD_ENV,
        )

    def add_worker(
        self,
        name: str,
        gpu_model: str | None = None,
        cpus: int = 1,
        agent_port: int | None = None,
    ) -> None:
        """A worker at the next 127.0.0.x; `agent_port`: its dashboard agent's (see the module)."""
        resources = {f"accelerator_type:{gpu_model}": 1} if gpu_model else {}
        self._start(
            name,
            [
                "--address",
                f"127.0.0.1:{self.gcs_port}",
                "--num-cpus",
                str(cpus),
                "--num-gpus",
                "0",
                "--resources",
                json.dumps(resources),
            ],
            agent_port=agent_port,
        )

    def wait_for(self, names: Sequence[str], timeout_s: float = 600.0) -> dict[str, str]:
        """Until these nodes are alive, their agents serving: name -> Ray node id."""
        from ray.util.state import list_nodes

        deadline = time.monotonic() + timeout_s
        while True:
            for name, proc in list(self.nodes.items()):
                if proc.poll() is not None and name in names:
                    text = (self.temp / f"{name}.out").read_text()
                    # Ray waits a fixed 30 s for a new raylet to register: on a loaded machine
                    # that can pass. Start the node again (new ports), at most twice.
                    # Or it gave up on the GCS after 60 s of a starved machine (the head lives:
                    # the restart finds it, or fails the same way and says so).
                    starved = (
                        "timed out during startup" in text or "Failed to connect to GCS" in text
                    )
                    if starved and self._restarts.get(name, 0) < 2:
                        self._restarts[name] = self._restarts.get(name, 0) + 1
                        self.kill_node(name)
                        self._start(name, *self._how[name])
                        continue
                    raise RuntimeError(f"node {name} exited: {text[-2000:]}")
            with contextlib.suppress(Exception):
                alive = {
                    n.node_name: n.node_id
                    for n in list_nodes(
                        address=f"http://{self.address}", raise_on_missing_output=False
                    )
                    if n.state == "ALIVE"
                }
                if all(n in alive for n in names):
                    ids = {n: alive[n] for n in names}
                    if all(self._agent_serves(n, ids[n]) for n in names):
                        return ids
            if time.monotonic() > deadline:
                tails = {n: (self.temp / f"{n}.out").read_text()[-600:] for n in names}
                raise RuntimeError(f"nodes {list(names)} not up after {timeout_s:.0f} s: {tails}")
            time.sleep(0.5)

    def _agent_serves(self, name: str, node_id: str) -> bool:
        """Whether the node's dashboard agent has registered (the state API reaches it), as on a
        machine that has been up a while; a node given a clashing `agent_port` never does, and
        is not waited for. An agent whose HTTP server could not bind its port (taken by some
        other socket in this one port space: what real machines, each with its own, do not
        share) makes the node start again on new ports, as a starved raylet does."""
        if self._how[name][2] is not None:
            return True
        logs = self.temp / name / "session_latest" / "logs" / "dashboard_agent.log"
        if logs.exists() and "Failed to start HTTP server" in logs.read_text(errors="replace"):
            if self._restarts.get(name, 0) >= 2:
                raise RuntimeError(f"node {name}: its agent's HTTP server failed three times")
            self._restarts[name] = self._restarts.get(name, 0) + 1
            self.kill_node(name)
            shutil.rmtree(self.temp / name, ignore_errors=True)
            self._start(name, *self._how[name])
            return False
        query = urllib.parse.urlencode({"node_id": node_id, "glob": "raylet.out"})
        try:  # what `ray logs` asks: HTTP 200 once the node's agent is registered
            with urllib.request.urlopen(f"http://{self.address}/api/v0/logs?{query}", timeout=30):
                return True
        except (OSError, ValueError):
            return False

    def kill_node(self, name: str) -> None:
        """Remove a node the hard way: SIGKILL to every process it started (its process tree)."""
        proc = self.nodes.pop(name)
        for pid in [proc.pid, *_descendants(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # what outlived `ray start` in its session
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        """Kill every process of this network namespace but this one and its ancestors."""
        keep = {os.getpid(), *_ancestors(os.getpid())}
        mine = os.readlink("/proc/self/ns/net")
        for _ in range(3):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) in keep:
                    continue
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry.name}/ns/net") == mine:
                        os.kill(int(entry.name), signal.SIGKILL)
            time.sleep(0.2)
        for proc in self.nodes.values():
            with contextlib.suppress(Exception):
                proc.wait(5)
        shutil.rmtree(self.temp, ignore_errors=True)


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
        out.append(pid)
    return out
