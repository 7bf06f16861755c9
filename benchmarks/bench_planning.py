"""Time to the first run: `tuiprof run` of the largest experiment allowed vs of a one-run one.

    python benchmarks/bench_planning.py [--runs 7]

Whole processes, alternating: `tuiprof run SPEC --headless` whose job writes the wall-clock time
it started (`date +%s.%N`; not tuiprof's own progress lines, which are printed 4 times a second),
from process start until the first job started, then SIGTERM (the runner stops its runs). One
spec has 1 run; the other spec.MAX_RUNS runs (10 variants × MAX_RUNS/10 repeats), which
tuiprof plans, stores and announces before its first run starts. The ratio is what planning
the largest allowed experiment costs; aim: it starts "at once" (well under a second more).
Before planning was made cheap, 100,000 repeats took 13.6 s to their first run, and a count
of 1,000,000,000 grew memory until the machine gave out (now refused: see spec.MAX_*).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LOAD_AT_START, PYTHON, preflight, tuiprof_cmd, write_result

from tui_prof.experiments.spec import MAX_RUNS


def _spec(directory: Path, name: str, variants: int, repeats: int) -> Path:
    p = directory / f"{name}.toml"
    body = "".join(f"[variants.v{i}]\n" for i in range(variants))
    job = 'date +%s.%N >> "$TUIPROF_EXPERIMENT_DIR/started"'
    p.write_text(f'name = "{name}"\ncommand = ["sh", "-c", {job!r}]\nrepeats = {repeats}\n{body}')
    return p


def first_run_s(spec: Path, out: Path, env: dict[str, str]) -> float:
    """Seconds from spawning `tuiprof run` to its first job's start; then it is stopped."""
    marks = out / "started"
    start = time.time()
    proc = subprocess.Popen(
        [*tuiprof_cmd("run", str(spec), "--headless", "--output", str(out))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (marks.exists() and marks.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(60)
    return float(marks.read_text().split()[0]) - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    preflight()
    series: dict[str, list[float]] = {"one_run": [], f"max_runs_{MAX_RUNS}": []}
    with (
        tempfile.TemporaryDirectory(prefix="tuiprof-bench-plan-") as tmp,
        tempfile.TemporaryDirectory(prefix="tuiprof-bench-pyc-") as pyc,
    ):
        d = Path(tmp)
        specs = {
            "one_run": _spec(d, "one", 1, 1),
            f"max_runs_{MAX_RUNS}": _spec(d, "most", 10, MAX_RUNS // 10),
        }
        env = {**os.environ, "PYTHONPYCACHEPREFIX": pyc}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for i in range(args.runs + 1):  # the first round only warms caches and bytecode
            for name, spec in specs.items():
                s = first_run_s(spec, d / f"{name}-{i}", env)
                if i:
                    series[name].append(s)
                    print(f"  run {i}/{args.runs} {name}: {s * 1000:.0f} ms", file=sys.stderr)
    import statistics

    med = {k: statistics.median(v) for k, v in series.items()}
    r = med[f"max_runs_{MAX_RUNS}"] / med["one_run"]
    for k, v in series.items():
        print(
            f"{k:<20} median {med[k] * 1000:6.0f} ms (min {min(v) * 1000:.0f}, max "
            f"{max(v) * 1000:.0f}, n={len(v)})"
        )
    print(
        f"{MAX_RUNS} runs / 1 run, time to the first run: {r:.2f}x; "
        f"load average {LOAD_AT_START} at start, {os.getloadavg()} at end ({PYTHON})"
    )
    write_result("planning", {"series_s": series, "median_s": med, "ratio": r})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
