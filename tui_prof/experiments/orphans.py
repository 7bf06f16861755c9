"""A local run's processes after its tuiprof has gone: found, identified and stopped before the run
starts again, so two copies of one run never live at once or write the same files.

Contract: `find_run_processes(run_dirs)` maps each run directory to the live processes of that run:
every process (on this machine, of this user) whose environment names it as `TUIPROF_RUN_DIR`
(set by the runner for the job and inherited by everything the job starts, even processes that
left its process group or whose group leader exited). `recorded_alive(pid, start)` says whether
the process recorded for a run (pid and the kernel's start time, so a recycled pid is not
mistaken for it) still runs. `stop_processes(pids, grace_s)` sends SIGTERM to each process and its
group, SIGKILL after the grace time, and waits until none is left; it returns those it could not
stop (the caller must then refuse to start the run again). `runner_identity()` and
`runner_alive(pid, host, start)` do the same for the tuiprof that runs an experiment, as the store
records it. All of it asks the kernel (/proc, signals), not SQLite: the store records the answers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterable
from pathlib import Path

RUN_DIR_VAR = b"TUIPROF_RUN_DIR="
KILL_WAIT_S = (
    10.0  # after SIGKILL: a process in uninterruptible I/O (a GPU driver) may take a while
)


def proc_start(pid: int) -> str | None:
    """The kernel's start time of a process (clock ticks since boot), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: its parent, init, just has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def recorded_alive(pid: int | None, start: str | None) -> bool:
    """Whether the process recorded for a run still runs: same pid and same start time."""
    if not pid or not start:
        return False
    return proc_start(pid) == start and _alive(pid)


def find_run_processes(run_dirs: Iterable[str | Path]) -> dict[str, list[int]]:
    """Run directory -> pids of the live processes whose environment names it (this user's only)."""
    wanted = {RUN_DIR_VAR + os.fsencode(str(d)): str(d) for d in run_dirs}
    found: dict[str, list[int]] = {}
    if not wanted:
        return found
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or another user's
            continue
        if RUN_DIR_VAR not in env:
            continue
        for var in env.split(b"\0"):
            run_dir = wanted.get(var)
            if run_dir is not None and _alive(int(entry)):
                found.setdefault(run_dir, []).append(int(entry))
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(os.getpgid(pid), sig)  # what it started in its group too
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def stop_processes(pids: Iterable[int], grace_s: float = 5.0) -> list[int]:
    """SIGTERM, SIGKILL after grace_s, and wait until they are gone; returns those still alive."""
    live = [p for p in pids if _alive(p)]
    for pid in live:
        _signal(pid, signal.SIGTERM)
    for sig, wait_s in ((signal.SIGKILL, grace_s), (None, KILL_WAIT_S)):
        deadline = time.monotonic() + wait_s
        while live and time.monotonic() < deadline:
            time.sleep(0.05)
            live = [p for p in live if _alive(p)]
        if sig is not None:
            for pid in live:
                _signal(pid, sig)
    return live


def runner_identity() -> tuple[int, str, str]:
    pid = os.getpid()
    return pid, socket.gethostname(), proc_start(pid) or ""


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
    now = proc_start(pid)
    return not (start and now is not None and now != start)
