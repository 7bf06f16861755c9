"""TensorBoard's converter in a process of its own, so a file that crashes its native code
(a negated event offset makes it segfault) costs one line naming the file, never tuiprof itself.

Contract: `ConverterProcess.tool(links, tool)` returns the tool's JSON text (or None where the
converter has none) as `xspace_to_tool_data` would; its death raises `ConverterDied` with the
signal's name, and the next call starts a fresh process. The process (forked where
`profiles.forked` finds that safe, else `python -m tui_prof.profiles.xplane.convert_worker`)
imports the converter once and answers requests in order: a JSON line in, a JSON header line and the data out. Its stdout is the protocol's alone
(fd 1 goes to /dev/null, so native code printing cannot corrupt it) and its stderr, where the
native code logs, is discarded. It exits when its stdin closes, i.e. with tuiprof.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import IO, Any

from tui_prof.profiles import forked


class ConverterDied(Exception):
    """The converter's process ended mid-request: the message says how (e.g. SIGSEGV)."""


class ConverterProcess:
    def __init__(self) -> None:
        self._proc: forked.Child | None = None

    def start(self) -> forked.Child:
        """Start the process (if it is not running); requests start it too. Forked where that
        is safe (one thread: the CLI, the analysis child), which spares a Python start."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = forked.start(
                main,
                ["-m", "tui_prof.profiles.xplane.convert_worker"],
                stdin=True,
                stdout=True,
                env={"TF_CPP_MIN_LOG_LEVEL": "3"},
            )
        return self._proc

    def tool(self, links: list[str], tool: str, options: dict[str, Any]) -> str | None:
        """One tool's output text; RuntimeError with the converter's message where it raised."""
        self.send(links, tool, options)
        return self.receive()

    def send(self, links: list[str], tool: str, options: dict[str, Any]) -> None:
        """Ask for one tool without waiting: requests are answered in order, so the caller may
        work meanwhile and take each answer with `receive`."""
        proc = self.start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(
                json.dumps({"links": links, "tool": tool, "options": options}).encode()
            )
            proc.stdin.write(b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            raise ConverterDied(self._death(proc)) from None

    def receive(self) -> str | None:
        """The answer to the oldest request not yet received (see `tool`)."""
        proc = self._proc
        if proc is None:
            raise ConverterDied("not running")
        assert proc.stdout is not None
        try:
            header = json.loads(proc.stdout.readline() or b"null")
            if header is None:
                raise ConverterDied(self._death(proc))
            if "error" in header:
                raise RuntimeError(header["error"])
            if header.get("none"):
                return None
            data = proc.stdout.read(header["size"])
            if len(data) != header["size"]:
                raise ConverterDied(self._death(proc))
            return data.decode("utf-8")
        except (BrokenPipeError, ValueError) as exc:  # ValueError: a header cut short
            if isinstance(exc, ValueError) and proc.poll() is None:
                raise
            raise ConverterDied(self._death(proc)) from None

    def _death(self, proc: forked.Child) -> str:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        self._proc = None
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exited with status {code}"

    def abandon(self) -> None:
        """Stop it now, whatever it is doing (started for work that turned out not needed)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=0.5)  # it exits on its stdin's end, or is still importing
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


_process: ConverterProcess | None = None


def process() -> ConverterProcess:
    """This process's converter process (callers serialise their calls)."""
    global _process
    if _process is None:
        _process = ConverterProcess()
        atexit.register(_process.close)
    return _process


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    from xprof.convert import raw_to_tool_data

    for line in requests:
        req = json.loads(line)
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data(
                req["links"], req["tool"], req["options"]
            )
        except Exception as exc:  # native errors surface as assorted exception types
            header: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}"}
            replies.write(json.dumps(header).encode() + b"\n")
        else:
            if data is None:
                replies.write(b'{"none": true}\n')
            else:
                body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
                replies.write(json.dumps({"size": len(body)}).encode() + b"\n" + body)
        replies.flush()


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # whatever else writes to stdout, native code included, is not a reply
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # tuiprof decides when it ends (stdin closes)
    _serve(sys.stdin.buffer, replies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
