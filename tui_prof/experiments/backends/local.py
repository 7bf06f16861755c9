"""The local backend: each run is a child process in its own process group (and session).

Why a session of its own: a timeout or a stop must reach every process the job started
(data-loader workers, shell pipelines), so signals go to the group; and a Ctrl+C in the
terminal reaches tuiprof, which decides what to do, not the jobs directly. The job writes its
output straight to the log file, not through a pipe to tuiprof, so a run survives tuiprof's
death and is never slowed by a reader that falls behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Any

from tui_prof.experiments.backends import ENDED, RUNNING, LaunchRequest, RunOutcome


class LocalRunHandle:
    """A child process; a waiter thread reaps it the moment it exits."""

    def __init__(self, proc: subprocess.Popen[bytes], t_start: float) -> None:
        self.proc = proc
        self.t_start = t_start  # perf_counter just before the process was created
        self.t_end: float | None = None  # ... and just after it was reaped
        self.cpu_time_s: float | None = None  # its CPU time and its waited-for children's
        self.pid: int | None = proc.pid
        self.pgid: int | None = proc.pid  # start_new_session makes the child its group's leader
        self._done = threading.Event()
        self._code: int | None = None
        threading.Thread(target=self._reap, name=f"tuiprof-wait-{proc.pid}", daemon=True).start()

    def _reap(self) -> None:
        try:  # wait4: the exit status and the CPU time the run used (noise.py weighs the rest)
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_time_s = usage.ru_utime + usage.ru_stime
        except ChildProcessError:  # reaped elsewhere
            self.proc.wait()
        self._code = self.proc.returncode
        self.t_end = time.perf_counter()
        self._done.set()

    def wait(self, timeout: float | None = None) -> int | None:
        self._done.wait(timeout)
        return self._code if self._done.is_set() else None

    def state(self) -> str:
        return ENDED if self._done.is_set() else RUNNING

    def outcome(self) -> RunOutcome:
        """The exit code and the process's own lifetime (from just before it was created)."""
        code = self._code if self._code is not None else -signal.SIGKILL
        wall = self.t_end - self.t_start if self.t_end is not None else None
        return RunOutcome(code, wall)

    def node(self) -> str | None:
        return None

    def environment(self) -> dict[str, Any] | None:
        return None

    def _signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.pgid, sig)  # type: ignore[arg-type]
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def terminate(self, grace_s: float) -> None:
        if not self._signal_group(signal.SIGTERM):
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if self._done.is_set() and not self._group_alive():
                return
            time.sleep(0.05)
        self._signal_group(signal.SIGKILL)
        self._done.wait(5)

    def kill_leftovers(self) -> None:
        """After the main process exits, kill what it left behind in its group."""
        if self._group_alive():
            self._signal_group(signal.SIGKILL)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)  # type: ignore[arg-type]
        except (ProcessLookupError, PermissionError):
            return False
        return True


class LocalBackend:
    """Runs jobs as local child processes."""

    name = "local"
    remote = False

    def capacity(self) -> int:
        return 1  # timings are only comparable one at a time on one machine

    def reference(self, request: LaunchRequest) -> str | None:
        return None  # a local run dies with its machine; there is nothing to reattach

    def attach(self, ref: str, request: LaunchRequest) -> LocalRunHandle | None:
        return None

    def close(self) -> None:
        pass

    def launch(self, request: LaunchRequest) -> LocalRunHandle:
        request.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = os.environ.copy()
        env.update(request.env)
        with open(request.log_path, "ab", buffering=0) as log:
            t_start = time.perf_counter()
            proc = subprocess.Popen(
                list(request.argv),
                cwd=request.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        return LocalRunHandle(proc, t_start)
