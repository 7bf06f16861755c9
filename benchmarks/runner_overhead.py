"""Runner overhead per run: the same trivial command launched directly vs through tuiprof's runner.

    python benchmarks/runner_overhead.py [--runs 100] [--json]

"Direct" is Popen + wait, one after another. "Via tuiprof" is the full cost of a run in an
experiment: planning, the store's transactions (SQLite WAL, synchronous=FULL), the per-run
directory and files, launching in a new session, following log and metrics, fingerprinting and
recording; it is the time between consecutive runs' completions. Overhead per run is the
difference of the medians. Aim: under max(2 % of the run, 50 ms).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tui_prof.experiments import events as ev  # noqa: E402
from tui_prof.experiments.runner import Runner  # noqa: E402
from tui_prof.experiments.spec import load_spec  # noqa: E402
from tui_prof.experiments.store import load_experiment  # noqa: E402

COMMANDS = {
    "true": ["true"],
    "python -c pass": [sys.executable, "-c", "pass"],
}


def direct(cmd: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).wait()
        times.append(time.perf_counter() - t0)
    return times


def via_tuiprof(cmd: list[str], runs: int, tmp: Path) -> tuple[list[float], list[float]]:
    """(time between consecutive runs' completions, tuiprof's own wall_time_s of each run)."""
    spec_path = tmp / f"spec-{len(list(tmp.iterdir()))}.toml"
    spec_path.write_text(f'name = "overhead"\ncommand = {json.dumps(cmd)}\nrepeats = {runs}\n')
    ends: list[float] = []
    lock = threading.Lock()

    def on_event(e: object) -> None:
        if isinstance(e, (ev.ExperimentStarted, ev.RunFinished, ev.RunFailed)):
            with lock:
                ends.append(time.perf_counter())

    runner = Runner.create(
        load_spec(spec_path), tmp / spec_path.stem, on_event=on_event, profiler_ports=True
    )
    runner.start()
    runner.wait()
    exp = load_experiment(runner.experiment_dir)
    assert all(r.status == "finished" for r in exp.runs), [r.error for r in exp.runs]
    gaps = [b - a for a, b in itertools.pairwise(ends)]
    return gaps, [r.wall_time_s or 0.0 for r in exp.runs]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-") as d:
        for label, cmd in COMMANDS.items():
            direct(cmd, 5)  # warm caches
            d_times = direct(cmd, args.runs)
            gaps, walls = via_tuiprof(cmd, args.runs, Path(d))
            med_direct, med_via = statistics.median(d_times), statistics.median(gaps)
            overhead = med_via - med_direct
            budget = max(0.02 * med_direct, 0.050)
            results[label] = {
                "runs": args.runs,
                "direct_median_ms": med_direct * 1e3,
                "via_tuiprof_median_ms": med_via * 1e3,
                "overhead_median_ms": overhead * 1e3,
                "overhead_p90_ms": (sorted(gaps)[int(0.9 * len(gaps))] - med_direct) * 1e3,
                "measured_wall_time_median_ms": statistics.median(walls) * 1e3,
                "budget_ms": budget * 1e3,
                "within_budget": overhead <= budget,
            }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"{'command':<16} {'direct':>9} {'tuiprof':>9} {'overhead':>9} {'p90':>9} {'wall_time_s':>12}  aim"
    )
    for label, r in results.items():
        print(
            f"{label:<16} {r['direct_median_ms']:>7.1f}ms {r['via_tuiprof_median_ms']:>7.1f}ms "
            f"{r['overhead_median_ms']:>7.1f}ms {r['overhead_p90_ms']:>7.1f}ms "
            f"{r['measured_wall_time_median_ms']:>10.1f}ms  "
            f"{'ok' if r['within_budget'] else 'MISSED'} (< {r['budget_ms']:.0f} ms)"
        )
    print(
        f"medians over {args.runs} runs each; 'wall_time_s' is what tuiprof records for the run itself"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
