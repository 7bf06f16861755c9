"""The run wrapper on a Ray node: the entrypoint of each run's Ray job.

It runs the job as tuiprof's local runner would (the same TUIPROF_* settings, now pointing at a
scratch directory on the node), measures its wall time around the process, takes the node's
fingerprint (GPU model and driver from nvidia-smi, host, CPU, CUDA_VISIBLE_DEVICES), enforces
the spec's timeout, and sends everything back through the one channel the Jobs API gives
(the job's log), because the node may share no file system with the user's machine.

Contract (the reader is stream.py): this process's stdout is the Ray job's log. The job's own
output (stdout and stderr, as UTF-8) goes there unchanged; tuiprof's records are
`RS + token + " " + kind + " " + data + "\\n"`, written between output chunks (so possibly
inside an output line, from which the reader removes them). In order:
    start  {"host", "environment", "profiler_port", "cwd"}   the job is starting
    metric one line of $TUIPROF_METRICS_FILE                  as the job appends it
    exit   {"exit_code", "wall_time_s", "timed_out", "stopped", "error", "ran"}
    file   {"bytes", "sha256", "skipped"}, then chunk <base64> …: the run dir as a tar.gz
    stored {"path", "bytes", "sha256"}                        instead, with [backend] storage
    end    {}                                                 nothing follows
Only the standard library and tuiprof's stdlib-only modules are used: tuiprof reaches the node as
Ray `py_modules`, so nothing needs installing there.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RS = "\x1e"  # ASCII record separator: starts each record
PAYLOAD_VAR = "TUIPROF_RAY_RUN"
START, METRIC, EXIT, FILE, CHUNK, STORED, END = (
    "start",
    "metric",
    "exit",
    "file",
    "chunk",
    "stored",
    "end",
)
CHUNK_BYTES = 12 * 1024  # raw bytes per chunk record: 16 KiB of base64, under Ray's log chunks
MAX_SHIP_BYTES = 256 << 20  # a bigger run dir stays on the node: use [backend] storage
POLL_S = 0.1


class Records:
    """Writes the job's output and tuiprof's records to stdout, whole writes, in order."""

    def __init__(self, token: str, fd: int = 1) -> None:
        self.mark = f"{RS}{token} ".encode()
        self.fd = fd
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def output(self, data: bytes, final: bool = False) -> None:
        """The job's bytes as UTF-8 (Ray's log reader decodes strictly; bad bytes become U+FFFD)."""
        text = self._decoder.decode(data, final)
        if text:
            self._write(text.replace(RS, "\ufffd").encode("utf-8"))

    def record(self, kind: str, data: Any) -> None:
        body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        self._write(self.mark + f"{kind} {body}\n".encode())


class MetricsFollower:
    """Complete lines appended to the job's metrics file since the last poll."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def poll(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        return [ln.decode("utf-8", "replace").replace(RS, " ") for ln in lines if ln.strip()]


def _group_members() -> list[int]:
    """The other processes of this process group (the job and what it started), from /proc."""
    me, group = os.getpid(), os.getpgrp()
    out: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == group:
            out.append(int(entry.name))
    return out


def _signal_job(child: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the job and what it started: the rest of this process group where this wrapper
    leads it (as Ray starts it, in a session of its own), else the job alone."""
    leader = os.getpgrp() == os.getpid() and os.path.isdir("/proc")
    pids = _group_members() if leader else []
    for pid in pids or [child.pid]:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def _fingerprint(payload: dict[str, Any]) -> dict[str, Any]:
    from tui_prof.experiments.fingerprint import host_fingerprint

    fp = dict(host_fingerprint())
    fp["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return fp


def _pack(run_dir: Path, scratch: Path) -> tuple[Path, list[str]]:
    """The run dir as a tar.gz; what is too big to ship is left out and named."""
    size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink())
    skipped: list[str] = []
    tar_path = scratch / "run.tar.gz"
    with tarfile.open(tar_path, "w:gz", compresslevel=1) as tar:
        if size <= MAX_SHIP_BYTES:
            for child in sorted(run_dir.iterdir()):
                tar.add(child, arcname=child.name)
        else:  # the metrics always come back; the profile stays on the node
            metrics = run_dir / "metrics.jsonl"
            if metrics.exists():
                tar.add(metrics, arcname=metrics.name)
            skipped = [f"{size / 2**20:.0f} MiB in {run_dir} on {os.uname().nodename}"]
    return tar_path, skipped


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ship(out: Records, tar_path: Path, skipped: list[str], storage: str | None) -> None:
    size, digest = tar_path.stat().st_size, _digest(tar_path)
    if storage:
        target = Path(storage)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".part")
            shutil.copyfile(tar_path, tmp)
            os.replace(tmp, target)
            out.record(STORED, {"path": str(target), "bytes": size, "sha256": digest})
            return
        except OSError as exc:
            skipped = [*skipped, f"storage {storage}: {exc.strerror or exc}; sent through the log"]
    out.record(FILE, {"bytes": size, "sha256": digest, "skipped": skipped})
    with open(tar_path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            out.record(CHUNK, base64.b64encode(block).decode("ascii"))


def _run(payload: dict[str, Any], out: Records, run_dir: Path) -> dict[str, Any]:
    """Start the job, pass its output and metrics on until it ends; its exit record."""
    from tui_prof.experiments.runio import expand_args, free_port

    metrics_path = run_dir / "metrics.jsonl"
    metrics_path.touch()
    env = dict(os.environ)
    env.pop("TUIPROF_PROFILER_PORT", None)
    env.update(payload.get("env", {}))
    env.update(
        {
            "TUIPROF_RUN_DIR": str(run_dir),
            "TUIPROF_METRICS_FILE": str(metrics_path),
            "TUIPROF_EXPERIMENT_DIR": str(run_dir.parent),
        }
    )
    port = free_port() if payload.get("profiler_port") else None
    if port is not None:
        env["TUIPROF_PROFILER_PORT"] = str(port)
    cwd = payload.get("cwd") or os.getcwd()
    host = os.uname().nodename
    out.record(
        START,
        {"host": host, "environment": _fingerprint(payload), "profiler_port": port, "cwd": cwd},
    )
    argv = expand_args(list(payload["argv"]), env)
    if not os.path.isdir(cwd):
        return {"exit_code": 127, "ran": False, "error": f"no directory {cwd} on {host}"}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # Ray's stop: the job gets it too
    t_start = time.perf_counter()
    try:
        child = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            close_fds=True,
        )
    except OSError as exc:
        why = exc.strerror or str(exc)
        return {
            "exit_code": 127,
            "ran": False,
            "error": f"could not start {argv[0]!r} on {host}: {why}",
        }
    ended: list[float] = []

    def reap() -> None:
        child.wait()
        ended.append(time.perf_counter())

    reaper = threading.Thread(target=reap, name="tuiprof-reap")
    reaper.start()
    assert child.stdout is not None
    fd = child.stdout.fileno()
    follower = MetricsFollower(metrics_path)
    timeout, grace = payload.get("timeout_s"), float(payload.get("kill_grace_s", 5.0))
    timed_out, kill_at, drain_until = False, None, None
    while True:
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if ready:
            data = os.read(fd, 1 << 16)
            if data:
                out.output(data)
            elif ended:
                break
        for line in follower.poll():
            out.record(METRIC, line)
        now = time.perf_counter()
        if ended:
            if drain_until is None:  # what it left behind keeps the pipe open: not for long
                _signal_job(child, signal.SIGKILL)
                drain_until = now + 1.0
            elif now > drain_until:
                break
        elif timeout is not None and not timed_out and now - t_start > timeout:
            timed_out, kill_at = True, now + grace
            _signal_job(child, signal.SIGTERM)
        elif kill_at is not None and now > kill_at:
            _signal_job(child, signal.SIGKILL)
            kill_at = None
    reaper.join()
    out.output(b"", final=True)
    for line in follower.poll(final=True):
        out.record(METRIC, line)
    code = child.returncode
    return {
        "exit_code": code,
        "wall_time_s": ended[0] - t_start,
        "timed_out": timed_out,
        "stopped": stop.is_set(),
        "ran": True,
    }


def main() -> int:
    payload = json.loads(os.environ.pop(PAYLOAD_VAR))
    out = Records(str(payload["token"]))
    scratch = Path(tempfile.mkdtemp(prefix="tuiprof-run-"))
    try:
        run_dir = scratch / "run"
        run_dir.mkdir()
        try:
            result = _run(payload, out, run_dir)
        except Exception as exc:  # a bug here must still end the run with a reason
            why = f"tuiprof's run wrapper failed on {os.uname().nodename}: {exc!r}"
            result = {"exit_code": 1, "ran": False, "error": why}
        out.record(EXIT, result)
        tar_path, skipped = _pack(run_dir, scratch)
        _ship(out, tar_path, skipped, payload.get("storage"))
        out.record(END, {})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    code = int(result["exit_code"])
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
