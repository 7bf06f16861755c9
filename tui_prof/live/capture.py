"""Capture a profile from a running job's profiler server, TensorBoard's "Capture profile" headless.

Contract: `capture()` asks one or more profiler servers (`tf.profiler.experimental.server.start`,
`jax.profiler.start_server`) for a trace of `duration_ms` through the client xprof ships, and
returns the new session `LOGDIR/plugins/profile/<session>/` with one `<host>_<port>.xplane.pb`
per address; every failure is a `CaptureError` whose `str()` is one line saying why and what to
try. The *job* writes the file (the client sends it the path), so LOGDIR must be a path the job
can write and tuiprof can read: the same machine, or a shared filesystem.

The native client logs to stdout/stderr, can block for tens of seconds and could crash, so it
runs in a child process (`python -m tui_prof.live.capture_client`, internal) whose output goes to a log
file, with a timeout, a cancel event and a process group to kill. No TensorFlow import here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tui_prof.live.capture_client import CONNECT_WAIT_S, classify
from tui_prof.model import Progress, os_reason

# An empty trace from a live server is at most this big (an XSpace with no events: ~200 bytes).
EMPTY_XPLANE_BYTES = 1024
# Failures whose one line cannot say everything: the message points to the client's log, which
# is kept. Every other failure's temporary log is removed (the line says what happened).
_LOG_POINTS_TO = ("failed", "timeout")

_ADDRESS_RE = re.compile(r"^(?:grpc://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


class CaptureError(RuntimeError):
    """A capture that produced no usable session; `kind` lets callers react, `str()` is one line.

    Kinds: bad_address, bad_request, no_server, server_died, empty, not_local, timeout,
    cancelled, failed.
    """

    def __init__(self, kind: str, message: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.log_path = log_path

    def __str__(self) -> str:
        text = " ".join(str(self.args[0]).split())
        return f"{text} (client log: {self.log_path})" if self.log_path else text


@dataclass(frozen=True)
class CaptureResult:
    """One finished capture: the session directory and the host files written into it."""

    session_dir: Path
    files: tuple[Path, ...]
    addresses: tuple[str, ...]
    duration_ms: int
    elapsed_s: float
    warnings: tuple[str, ...] = field(default=())


def parse_addresses(addresses: str | Sequence[str]) -> tuple[str, ...]:
    """`HOST:PORT[,HOST:PORT...]` (or a list of them) as clean addresses, or a bad_address error."""
    items = [addresses] if isinstance(addresses, str) else list(addresses)
    parts = [p.strip() for item in items for p in item.split(",")]
    parts = [p for p in parts if p]
    if not parts:
        raise CaptureError("bad_address", "no address given: expected HOST:PORT[,HOST:PORT...]")
    out: list[str] = []
    for part in parts:
        m = _ADDRESS_RE.match(part)
        if not m:
            raise CaptureError(
                "bad_address",
                f"bad address {part!r}: expected HOST:PORT, e.g. localhost:6009 or [::1]:6009",
            )
        port = int(m.group(2))
        if not 1 <= port <= 65535:
            raise CaptureError("bad_address", f"bad port in {part!r}: ports are 1 to 65535")
        out.append(f"{m.group(1)}:{port}")
    return tuple(dict.fromkeys(out))


def default_timeout_s(duration_ms: int, delay_ms: int = 0, retries: int = 0) -> float:
    """Long enough for every attempt to connect, trace and let the job write its file."""
    per_attempt = (delay_ms + duration_ms) / 1000.0 + CONNECT_WAIT_S
    return (retries + 1) * per_attempt + 10.0


def _session_state(profile_root: Path) -> dict[Path, tuple[int, int]]:
    """(size, mtime_ns) of every *.xplane.pb under the profile root, to spot what a capture wrote."""
    state: dict[Path, tuple[int, int]] = {}
    try:
        for path in profile_root.glob("*/*.xplane.pb"):
            try:
                st = path.stat()
            except OSError:
                continue
            state[path] = (st.st_size, st.st_mtime_ns)
    except OSError:
        pass
    return state


def _wait_for_fresh_second(profile_root: Path) -> None:
    """Sessions are named by the second; never let two captures share (and overwrite) one."""
    for _ in range(3):
        now = datetime.now(UTC)
        names = {t.strftime("%Y_%m_%d_%H_%M_%S") for t in (now, now.astimezone())}
        if not any((profile_root / name).exists() for name in names):
            return
        time.sleep(1.05 - (time.time() % 1.0))


def _child_env() -> dict[str, str]:
    """The child must import tui_prof even from a source checkout that is not installed."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # keep the per-address reasons we classify in the log
    return env


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the child's process group: TERM, then KILL if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def capture(
    addresses: str | Sequence[str],
    *,
    logdir: str | os.PathLike[str],
    duration_ms: int = 2000,
    host_tracer_level: int = 2,
    device_tracer_level: int = 1,
    python_tracer_level: int = 0,
    delay_ms: int = 0,
    retries: int = 3,
    timeout_s: float | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    log_path: str | os.PathLike[str] | None = None,
) -> CaptureResult:
    """Capture `duration_ms` from each address into a new session under LOGDIR/plugins/profile.

    Blocks (run it in a thread worker). `retries` re-asks only after an empty capture (the job
    idle for a moment); an unreachable or dying server fails at once. `timeout_s` bounds the
    whole call (default `default_timeout_s(...)`); `cancel` stops the child at once. The native
    client log goes to `log_path` (kept), or to a temp file that is kept, and named in the
    error, only where the one line cannot say it all (an unexplained failure, a timeout).
    """
    addrs = parse_addresses(addresses)
    if duration_ms <= 0:
        raise CaptureError("bad_request", f"duration must be positive, got {duration_ms} ms")
    levels = {
        "host": host_tracer_level,
        "device": device_tracer_level,
        "python": python_tracer_level,
    }
    for name, level in levels.items():
        if not 0 <= level <= 3:
            raise CaptureError("bad_request", f"{name} tracer level must be 0 to 3, got {level}")
    root = Path(logdir).expanduser().resolve()  # the job resolves it, from its own cwd
    profile_root = root / "plugins" / "profile"  # the job creates it, as TensorBoard's does
    limit = (
        timeout_s if timeout_s is not None else default_timeout_s(duration_ms, delay_ms, retries)
    )
    keep_log = log_path is not None
    if log_path is None:
        fd, tmp = tempfile.mkstemp(prefix="tuiprof-capture-", suffix=".log")
        os.close(fd)
        log = Path(tmp)
    else:
        log = Path(log_path)
        try:
            log.write_bytes(b"")
        except OSError as exc:  # a directory, a missing or read-only place: one line, no capture
            raise CaptureError(
                "bad_request", f"cannot write the log {log}: {os_reason(exc)}"
            ) from None
    request: dict[str, Any] = {
        "service_addr": ",".join(addrs),
        "logdir": str(root),
        "duration_ms": int(duration_ms),
        "attempts": 1,
        "options": {f"{k}_tracer_level": int(v) for k, v in levels.items()}
        | {"delay_ms": int(delay_ms)},
        "result": str(log.with_suffix(log.suffix + ".result.json")),
    }
    say = progress or (lambda _f, _m: None)
    started = time.monotonic()
    for attempt in range(retries + 1):
        try:
            result = _capture_once(request, profile_root, log, started + limit, cancel, say)
        except CaptureError as exc:
            if exc.kind != "empty" or attempt == retries:
                if keep_log or exc.kind in _LOG_POINTS_TO:
                    exc.log_path = log
                else:
                    log.unlink(missing_ok=True)
                raise
            say(0.0, f"nothing recorded; retry {attempt + 1} of {retries}")
            continue
        if not keep_log:
            log.unlink(missing_ok=True)
        return CaptureResult(
            result[0], result[1], addrs, int(duration_ms), time.monotonic() - started, result[2]
        )
    raise AssertionError("unreachable")


def _capture_once(
    request: dict[str, Any],
    profile_root: Path,
    log: Path,
    deadline: float,
    cancel: threading.Event | None,
    say: Progress,
) -> tuple[Path, tuple[Path, ...], tuple[str, ...]]:
    """One run of the child: (session_dir, files, warnings) or a classified CaptureError."""
    result_file = Path(request["result"])
    addrs: list[str] = request["service_addr"].split(",")
    duration_ms: int = request["duration_ms"]
    _wait_for_fresh_second(profile_root)
    before = _session_state(profile_root)
    expected_s = (duration_ms + request["options"]["delay_ms"]) / 1000.0 + 2.0
    say(0.0, f"connecting to {', '.join(addrs)}")
    started = time.monotonic()
    with open(log, "ab") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui_prof.live.capture_client", json.dumps(request)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=_child_env(),
            start_new_session=True,
        )
    try:
        while True:
            try:
                proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                raise CaptureError("cancelled", "capture cancelled")
            if now > deadline:
                raise CaptureError(
                    "timeout",
                    f"no answer from {', '.join(addrs)} within the time limit "
                    f"({now - started:.0f} s): the job may be stuck; try again or a longer --timeout",
                )
            elapsed = now - started
            phase = (
                "tracing" if elapsed < expected_s else "waiting for the job to write the profile"
            )
            say(min(0.95, elapsed / (expected_s + 1.0)), f"{phase} ({elapsed:.1f} s)")
    finally:
        if proc.poll() is None:
            _stop_group(proc)
        Path(str(result_file) + ".tmp").unlink(missing_ok=True)  # a child killed mid-write
    elapsed = time.monotonic() - started
    outcome = _read_json(result_file)
    result_file.unlink(missing_ok=True)
    after = _session_state(profile_root)
    written = sorted(p for p, st in after.items() if before.get(p) != st)
    ours = {_host_file(a) for a in addrs}
    written = [p for p in written if p.name in ours] or written  # another writer may share LOGDIR
    if outcome.get("ok") and written:
        session_dir = max(written, key=lambda p: p.parent.name).parent
        files = tuple(p for p in written if p.parent == session_dir)
        by_name = {f.name: after[f][0] for f in files}
        warnings = [
            f"{a}: did not answer; no profile from it"
            if _host_file(a) not in by_name
            else f"{a}: answered but recorded no events (idle?)"
            for a in addrs
            if by_name.get(_host_file(a), 0) <= EMPTY_XPLANE_BYTES
        ]
        say(1.0, f"captured {session_dir.name}")
        return session_dir, files, tuple(warnings)
    if outcome.get("ok"):
        raise CaptureError(
            "not_local",
            f"the capture finished but no profile appeared under {profile_root}: the job writes "
            "the file itself, so --logdir must be a path the job can write and tuiprof can read",
        )
    if not outcome:
        raise CaptureError("failed", f"the capture client exited with status {proc.returncode}")
    for path in written:  # an empty trace still leaves a ~200-byte file behind: not a session
        _remove_empty(path)
    log_text = log.read_text(errors="replace") if log.exists() else ""
    return_kind, error = str(outcome.get("kind", "")), str(outcome.get("error", ""))
    raise CaptureError(*classify(return_kind, error, log_text, addrs, duration_ms, elapsed))


def _host_file(address: str) -> str:
    """The file name the job gives its part of the session (':' is not allowed on Windows)."""
    return address.replace(":", "_") + ".xplane.pb"


def _remove_empty(path: Path) -> None:
    """Drop a near-empty xplane a failed capture left, and its session dir if that is now empty."""
    try:
        if path.stat().st_size <= EMPTY_XPLANE_BYTES:
            path.unlink()
            path.parent.rmdir()
    except OSError:
        pass


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def capture_series(
    addresses: str | Sequence[str],
    *,
    logdir: str | os.PathLike[str],
    every_s: float,
    count: int | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    **capture_kwargs: Any,
) -> Iterator[CaptureResult | CaptureError]:
    """Capture every `every_s` seconds (start to start), yielding each result as it is written.

    An empty capture (the job idle for a moment) is yielded and the series goes on; any other
    error is yielded and ends the series, since the job is gone or unreachable. `count=None`
    runs until `cancel` is set; cancelling ends the series without yielding an error.
    `capture_kwargs` go to `capture()` (duration_ms, host_tracer_level, retries, ...).
    """
    addrs = parse_addresses(addresses)
    index = 0
    while count is None or index < count:
        if cancel is not None and cancel.is_set():
            return
        started = time.monotonic()

        def sub(frac: float, msg: str, i: int = index) -> None:
            if progress is not None:
                total = f"/{count}" if count else ""
                progress(
                    frac if count is None else (i + frac) / count, f"capture {i + 1}{total}: {msg}"
                )

        try:
            result = capture(addrs, logdir=logdir, cancel=cancel, progress=sub, **capture_kwargs)
        except CaptureError as exc:
            if exc.kind == "cancelled":
                return
            yield exc
            if exc.kind != "empty":
                return
        else:
            yield result
        index += 1
        if count is not None and index >= count:
            return
        wait = every_s - (time.monotonic() - started)
        if wait > 0 and cancel is not None:
            if cancel.wait(wait):
                return
        elif wait > 0:
            time.sleep(wait)
