"""What the runner does around a run's process, whatever the backend: the `${TUIPROF_…}`
arguments, a free port, following the run's log file, and saying how it exited.

Contract: `expand_args` replaces only tuiprof's own variables (there is no shell);
`LineTail.poll()` returns the complete lines appended since the last call (a progress bar's
carriage returns keep what it shows last); `describe_exit(code)` is one phrase for messages.
"""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path

_VAR_RE = re.compile(r"\$\{(TUIPROF_[A-Z_]+)\}")


def expand_args(argv: list[str], env: dict[str, str]) -> list[str]:
    """Replace `${TUIPROF_...}` in arguments by the run's value, e.g. `--seed ${TUIPROF_REPEAT}`
    (only tuiprof's own variables: there is no shell, and other text stays as written)."""
    return [_VAR_RE.sub(lambda m: env.get(m.group(1), m.group(0)), a) for a in argv]


def free_port() -> int:
    """A TCP port nothing listens on now, for the job's profiler server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LineTail:
    """Follows a log file and returns the complete lines appended since the last call."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset, self._partial = path, 0, b""

    def poll(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(4 << 20)
        except OSError:
            return []
        if not data and not (final and self._partial):
            return []
        self._offset += len(data)
        parts = (self._partial + data).split(b"\n")
        self._partial = parts.pop()
        if final and self._partial:
            parts.append(self._partial)
            self._partial = b""
        # A progress bar redraws with carriage returns: keep what it shows last.
        return [p.decode("utf-8", errors="replace").rstrip("\r").rsplit("\r", 1)[-1] for p in parts]


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"
