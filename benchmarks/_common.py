"""Shared helpers for the benchmark scripts: timed child processes, peak memory, medians, output.

Timing uses only public means: time.perf_counter around a child process; peak memory from GNU
time's %M (maximum resident set size) or, without it, the child's rusage from os.wait4.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # in-process imports of tui_prof work from a plain checkout too
    sys.path.insert(1, str(REPO))
OUT = REPO / "benchmarks" / "out"
SHARED_GPU = (
    REPO.parent
    / "shared"
    / "traces"
    / "tf_gpu_multi_worker"
    / "plugins"
    / "profile"
    / "2020_demo"
    / "34.83.195.179_6003.xplane.pb"
)
SAMPLE = REPO / "sample_traces" / "keras_fit_step_markers"
PYTHON = sys.executable
LOAD_AT_START = os.getloadavg()

# The converter alone, as a user would call it: one process, overview page of one file. It reads
# a symlink in a fresh temporary directory because it writes a cache (ALL_HOSTS.op_stats_v2.pb)
# next to what it reads, which would make later runs on a writable directory warm (tuiprof's
# wrapper does the same).
CONVERTER_ALONE = (
    "import os, sys, tempfile\n"
    "from xprof.convert import raw_to_tool_data as r\n"
    "with tempfile.TemporaryDirectory() as d:\n"
    "    link = os.path.join(d, os.path.basename(sys.argv[1]))\n"
    "    os.symlink(os.path.abspath(sys.argv[1]), link)\n"
    "    data, _ = r.xspace_to_tool_data([link], 'overview_page', {'use_saved_result': False})\n"
    "assert data, 'converter returned nothing'\n"
)
# The same, for the three tools tuiprof reads (what its own conversion costs at least).
CONVERTER_THREE_TOOLS = CONVERTER_ALONE.replace(
    "    data, _ = r.xspace_to_tool_data([link], 'overview_page', {'use_saved_result': False})\n",
    "    for tool in ('overview_page', 'framework_op_stats', 'kernel_stats'):\n"
    "        data, _ = r.xspace_to_tool_data([link], tool, {'use_saved_result': True})\n",
)


def preflight(*modules: str) -> None:
    """Stop with one line when run by an interpreter that lacks what the benchmark times."""
    import importlib.util

    missing = [m for m in ("tui_prof", *modules) if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(
            f"{PYTHON} cannot import {', '.join(missing)}: activate tuiprof's environment "
            "(. .venv/bin/activate) or pip install -e '.[dev,tf]' first"
        )


def default_profile() -> Path:
    """The 3 MB 8-GPU profile where ../shared exists, else a shipped sample."""
    if SHARED_GPU.exists():
        return SHARED_GPU
    return next(SAMPLE.rglob("*.xplane.pb"))


def tuiprof_cmd(*args: str) -> list[str]:
    """The installed `tuiprof` console script next to this interpreter (what a user runs)."""
    script = Path(PYTHON).parent / "tuiprof"
    if script.exists():
        return [str(script), *args]
    return [PYTHON, "-m", "tui_prof.cli", *args]


def quiet_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.update(extra)
    return env


@dataclass
class Sample:
    seconds: float
    peak_rss_mb: float
    rc: int
    cpu_s: float = float("nan")  # user + system of the child and the children it waited for


def run_timed(
    cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600
) -> Sample:
    """Run one child to completion; wall time from just before spawn, and that child's peak RSS.

    Peak RSS comes from GNU time (`/usr/bin/time -f %M`) where installed: the kernel counts a
    forked child's copy of its parent until exec, so the process that forks must be small.
    Without it, os.wait4's ru_maxrss, which can overstate a small child by this script's size.
    """
    timer = Path("/usr/bin/time")
    with (
        tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file,
        tempfile.TemporaryFile() as err_file,
    ):
        full = [str(timer), "-f", "%M", "-o", rss_file.name, *cmd] if timer.exists() else list(cmd)
        start = time.perf_counter()
        proc = subprocess.Popen(full, env=env, stdout=subprocess.DEVNULL, stderr=err_file, cwd=REPO)
        deadline = start + timeout
        while True:  # wait4, not wait: it also gives the child's own rusage
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
        lines = rss_file.read().split()
    rss_kb = (
        float(lines[-1]) if timer.exists() and lines and lines[-1].isdigit() else usage.ru_maxrss
    )
    if proc.returncode != 0:
        print(
            f"  ! {' '.join(map(str, cmd))[:120]} exited {proc.returncode}: {err.strip()[-400:]}",
            file=sys.stderr,
        )
    cpu = usage.ru_utime + usage.ru_stime  # wait4's: the child's and its reaped descendants'
    return Sample(elapsed, rss_kb / 1024, proc.returncode, cpu)


@dataclass
class Series:
    name: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def times(self) -> list[float]:
        return [s.seconds for s in self.samples]

    def stats(self) -> dict[str, float]:
        t = self.times
        rss = [s.peak_rss_mb for s in self.samples]
        return {
            "median_s": statistics.median(t),
            "min_s": min(t),
            "max_s": max(t),
            "runs": len(t),
            "cpu_s_median": statistics.median(s.cpu_s for s in self.samples),
            "peak_rss_mb_median": statistics.median(rss),
            "peak_rss_mb_max": max(rss),
        }


def interleaved(
    commands: dict[str, tuple[list[str], dict[str, str] | None]], runs: int, warmup: int = 1
) -> dict[str, Series]:
    """Run each command `runs` times, alternating, so a busy neighbour slows all of them alike."""
    series = {name: Series(name) for name in commands}
    for _ in range(warmup):  # page cache and .pyc files, not measured
        for cmd, env in commands.values():
            run_timed(cmd, env=env)
    for i in range(runs):
        for name, (cmd, env) in commands.items():
            s = run_timed(cmd, env=env)
            series[name].samples.append(s)
            print(
                f"  run {i + 1}/{runs} {name}: {s.seconds * 1000:.0f} ms, peak {s.peak_rss_mb:.0f} MB",
                file=sys.stderr,
            )
    return series


def ratio(a: Series, b: Series) -> dict[str, float]:
    """a/b: of medians, and the spread of per-round ratios (rounds ran back to back)."""
    per_round = [x / y for x, y in zip(a.times, b.times, strict=False)]
    cpu = [x.cpu_s / y.cpu_s for x, y in zip(a.samples, b.samples, strict=False)]
    return {
        "of_medians": statistics.median(a.times) / statistics.median(b.times),
        "per_round_median": statistics.median(per_round),
        "per_round_min": min(per_round),
        "per_round_max": max(per_round),
        # CPU seconds (user + system, children included): steadier than wall time where other
        # work shares the cores, and blind to what runs in parallel
        "cpu_per_round_median": statistics.median(cpu),
        "cpu_per_round_min": min(cpu),
        "cpu_per_round_max": max(cpu),
    }


def machine() -> dict[str, object]:
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        # Other work on this machine shows here; compare runs only at similar load.
        "loadavg_at_start": LOAD_AT_START,
        "loadavg_at_end": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **git_state(),
    }


def git_state() -> dict[str, object]:
    """Which code was measured: the commit, and the package files that differed from it."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10
            ).stdout.rstrip("\n")
        except (OSError, subprocess.TimeoutExpired):
            return ""

    dirty = [line[3:] for line in git("status", "--porcelain", "--", "tui_prof").splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted_package_files": dirty}


def write_result(name: str, result: dict[str, object]) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **result}, indent=2))
    print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
    return path


def fmt_series(label: str, s: Series) -> str:
    st = s.stats()
    return (
        f"{label:<44} median {st['median_s'] * 1000:8.0f} ms  (min {st['min_s'] * 1000:.0f}, "
        f"max {st['max_s'] * 1000:.0f}, n={st['runs']})  CPU {st['cpu_s_median'] * 1000:.0f} ms  "
        f"peak RSS {st['peak_rss_mb_median']:.0f} MB"
    )
