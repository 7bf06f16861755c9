"""Process control for experiments: who the runner is, whether a runner recorded in a store is
still alive, and killing a run's process group that outlived its runner.

Why apart from the store: these ask the kernel (/proc, signals), not SQLite; the store records
what they answer. Linux /proc gives a process's start time (a recycled pid is not the runner) and
its environment (a recycled process group id is not the run).
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path


def _proc_start(pid: int) -> str | None:
    """The kernel's start time of a process, so a recycled pid is not mistaken for the runner."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def runner_identity() -> tuple[int, str, str]:
    pid = os.getpid()
    return pid, socket.gethostname(), _proc_start(pid) or ""


def runner_alive(pid: int | None, host: str | None, start: str | None) -> bool:
    """Whether the process that wrote "running" still runs (unknowable on another host: assume yes)."""
    if pid is None:
        return False
    if host and host != socket.gethostname():
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _proc_start(pid)
    return not (start and now is not None and now != start)


def kill_orphan(pgid: int | None, run_dir: Path) -> bool:
    """Kill a run's process group that outlived its runner, if it still runs this very run."""
    if not pgid:
        return False
    try:
        with open(f"/proc/{pgid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return False
    if f"TUIPROF_RUN_DIR={run_dir}".encode() not in env:
        return False  # the process group id now belongs to something else
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        return False
    return True
