"""Cold start to the first screen with numbers: `tuiprof PATH` from process start to the session's headline.

The aim: a cold first screen with numbers within 1.5x of a one-widget Textual app started
the same way, measured as a ratio in one run. Rounds alternate (minimal app, tuiprof cold, tuiprof
warm, the analysis floor), so machine load falls on every series alike; the ratios are per round,
then their median.

  pty       the real `tuiprof PATH` in a pseudo-terminal (80x24 by default, as over SSH;
            --size 120x40), xterm-256color; the clock stops when the headline's text
            ("… ms per step") first appears in what it writes to the terminal, escape sequences
            stripped. This is what a user sees. Cold: an empty summary cache (the converter
            runs); warm: a second open of the same session.
  minimal   a one-widget Textual app (a Static with "21.3 ms per step") in the same pty: the
            floor any Textual app pays here.
  floor     the analysis alone, as the TUI's launcher runs it beside Textual (`python -m
            tui_prof.profiles.prefetch PATH`, empty cache): a cold first screen cannot show
            numbers before these exist.
  headless  (with --headless) the same app under Textual's headless driver (App.run_test) in a
            fresh process, cold and warm, and when its first frame came.
Also load_summary() served from the cache, in-process (the analysis step of a second open).
Every process may cache its bytecode (a private PYTHONPYCACHEPREFIX, filled by the unmeasured
first round), as an installed package has it; `--env-bytecode` keeps this environment's setting
(with PYTHONDONTWRITEBYTECODE, tuiprof's modules are compiled anew in every run while Textual's
come precompiled).
Aims: cold/minimal <= 1.5; < 100 ms for a cached load_summary.

    python benchmarks/bench_startup.py [LOGDIR] [--runs 9] [--size 80x24]
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


def pty_time_to_text(
    cmd: list[str], env: dict[str, str], timeout: float = 60.0, size: tuple[int, int] = (80, 24)
) -> float:
    """Seconds from spawn until any HEADLINE_MARKS shows in the terminal output; the child is then ended."""
    master, slave = os.openpty()
    cols, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
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
            # Only the new bytes (and a tail, for a sequence or a mark split between reads) are
            # searched: the harness shares the CPU with what it times, so it must stay cheap.
            window = buf[-512:] + chunk
            buf += chunk
            plain = ANSI.sub(b"", window)
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


def floor_time(path: Path, env: dict[str, str]) -> float:
    """The first session's analysis alone, as the launcher's child process runs it (empty cache)."""
    t = time.perf_counter()
    subprocess.run(
        [PYTHON, "-m", "tui_prof.profiles.prefetch", str(path)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=300,
    )
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = SHARED_GPU.parents[3] if SHARED_GPU.exists() else SAMPLE
    ap.add_argument("path", nargs="?", type=Path, default=default, help="what `tuiprof PATH` opens")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--size", default="80x24", help="terminal COLSxROWS (default 80x24)")
    ap.add_argument("--headless", action="store_true", help="also time App.run_test (slower)")
    ap.add_argument(
        "--env-bytecode",
        action="store_true",
        help="keep this environment's bytecode settings (e.g. PYTHONDONTWRITEBYTECODE)",
    )
    ap.add_argument(
        "--before",
        type=Path,
        metavar="TREE",
        help="also time cold and warm starts from this checkout (e.g. a `git worktree` of an "
        "earlier commit), in the same rounds",
    )
    args = ap.parse_args()
    preflight("textual")
    path = args.path.resolve()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    print(f"opening: {path} in {cols}x{rows}", file=sys.stderr)
    base_env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS=str(cols),
        LINES=str(rows),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    base_env.pop("NO_COLOR", None)
    pyc = tempfile.TemporaryDirectory(prefix="tuiprof-bench-pyc-")
    if not args.env_bytecode:
        base_env["PYTHONPYCACHEPREFIX"] = pyc.name
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    names = ["minimal_textual_pty", "pty_cold", "pty_warm", "floor_analysis"]
    if args.before:
        names += ["pty_cold_before", "pty_warm_before"]
    if args.headless:
        names += ["headless_cold", "headless_warm", "headless_first_frame_cold"]
    results: dict[str, list[float]] = {k: [] for k in names}
    ratios: dict[str, list[float]] = {"cold": [], "warm": [], "floor": []}
    if args.before:
        ratios.update({"cold_before": [], "warm_before": []})
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
        pty_time_to_text([PYTHON, "-c", MINIMAL_APP], base_env, size=(cols, rows))
        pty_time_to_text(tuiprof_cmd(str(path)), warm_env, size=(cols, rows))
        before_env = dict(base_env, PYTHONPATH=str(args.before.resolve())) if args.before else {}
        before_warm = dict(before_env, TUIPROF_CACHE_DIR=os.path.join(tmp, "warm_before"))
        if args.before:
            pty_time_to_text(tuiprof_cmd(str(path)), before_warm, size=(cols, rows))
        for i in range(args.runs):
            cold_env = dict(base_env, TUIPROF_CACHE_DIR=os.path.join(tmp, f"cold{i}"))
            floor_env = dict(base_env, TUIPROF_CACHE_DIR=os.path.join(tmp, f"floor{i}"))
            minimal = pty_time_to_text([PYTHON, "-c", MINIMAL_APP], base_env, size=(cols, rows))
            cold = pty_time_to_text(tuiprof_cmd(str(path)), cold_env, size=(cols, rows))
            warm_t = pty_time_to_text(tuiprof_cmd(str(path)), warm_env, size=(cols, rows))
            floor = floor_time(path, floor_env)
            for k, v in zip(names[:4], (minimal, cold, warm_t, floor), strict=True):
                results[k].append(v)
            if minimal == minimal:
                ratios["cold"].append(cold / minimal)
                ratios["warm"].append(warm_t / minimal)
                ratios["floor"].append(floor / minimal)
            if args.before:
                cold_b = pty_time_to_text(
                    tuiprof_cmd(str(path)),
                    dict(before_env, TUIPROF_CACHE_DIR=os.path.join(tmp, f"cold_before{i}")),
                    size=(cols, rows),
                )
                warm_b = pty_time_to_text(tuiprof_cmd(str(path)), before_warm, size=(cols, rows))
                results["pty_cold_before"].append(cold_b)
                results["pty_warm_before"].append(warm_b)
                ratios["cold_before"].append(cold_b / minimal)
                ratios["warm_before"].append(warm_b / minimal)
            if args.headless:
                hc = headless_time(path, dict(base_env, TUIPROF_CACHE_DIR=f"{tmp}/hcold{i}"))
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
    ratio_stats = {}
    for k, v in ratios.items():
        ok = [r for r in v if r == r]
        if ok:
            ratio_stats[k] = {"median": statistics.median(ok), "min": min(ok), "max": max(ok)}
            print(
                f"{k + ' / minimal':<28} median {statistics.median(ok):7.2f}x  "
                f"(per round {min(ok):.2f}-{max(ok):.2f}, n={len(ok)})"
            )
    print(
        f"{'load_summary from cache':<28} median {cached['median_s'] * 1000:7.1f} ms  "
        f"(first call in a process {cached['first_call_s'] * 1000:.1f} ms, imports {cached['imports_s'] * 1000:.0f} ms)"
    )
    print("aims: cold / minimal <= 1.5x; cached analysis < 100 ms")
    write_result(
        "startup",
        {
            "path": str(path),
            "size": f"{cols}x{rows}",
            "series": stats,
            "ratios": ratio_stats,
            "cached_load_summary": cached,
            "bytecode_cached": not args.env_bytecode,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
