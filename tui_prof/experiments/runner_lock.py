"""The one-runner lock of an experiment directory: an flock on its runner.lock (see store.py)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

from tui_prof.experiments.orphans import runner_identity
from tui_prof.experiments.store import LOCK_NAME, StoreError


class RunnerLock:
    """The exclusive right to run an experiment: an flock on its runner.lock.

    Why flock rather than a claim row in SQLite: taking it is atomic, and the kernel drops it when
    the holding process dies however it dies, so no liveness guess (pid reuse, other hosts) is
    needed to take over from a crashed runner. The file says who holds it, for the refusal.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, directory: Path) -> RunnerLock:
        path = directory / LOCK_NAME
        try:  # O_CLOEXEC: a job started by the runner must never inherit (and keep) the lock
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"{path}: cannot open the lock: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise StoreError(
                f"{directory}: another tuiprof is running this experiment ({holder}); "
                "wait for it to finish or stop it, then --resume"
            ) from None
        except OSError as exc:  # e.g. a filesystem without locks
            os.close(fd)
            raise StoreError(f"{path}: cannot lock: {exc.strerror or exc}") from None
        pid, host, _ = runner_identity()
        since = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        info = json.dumps({"pid": pid, "host": host, "since": since}).encode()
        with contextlib.suppress(OSError):  # who holds it, for others' messages: a full disk
            os.ftruncate(fd, 0)  # leaves it unsaid, the lock itself holds
            os.pwrite(fd, info + b"\n", 0)
        return cls(fd, path)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # nobody holds it now
            os.close(fd)  # closing drops the flock


def _lock_holder(fd: int) -> str:
    """Who holds a lock, from its file; the holder writes it just after locking, so wait a bit."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            info = json.loads(os.pread(fd, 4096, 0) or b"null")
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict):
            return f"pid {info.get('pid')} on {info.get('host')}, since {info.get('since')}"
        if time.monotonic() > deadline:
            return "its pid not yet written"
        time.sleep(0.02)
