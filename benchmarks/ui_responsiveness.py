"""How responsive the TUI stays while four experiment runs stream output.

    python benchmarks/ui_responsiveness.py [--seconds 10] [--lines-per-s 2000] [--rounds 2]

Each phase is a fresh Python process running the real app headless (`App.run_test`, 120×40) on an
empty directory. It starts one experiment of 4 runs at once through the app's own start path,
`TuiprofApp._start(StartRequest(spec, parallel=4))` (what the `r` dialog's Start calls, with
`parallel` set), so runner events reach the Experiments screen exactly as in use. Each run is a
`python -c` job that prints LINES_PER_S lines a second for SECONDS seconds ("streams"), or the same
job printing nothing ("idle", the baseline). Phases alternate idle, streams, idle, streams, …

Measured while all four runs are running (from the last start to the first end, as the store
records them):
- lag: a `set_interval(0.05)` on the Experiments screen without a callback, so each tick is a
  Timer event in that screen's own message queue, behind the runner's messages; lag is when it is
  handled minus the tick's ideal time (Textual's own `event.time`);
- key round-trip: `pilot.press("down"/"up")` every 0.5 s with the run table focused, from the press
  until the table's cursor row changed;
- freshness: every 0.25 s, now minus the timestamp printed in the log widget's last line.
Over the whole experiment: lines the jobs wrote (their log files), lines that reached the screen in
RunOutput events, lines the runner folded into "[tuiprof: N lines not shown …]", and lines written
to the log widget (only the selected run is shown; a cursor move rewrites that run's tail).

The probes are a subclass of the Experiments screen that adds a Timer handler and counts lines
passed to `_append`; the screen's code runs unchanged. Aim: p95 lag < 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import PYTHON, REPO, preflight, write_result

JOB = r"""
import os, sys, time
rate, secs = int(sys.argv[1]), float(sys.argv[2])
tag, pad, n, t0 = os.environ.get("TUIPROF_REPEAT", "?"), "x" * 40, 0, time.time()
while (now := time.time()) - t0 < secs:
    due = int((now - t0) * rate)
    lines = []
    while n < due:
        n += 1
        lines.append(f"run {tag} line {n} t={time.time():.4f} {pad}\n")
    if lines:
        sys.stdout.write("".join(lines))
        sys.stdout.flush()
    time.sleep(0.01)
"""
TICK_S = 0.05
RUNS = 4


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else float("nan")


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_ms": statistics.median(values) * 1000 if values else float("nan"),
        "p95_ms": pct(values, 0.95) * 1000,
        "max_ms": max(values) * 1000 if values else float("nan"),
    }


async def phase(mode: str, seconds: float, rate: int) -> dict[str, Any]:
    """One experiment of 4 concurrent runs in a headless app; returns the probes' samples."""
    from rich.text import Text
    from textual import events
    from textual._time import get_time
    from textual.widgets import RichLog

    from tui_prof.experiments.spec import load_spec
    from tui_prof.experiments.store import load_experiment
    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.screens.experiments import ExperimentsScreen
    from tui_prof.tui.screens.start_dialog import StartRequest
    from tui_prof.tui.widgets.run_table import RunTable

    wall_offset = time.time() - get_time()  # Textual's clock -> wall clock (the store's)

    class ProbedExperiments(ExperimentsScreen):
        """The real screen plus probes: Timer events in its queue, and lines handed to the log."""

        ticks: list[tuple[float, float]] = []
        delivered = 0
        folded = 0

        def on_timer(self, event: events.Timer) -> None:
            if event.timer.name == "lag-probe":
                self.ticks.append((event.time + wall_offset, get_time() - event.time))

        def _append(self, run_id: str, lines: list[str]) -> None:
            for line in lines:
                if line.startswith("[tuiprof: ") and " lines not shown" in line:
                    self.folded += int(line.split()[1])
                else:
                    self.delivered += 1
            super()._append(run_id, lines)

    tmp = Path(tempfile.mkdtemp(prefix="tuiprof-ui-bench-"))
    spec_path = tmp / "spec.toml"
    argv = [PYTHON, "-c", JOB, str(rate if mode == "streams" else 0), str(seconds)]
    spec_path.write_text(
        f'name = "ui-{mode}"\ncommand = {json.dumps(argv)}\nrepeats = {RUNS}\n'
        f'output = "{tmp / "out"}"\n'
    )
    spec = load_spec(spec_path)
    app = TuiprofApp(tmp)
    keys: list[float] = []
    fresh: list[tuple[float, float]] = []
    written = 0
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        screen = ProbedExperiments(tmp)
        app.install_screen(screen, "experiments")  # app.view("experiments") finds it
        app._start(StartRequest(spec, parallel=RUNS))
        runner = next(iter(app.runners.values()))
        while not screen.is_mounted:
            await asyncio.sleep(0.01)
        screen.set_interval(TICK_S, name="lag-probe")
        log = screen.query_one("#run-log", RichLog)
        write = log.write

        def counting_write(content: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal written
            written += (content.plain if isinstance(content, Text) else str(content)).count(
                "\n"
            ) + 1
            return write(content, *args, **kwargs)

        log.write = counting_write  # type: ignore[method-assign]
        table = screen.query_one(RunTable)
        table.focus()
        next_key = next_fresh = time.time() + 0.5
        step = 1
        while not runner.done:
            now = time.time()
            if now >= next_fresh:
                next_fresh = now + 0.25
                if log.lines and " t=" in (text := log.lines[-1].text):
                    fresh.append((now, now - float(text.split(" t=")[1].split()[0])))
            if now >= next_key and table.row_count == RUNS:
                next_key = now + 0.5
                if table.cursor_row in (0, RUNS - 1):  # walk down the rows, then back up
                    step = 1 if table.cursor_row == 0 else -1
                key = "down" if step > 0 else "up"
                before, t0 = table.cursor_row, time.perf_counter()
                press = asyncio.create_task(pilot.press(key))
                while table.cursor_row == before and time.perf_counter() - t0 < 10:
                    await asyncio.sleep(0.001)
                keys.append((time.time(), time.perf_counter() - t0))  # type: ignore[arg-type]
                await press
            await asyncio.sleep(0.01)
        await pilot.pause(0.5)
    record = load_experiment(runner.experiment_dir)
    starts = [r.started_at for r in record.runs if r.started_at]
    ends = [r.ended_at for r in record.runs if r.ended_at]
    lo, hi = max(starts), min(ends)
    produced = sum(Path(r.log_path).read_bytes().count(b"\n") for r in record.runs)

    def within(samples: list[tuple[float, float]]) -> list[float]:
        return [v for t, v in samples if lo <= t <= hi]

    return {
        "mode": mode,
        "statuses": [r.status for r in record.runs],
        "window_s": hi - lo,
        "experiment_dir": str(runner.experiment_dir),
        "lag": summary_ms(within(screen.ticks)),
        "lag_whole": summary_ms([v for _, v in screen.ticks]),
        "key_round_trip": summary_ms(within(keys)),  # type: ignore[arg-type]
        "freshness": summary_ms(within(fresh)),
        "lines_produced": produced,
        "lines_delivered": screen.delivered,
        "lines_folded_by_runner": screen.folded,
        "log_widget_lines": written,
    }


def run_phase(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        PYTHON,
        __file__,
        "--child",
        mode,
        "--seconds",
        str(args.seconds),
        "--lines-per-s",
        str(args.lines_per_s),
    ]
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=args.seconds + 120)
    if out.returncode != 0:
        sys.exit(f"{mode} phase failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["loadavg_1m_before"] = load
    return result


def fmt(label: str, s: dict[str, float]) -> str:
    return (
        f"  {label:<22} median {s['median_ms']:7.1f} ms   p95 {s['p95_ms']:7.1f} ms   "
        f"max {s['max_ms']:7.1f} ms   (n={s['n']})"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="how long each job runs")
    p.add_argument(
        "--lines-per-s", type=int, default=2000, help="lines each streaming job prints a second"
    )
    p.add_argument("--rounds", type=int, default=2, help="pairs of (idle, streams) phases")
    p.add_argument("--child", choices=("idle", "streams"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(phase(args.child, args.seconds, args.lines_per_s))))
        return 0
    preflight("textual")
    phases = []
    for i in range(args.rounds):
        for mode in ("idle", "streams"):
            r = run_phase(mode, args)
            phases.append(r)
            print(
                f"round {i + 1} {mode}: load {r['loadavg_1m_before']:.2f}, all 4 running for "
                f"{r['window_s']:.1f} s, statuses {sorted(set(r['statuses']))}"
            )
            print(fmt("lag (screen queue)", r["lag"]))
            print(fmt("lag (whole experiment)", r["lag_whole"]))
            print(fmt("key round-trip", r["key_round_trip"]))
            if mode == "streams":
                print(fmt("log freshness", r["freshness"]))
                print(
                    f"  lines: produced {r['lines_produced']}, reached the screen {r['lines_delivered']}, "
                    f"folded by the runner {r['lines_folded_by_runner']}, "
                    f"lines written to the log widget {r['log_widget_lines']}"
                )
            sys.stdout.flush()
    worst = max(r["lag"]["p95_ms"] for r in phases if r["mode"] == "streams")
    print(
        f"worst p95 lag with 4 streams: {worst:.1f} ms (aim < 100 ms: {'met' if worst < 100 else 'MISSED'})"
    )
    write_result(
        "ui_responsiveness",
        {
            "seconds": args.seconds,
            "lines_per_s": args.lines_per_s,
            "runs": RUNS,
            "tick_s": TICK_S,
            "phases": phases,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
