"""A Ray run's job log, read back on the user's machine: its output, metrics and artifacts.

Contract: `Demux(token, log_path, metrics_path, run_dir).feed(text)` takes the log in pieces of
any size, exactly as Ray serves it, and writes the job's output to `log_path` and its metrics
lines to `metrics_path` as they arrive (so the runner follows two local files, as for a local
run); node.py's records are taken out wherever they fall. What Ray logs before the wrapper's
`start` record (runtime environment set-up, the entrypoint line) is kept aside as `preamble`
for error messages, not in the run's log. On the `end` record the run dir's tar.gz (sent in the
log or left in `[backend] storage`) is checked against its size and SHA-256 and unpacked into
`run_dir`: regular files and directories only, no path outside it, never over `output.log`.
`skip_output`/`skip_metrics` let a second pass over the whole log (after a broken stream) write
only what the first one did not.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import tarfile
from collections import deque
from pathlib import Path, PurePosixPath
from typing import IO, Any

from tui_prof.experiments.backends import RunOutcome
from tui_prof.experiments.backends.ray.node import (
    CHUNK,
    END,
    EXIT,
    FILE,
    METRIC,
    RS,
    START,
    STORED,
)

PREAMBLE_LINES = 20
LOG_NAME = "output.log"


class Demux:
    """Splits one attempt's log stream (see the module contract)."""

    def __init__(
        self,
        token: str,
        log_path: Path,
        metrics_path: Path,
        run_dir: Path,
        *,
        skip_output: int = 0,
        skip_metrics: int = 0,
    ) -> None:
        self.mark = f"{RS}{token} "
        self.log_path, self.metrics_path, self.run_dir = log_path, metrics_path, run_dir
        self.start: dict[str, Any] | None = None
        self.exit: dict[str, Any] | None = None
        self.ended = False
        self.problems: list[str] = []  # artifacts that did not come back, and why
        self.output_chars = 0  # of the job's output seen (written or skipped)
        self.metric_lines = 0
        self.preamble: deque[str] = deque(maxlen=PREAMBLE_LINES)
        self._skip_output, self._skip_metrics = skip_output, skip_metrics
        self._buf = ""
        self._file: dict[str, Any] | None = None
        self._tar: IO[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._metrics: IO[bytes] | None = None

    # -- reading -------------------------------------------------------------------------

    def outcome(self, stopping: bool) -> RunOutcome:
        """The run's outcome from the wrapper's end record; `stopping`: tuiprof asked for it."""
        ex = self.exit or {}
        wall = ex.get("wall_time_s")
        return RunOutcome(
            exit_code=int(ex.get("exit_code", 1)),
            wall_time_s=float(wall) if isinstance(wall, (int, float)) else None,
            error=ex.get("error") or None,
            timed_out=bool(ex.get("timed_out")),
            stopped=bool(ex.get("stopped")) or stopping,
            ran=bool(ex.get("ran", True)),
        )

    def feed(self, text: str) -> None:
        buf = self._buf + text
        while buf:
            i = buf.find(RS)
            if i < 0:
                self._output(buf)
                buf = ""
                break
            if i:
                self._output(buf[:i])
                buf = buf[i:]
            if len(buf) < len(self.mark) and self.mark.startswith(buf):
                break  # perhaps a record's mark cut by the chunking: wait for the rest
            if not buf.startswith(self.mark):
                self._output(RS)  # not ours (Ray's own text): output as it is
                buf = buf[1:]
                continue
            end = buf.find("\n")
            if end < 0:
                break  # a record not complete yet
            kind, _, data = buf[len(self.mark) : end].partition(" ")
            buf = buf[end + 1 :]
            self._record(kind, data)
        self._buf = buf
        self.flush()

    def flush(self) -> None:
        for f in (self._log, self._metrics):
            if f is not None:
                f.flush()

    def close(self) -> None:
        """At the end of the stream: what is left is output (a last line without a newline)."""
        if self._buf and not self.mark.startswith(self._buf):
            self._output(self._buf)
        self._buf = ""
        for f in (self._log, self._metrics, self._tar):
            if f is not None:
                f.close()
        self._log = self._metrics = self._tar = None

    # -- what goes where -----------------------------------------------------------------
    def _output(self, text: str) -> None:
        if self.start is None:  # Ray's own lines before the job: for messages only
            self.preamble.extend(ln for ln in text.splitlines() if ln.strip())
            return
        n = len(text)
        if self._skip_output >= n:
            self._skip_output -= n
            self.output_chars += n
            return
        text = text[self._skip_output :]
        self.output_chars += self._skip_output + len(text)
        self._skip_output = 0
        if self._log is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - open for the run's life
        self._log.write(text.encode("utf-8"))

    def _record(self, kind: str, data: str) -> None:
        if kind == METRIC:
            self.metric_lines += 1
            if self._skip_metrics > 0:
                self._skip_metrics -= 1
                return
            if self._metrics is None:
                self._metrics = open(self.metrics_path, "ab")  # noqa: SIM115
            self._metrics.write(data.encode("utf-8") + b"\n")
            return
        if kind == CHUNK:
            if self._tar is not None:
                try:
                    self._tar.write(base64.b64decode(data, validate=True))
                except ValueError:
                    self.problems.append("a damaged piece of the run's files")
            return
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        if kind == START:
            self.start = obj
        elif kind == EXIT:
            self.exit = obj
        elif kind == FILE:
            self._file = obj
            self.problems += [f"not sent back: {s}" for s in obj.get("skipped", [])]
            self._tar = open(self._part_path(), "wb")  # noqa: SIM115
        elif kind == STORED:
            self._file = obj
        elif kind == END:
            self._unpack()
            self.ended = True

    # -- artifacts -----------------------------------------------------------------------
    def _part_path(self) -> Path:
        return self.run_dir.parent / f".{self.run_dir.name}.tar.gz.part"

    def _unpack(self) -> None:
        info, part = self._file, self._part_path()
        if self._tar is not None:
            self._tar.close()
            self._tar = None
        if info is None:
            self.problems.append("the run's files were never sent")
            return
        try:
            if "path" in info:  # left in [backend] storage
                shutil.copyfile(info["path"], part)
            size, digest = part.stat().st_size, _sha256(part)
            if size != info.get("bytes") or digest != info.get("sha256"):
                self.problems.append(
                    f"the run's files arrived damaged ({size} of {info.get('bytes')} bytes)"
                )
                return
            extract(part, self.run_dir)
            if "path" in info:
                with contextlib.suppress(OSError):
                    os.unlink(info["path"])
        except (OSError, tarfile.TarError) as exc:
            self.problems.append(f"the run's files could not be unpacked: {exc}")
        finally:
            with contextlib.suppress(OSError):
                part.unlink()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def extract(archive: Path, target: Path) -> None:
    """Unpack a run dir's tar.gz into target: regular files and directories inside it only."""
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            name = PurePosixPath(member.name)
            if name.is_absolute() or ".." in name.parts or not name.parts:
                continue
            if str(name) == LOG_NAME:  # the output came through the stream: keep that one
                continue
            dest = target.joinpath(*name.parts)
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                if src is None:
                    continue
                tmp = dest.with_name(dest.name + ".tuiprof-part")
                with src, open(tmp, "wb") as out:
                    shutil.copyfileobj(src, out)
                os.replace(tmp, dest)
