"""TensorBoard start → overview data, against tuiprof start → headline on screen, same profile, same run.

TensorBoard: `tensorboard --logdir COPY --host 127.0.0.1 --port FREE` on a fresh copy of the logdir
each time (its converter writes a cache next to the profile, which would make later runs warm);
the clock stops when the profile plugin's overview endpoint
(/data/plugin/profile/data?run=RUN&tag=overview_page&host=HOST) answers with data. A browser
would still have to load the frontend and draw it, so this is a lower bound on what a user waits.
TensorBoard imports TensorFlow when it is installed (it is here): that is part of its real cost,
and the script reports whether the server process had TensorFlow loaded. Stopped by its pid.
tuiprof: `tuiprof LOGDIR` in a pseudo-terminal with an empty cache, until the headline shows.

    python benchmarks/bench_tensorboard.py [LOGDIR] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, SAMPLE, SHARED_GPU, preflight, tuiprof_cmd, write_result
from bench_startup import pty_time_to_text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str, timeout: float = 120) -> tuple[int | None, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            body = r.read()
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            return r.status, body
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None, b""


def tensorboard_once(logdir: Path, timeout: float = 120) -> dict[str, float | bool | str]:
    port = free_port()
    tb = Path(PYTHON).parent / "tensorboard"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(tb), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=logdir,
        start_new_session=True,
    )
    out: dict[str, float | bool | str] = {}
    q = urllib.parse.quote
    try:
        runs: list[str] = []
        while time.perf_counter() - t0 < timeout:
            status, body = get(port, "/data/plugin/profile/runs", timeout=5)
            if status == 200 and body and json.loads(body):
                runs = json.loads(body)
                break
            time.sleep(0.02)
        if not runs:
            out["error"] = "no runs listed"
            return out
        out["runs_listed_s"] = time.perf_counter() - t0
        run = runs[0]
        _, body = get(port, f"/data/plugin/profile/hosts?run={q(run)}&tag=overview_page")
        hosts = [h["hostname"] for h in json.loads(body or b"[]")]
        status, body = get(
            port, f"/data/plugin/profile/data?run={q(run)}&tag=overview_page&host={q(hosts[0])}"
        )
        if status != 200 or len(body) < 100:
            out["error"] = f"overview answered {status} with {len(body)} bytes"
            return out
        out["overview_s"] = time.perf_counter() - t0
        with open(f"/proc/{proc.pid}/maps") as f:
            out["tensorflow_loaded"] = "libtensorflow" in f.read()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, _, usage = os.wait4(proc.pid, 0)
            out["peak_rss_mb"] = usage.ru_maxrss / 1024
        except ChildProcessError:
            pass
        with contextlib.suppress(
            ProcessLookupError
        ):  # its data-server helper, if it started one, is in the same new session
            os.killpg(proc.pid, signal.SIGTERM)
    return out


def med(values: list[float]) -> dict[str, float]:
    return {
        "median_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
        "runs": len(values),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = SHARED_GPU.parents[3] if SHARED_GPU.exists() else SAMPLE
    ap.add_argument("logdir", nargs="?", type=Path, default=default)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    preflight("tensorboard", "xprof")
    src = args.logdir.resolve()
    tb_times: list[float] = []
    tb_runs: list[dict[str, float | bool | str]] = []
    tui_cold: list[float] = []
    env = dict(os.environ, TERM="xterm-256color", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("NO_COLOR", None)
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-tb-") as tmp:
        for i in range(args.runs):
            logdir = Path(tmp) / f"logdir{i}"
            shutil.copytree(src, logdir)
            r = tensorboard_once(logdir)
            tb_runs.append(r)
            if "overview_s" in r:
                tb_times.append(float(r["overview_s"]))
            cold = dict(env, TUIPROF_CACHE_DIR=str(Path(tmp) / f"cache{i}"))
            tui_cold.append(pty_time_to_text(tuiprof_cmd(str(logdir)), cold))
            print(
                f"  round {i + 1}/{args.runs}: tensorboard {r}, tuiprof cold {tui_cold[-1] * 1000:.0f} ms",
                file=sys.stderr,
            )
    if not tb_times:
        print("TensorBoard never served the overview", file=sys.stderr)
        return 1
    tb, tp = med(tb_times), med([t for t in tui_cold if t == t])
    print()
    print(
        f"TensorBoard start -> overview data   median {tb['median_s']:.2f} s (min {tb['min_s']:.2f}, "
        f"max {tb['max_s']:.2f}, n={tb['runs']}); TensorFlow loaded: "
        f"{any(r.get('tensorflow_loaded') for r in tb_runs)}"
    )
    print(
        f"tuiprof start -> headline (cold)     median {tp['median_s']:.2f} s (min {tp['min_s']:.2f}, "
        f"max {tp['max_s']:.2f}, n={tp['runs']})"
    )
    print(f"TensorBoard / tuiprof: {tb['median_s'] / tp['median_s']:.1f}x")
    write_result(
        "tensorboard",
        {
            "logdir": str(src),
            "tensorboard": tb,
            "tensorboard_runs": tb_runs,
            "tuiprof_cold": tp,
            "ratio_tensorboard_over_tuiprof": tb["median_s"] / tp["median_s"],
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
