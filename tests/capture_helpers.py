"""What the capture tests share: a timed `tuiprof` run, a free port, a server that never answers.

The namespace scenario (test_capture.py re-run as a script) uses them too, so they live here,
importable from any folder under tests/ (conftest.script_env puts tests/ on the child's path).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from typing import TypedDict

from conftest import REPO, script_env


class CliRun(TypedDict):
    """A `tuiprof` run's outcome, JSON-able (the namespace scenario prints it)."""

    rc: int
    stdout: str
    stderr: str
    start: float
    end: float


def timed_cli(args: list[str], timeout: float = 120.0, **env: str) -> CliRun:
    """Run `tuiprof ARGS` as a user would; its outcome with wall-clock start and end."""
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=script_env(**env),
        cwd=REPO,
    )
    return {
        "rc": proc.returncode,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
        "start": start,
        "end": time.time(),
    }


def free_port() -> int:
    """A port nothing listens on at the moment (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class SilentListener:
    """Accepts TCP connections on 127.0.0.1 and never answers: a hung or non-gRPC server."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port: int = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()
