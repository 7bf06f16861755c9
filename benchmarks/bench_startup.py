"""Cold start to the first screen with numbers: `tuiprof PATH` from process start to the session's headline.

Two ways of watching, each with an empty summary cache (cold: the converter runs) and a warm one
(a second open of the same session):
  pty       the real `tuiprof PATH` in a pseudo-terminal (120x40, xterm-256color); the clock stops
            when the headline's text ("… ms per step") first appears in what it writes to the
            terminal, escape sequences stripped. This is what a user sees.
  headless  the same app under Textual's headless driver (App.run_test) in a fresh process; the
            clock stops after the refresh that follows the "#headline" Static getting its text.
Also timed: a minimal Textual app (one Static) in the same pty, the floor any Textual app pays
here; and load_summary() served from the cache, in-process (the analysis step of a second open).
Aim: < 0.5 s to first numbers; < 100 ms for a cached load_summary.

    python benchmarks/bench_startup.py [LOGDIR] [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, REPO, SAMPLE, SHARED_GPU, preflight, tuiprof_cmd, write_result

ANSI = re.compile(
    rb"\x1b\[[0-9;?<>=$ ]*[A-Za-z@~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)"
)
HEADLINE_MARKS = (b"per step", b"No steps found")
MINIMAL_APP = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class A(App):\n"
    "    def compose(self):\n"
    "        yield Static('21.3 ms per step')\n"
    "A().run()\n"
)


def pty_time_to_text(cmd: list[str], env: dict[str, str], timeout: float = 60.0) -> float:
    """Seconds from spawn until any HEADLINE_MARKS shows in the terminal output; the child is then ended."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO, start_new_session=True
    )
    os.close(slave)
    buf = b""
    found = float("nan")
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([master], [], [], 0.01)
            if not ready:
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the child closed the terminal
                break
            buf += chunk
            plain = ANSI.sub(b"", buf[-200_000:])
            if any(m in plain for m in HEADLINE_MARKS):
                found = time.perf_counter() - t0
                break
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: only this child and its threads
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    if found != found:
        print(
            f"  ! no headline within {timeout:.0f} s: {ANSI.sub(b'', buf)[-300:]!r}",
            file=sys.stderr,
        )
    return found


def headless_time(path: Path, env: dict[str, str]) -> dict[str, float]:
    env = dict(env, BENCH_T0=repr(time.time()))
    out = subprocess.run(
        [PYTHON, str(REPO / "benchmarks" / "_first_paint.py"), str(path)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "{}"
    result = json.loads(line)
    if "headline_s" not in result:
        print(f"  ! headless run failed: {out.stderr[-400:]}", file=sys.stderr)
    return result


def cached_load_times(path: Path, cache: str, n: int = 30) -> dict[str, float]:
    """load_summary served from a warm cache, in this process: first call (cold imports) and steady state."""
    os.environ["TUIPROF_CACHE_DIR"] = cache
    t = time.perf_counter()
    from tui_prof.profiles.discover import discover
    from tui_prof.profiles.load import load_summary

    imports = time.perf_counter() - t
    session = discover(path).sessions[0]
    t = time.perf_counter()
    load_summary(session)
    first = time.perf_counter() - t
    times = []
    for _ in range(n):
        t = time.perf_counter()
        load_summary(session)
        times.append(time.perf_counter() - t)
    return {
        "imports_s": imports,
        "first_call_s": first,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": n,
    }


def summarise(values: list[float]) -> dict[str, float]:
    ok = [v for v in values if v == v]
    if not ok:
        return {"median_s": float("nan"), "runs": 0, "failed": len(values)}
    return {
        "median_s": statistics.median(ok),
        "min_s": min(ok),
        "max_s": max(ok),
        "runs": len(ok),
        "failed": len(values) - len(ok),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = SHARED_GPU.parents[3] if SHARED_GPU.exists() else SAMPLE
    ap.add_argument("path", nargs="?", type=Path, default=default, help="what `tuiprof PATH` opens")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-headless", action="store_true", help="skip the App.run_test measurement")
    args = ap.parse_args()
    preflight("textual")
    path = args.path.resolve()
    print(f"opening: {path}", file=sys.stderr)
    base_env = dict(
        os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40", TF_CPP_MIN_LOG_LEVEL="3"
    )
    base_env.pop("NO_COLOR", None)
    results: dict[str, list[float]] = {
        k: []
        for k in (
            "minimal_textual_pty",
            "pty_cold",
            "pty_warm",
            "headless_cold",
            "headless_warm",
            "headless_first_frame_cold",
        )
    }
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-") as tmp:
        warm = os.path.join(tmp, "warm")
        warm_env = dict(base_env, TUIPROF_CACHE_DIR=warm)
        # Fill the warm cache (and the page cache, .pyc files) once, unmeasured.
        subprocess.run(
            tuiprof_cmd("summary", str(path), "--json"),
            env=warm_env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        pty_time_to_text([PYTHON, "-c", MINIMAL_APP], base_env)
        for i in range(args.runs):
            cold_env = dict(base_env, TUIPROF_CACHE_DIR=os.path.join(tmp, f"cold{i}"))
            results["minimal_textual_pty"].append(
                pty_time_to_text([PYTHON, "-c", MINIMAL_APP], base_env)
            )
            results["pty_cold"].append(pty_time_to_text(tuiprof_cmd(str(path)), cold_env))
            results["pty_warm"].append(pty_time_to_text(tuiprof_cmd(str(path)), warm_env))
            if not args.no_headless:
                cold_env = dict(base_env, TUIPROF_CACHE_DIR=os.path.join(tmp, f"hcold{i}"))
                hc = headless_time(path, cold_env)
                hw = headless_time(path, warm_env)
                results["headless_cold"].append(hc.get("headline_s", float("nan")))
                results["headless_first_frame_cold"].append(hc.get("first_frame_s", float("nan")))
                results["headless_warm"].append(hw.get("headline_s", float("nan")))
            print(
                f"  round {i + 1}/{args.runs}: "
                + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in results.items() if v),
                file=sys.stderr,
            )
        cached = cached_load_times(path, warm)
    stats = {k: summarise(v) for k, v in results.items() if v}
    print()
    for k, st in stats.items():
        if st["runs"]:
            print(
                f"{k:<28} median {st['median_s'] * 1000:7.0f} ms  (min {st['min_s'] * 1000:.0f}, "
                f"max {st['max_s'] * 1000:.0f}, n={st['runs']})"
            )
    print(
        f"{'load_summary from cache':<28} median {cached['median_s'] * 1000:7.1f} ms  "
        f"(first call in a process {cached['first_call_s'] * 1000:.1f} ms, imports {cached['imports_s'] * 1000:.0f} ms)"
    )
    print("aims: first numbers < 500 ms; cached analysis < 100 ms")
    write_result("startup", {"path": str(path), "series": stats, "cached_load_summary": cached})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
