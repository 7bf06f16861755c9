"""A helper process made by forking this one, where that is safe, instead of starting Python anew.

A fresh interpreter costs ~35 ms of CPU before it runs a line (more with `site`'s `.pth` files),
and the first screen and `tuiprof summary` wait for two of them (the analysis child and the
converter's process). A fork costs ~1 ms and starts with the modules already imported. It is
only safe while this process runs one thread (a fork copies no other thread, and a lock one
held stays locked in the child), and only on Linux (macOS's system libraries do not support a
fork without exec); elsewhere `start` runs the same code in a fresh `python -m MODULE`.

Contract: `start(main, argv, ...)` returns a `Child` with Popen's `pid`, `stdin`, `stdout`,
`poll`, `wait`, `kill`; in a forked child `main()` runs with stdin and stdout the pipes (where
asked), stderr /dev/null and every other inherited descriptor closed, and its return is the
exit status (an exception: 1). The child never runs this process's atexit handlers nor flushes
its buffers (`os._exit`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Protocol


class Child(Protocol):
    """What callers use of a child: `subprocess.Popen[bytes]` is one, `_Forked` another."""

    @property
    def pid(self) -> int: ...
    @property
    def stdin(self) -> IO[bytes] | None: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


def can_fork() -> bool:
    """Whether a fork is safe here and now (see the module): one thread, native ones counted
    (a library's thread pool, gRPC's); `TUIPROF_NO_FORK=1` says no."""
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and os.environ.get("TUIPROF_NO_FORK", "") in ("", "0")
        and threading.active_count() == 1
        and _os_threads() == 1
    )


def yield_cpu(nice: int) -> None:
    """Give the calling thread this niceness, so on busy cores it yields to the threads others
    wait for (Linux, where a thread's niceness is its own; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def _os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # unknown: no fork


def start(
    main: Callable[[], int],
    argv: Sequence[str],
    *,
    stdin: bool,
    stdout: bool,
    env: dict[str, str] | None = None,
    new_session: bool = False,
) -> Child:
    """`main()` in a forked child where `can_fork()`, else `python argv...` (the same code's
    entry point) with the same pipes; `env` is set in the child before `main` runs."""
    if not can_fork():
        return subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env} if env else None,
            start_new_session=new_session,
        )
    in_r, in_w = os.pipe() if stdin else (-1, -1)
    out_r, out_w = os.pipe() if stdout else (-1, -1)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 1
        try:
            if new_session:
                os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(in_r if stdin else null, 0)
            os.dup2(out_w if stdout else null, 1)
            os.dup2(null, 2)
            _close_inherited()
            os.environ.update(env or {})
            # as a fresh interpreter's: text streams over descriptors 0, 1 and 2
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            status = main()
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # a child's failure is its exit status
            status = 1
        finally:  # never back into the caller's code: that is the parent's
            os._exit(status if isinstance(status, int) else 1)
    for fd in (in_r, out_w):
        if fd >= 0:
            os.close(fd)
    return _Forked(
        pid,
        os.fdopen(in_w, "wb") if stdin else None,
        os.fdopen(out_r, "rb") if stdout else None,
    )


def _close_inherited() -> None:
    """Close every descriptor above 2 (a pipe left open would keep its reader waiting)."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):
                os.close(fd)


class _Forked:
    """A forked child with the part of Popen's interface callers use."""

    def __init__(self, pid: int, stdin: IO[bytes] | None, stdout: IO[bytes] | None) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone, its status lost
                self.returncode = 0
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            if self.returncode is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                    self.returncode = os.waitstatus_to_exitcode(status)
                except ChildProcessError:  # reaped elsewhere: its status is lost
                    self.returncode = 0
            return self.returncode
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
