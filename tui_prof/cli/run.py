"""`tuiprof run SPEC` or `tuiprof run --variant NAME='COMMAND' …`: run an experiment (or
`--resume` one) with a live table of its runs.

Contract for scripts: progress goes to stderr, a summary to stdout, and the last line of stdout
is the experiment directory, which holds the spec it ran as `spec.toml`. Exit status 0 when every
run finished, 1 when any failed, timed out or was stopped (after running the rest), 2 for a bad
spec or directory or a cluster that is not there (one line, before anything starts), 130 on
Ctrl+C. Without a terminal on stderr (or with --headless) progress is one plain line per event.
The same holds with `--backend ray --ray-address HOST:PORT`; there SIGTERM and SIGHUP (a lost
SSH session) leave the submitted runs going on the cluster (`--resume` reattaches), Ctrl+C
cancels them there.
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import sys
import threading
import time
from typing import Any

from tui_prof.experiments import events as ev
from tui_prof.experiments.noise import noise_reasons
from tui_prof.model import RUN_FINISHED, RUN_PENDING, RUN_QUEUED, RUN_RUNNING, RunRecord
from tui_prof.printable import printable


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run an experiment: every variant, repeated, into an experiment directory",
        description="Run the variants of an experiment spec (TOML), or variants given as "
        "commands, repeatedly, interleaved, and record every run in an experiment directory "
        "(printed on the last line; it holds the spec as spec.toml).",
        epilog="Example: tuiprof run --variant fp32='python train.py --precision float32' "
        "--variant mixed='python train.py --precision mixed' --repeats 5. Commands are split "
        "into words like a shell does (quotes, backslashes) but never run by a shell; leading "
        "VAR=value words set the variant's environment; ${TUIPROF_REPEAT} is replaced by the "
        "repeat number (quote it: '...--seed ${TUIPROF_REPEAT}').",
    )
    p.add_argument("spec", nargs="?", help="experiment spec (TOML)")
    p.add_argument(
        "--variant",
        action="append",
        metavar="NAME=COMMAND",
        help="a variant as a command (repeatable; the first is the baseline unless --baseline)",
    )
    p.add_argument("--name", metavar="X", help="the experiment's name (with --variant)")
    p.add_argument(
        "--baseline", metavar="NAME", help="the variant the others are compared with (--variant)"
    )
    p.add_argument(
        "--repeats",
        type=int,
        metavar="N",
        help="counted runs per variant, 1 to 1000 (overrides the spec)",
    )
    p.add_argument("--variants", metavar="A,B", help="run only these variants (comma-separated)")
    p.add_argument(
        "--min-difference",
        metavar="PCT|METRIC=PCT,…",
        help="the smallest difference that matters, in percent, kept with the experiment for "
        "its comparison: 5 (every metric) or wall_time_s=5,accuracy=0.5 (default: the spec's "
        "min_difference_pct, else 5%% for times)",
    )
    p.add_argument("--warmup", type=int, metavar="N", help="warm-up runs per variant (not counted)")
    p.add_argument(
        "--output",
        metavar="DIR",
        help="the experiment directory to create (default: <spec's output>/<name>-<date>-<time>)",
    )
    p.add_argument(
        "--resume",
        metavar="EXPERIMENT_DIR",
        help="run what an earlier, interrupted experiment did not finish (refused while another "
        "tuiprof runs it)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=None,
        metavar="N",
        help="runs at the same time, 1 to 64 (default 1: timings are only comparable one at a "
        "time; on a cluster, as many as its nodes fit)",
    )
    p.add_argument(
        "--no-profiler-port",
        action="store_true",
        help="do not give jobs a TUIPROF_PROFILER_PORT (no profiler server, no live capture)",
    )
    p.add_argument("--headless", action="store_true", help="plain progress lines, no live table")
    ray = p.add_argument_group(
        "cluster",
        "Run on a Ray cluster instead of this machine (pip install 'tuiprof[ray]'): each run is "
        "a Ray job (or, with --ray-mode actors, a process a warm agent per node starts) that goes "
        "on if tuiprof exits; --resume reattaches. Also [backend] in a spec.",
    )
    ray.add_argument(
        "--backend",
        choices=("local", "ray"),
        help="where runs execute (default: the spec's, else local)",
    )
    ray.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="the Ray cluster's dashboard (Jobs API) address (default: the spec's, $RAY_ADDRESS, or 127.0.0.1:8265)",
    )
    ray.add_argument(
        "--gpus-per-run",
        type=float,
        metavar="N",
        help="GPUs each run gets (Ray sets CUDA_VISIBLE_DEVICES)",
    )
    ray.add_argument(
        "--cpus-per-run", type=float, metavar="N", help="CPUs each run reserves (default 1)"
    )
    ray.add_argument(
        "--accelerator-type",
        metavar="MODEL",
        help="run every run on this GPU model, e.g. H100 (Ray's accelerator_type)",
    )
    ray.add_argument(
        "--ray-mode",
        choices=("jobs", "actors"),
        help="jobs (default): a Ray job per run, seconds each; actors: a warm agent per node "
        "starts each run in a fraction of a second, but tuiprof joins the cluster (docs/ray.md)",
    )
    p.set_defaults(func=run_command)


def _fail(msg: str) -> int:
    print(f"tuiprof run: {printable(msg)}", file=sys.stderr)
    return 2


def _spec_from_args(args: argparse.Namespace) -> Any:
    """The spec of a new experiment: from --variant commands, or the SPEC file."""
    from tui_prof.experiments.commands import spec_from_commands
    from tui_prof.experiments.spec import load_spec, select

    if args.variant:
        if args.spec or args.variants:
            raise ValueError("--variant takes no SPEC or --variants (the variants are given)")
        return spec_from_commands(
            args.variant,
            name=args.name,
            repeats=3 if args.repeats is None else args.repeats,
            warmup=args.warmup or 0,
            baseline=args.baseline,
        )
    if args.name or args.baseline:
        raise ValueError("--name and --baseline go with --variant (a SPEC file names its own)")
    if not args.spec:
        raise ValueError("give a SPEC file, --variant NAME=COMMAND, or --resume EXPERIMENT_DIR")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants else None
    return select(load_spec(args.spec), variants, args.repeats, args.warmup)


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "kind": args.backend,
        "address": args.ray_address,
        "gpus_per_run": args.gpus_per_run,
        "cpus_per_run": args.cpus_per_run,
        "accelerator_type": args.accelerator_type,
        "mode": args.ray_mode,
    }


def _make_runner(args: argparse.Namespace, on_event: Any) -> Any:
    from dataclasses import replace

    from tui_prof.experiments.backend_spec import with_options
    from tui_prof.experiments.commands import SPEC_FILE, save_spec
    from tui_prof.experiments.runner import Runner
    from tui_prof.experiments.spec import SpecError, parse_min_difference

    options = _backend_options(args)
    given = parse_min_difference(args.min_difference) if args.min_difference else None
    if args.resume:
        if args.spec or args.variants or args.warmup is not None or args.output or args.variant:
            raise ValueError("--resume takes no SPEC, --variant, --variants, --warmup or --output")
        override = None
        if any(v is not None for v in options.values()):
            from tui_prof.experiments.store import StoreError, load_spec_from

            try:
                stored = load_spec_from(args.resume).backend
            except Exception:  # the resume below says what is wrong with it
                raise StoreError(f"{args.resume}: not a tuiprof experiment") from None
            override = with_options(stored, **options)
        resumed = Runner.resume(
            args.resume,
            repeats=args.repeats,
            on_event=on_event,
            parallel=args.parallel,
            profiler_ports=not args.no_profiler_port,
            backend_spec=override,
        )
        if given:
            spec = resumed.store.spec
            matters = {**spec.min_difference_pct, **given}
            resumed.store.set_spec(replace(spec, min_difference_pct=matters))
        if resumed.recovered:
            print(
                f"tuiprof run: recorded {', '.join(resumed.recovered)}: finished while the store "
                "did not answer, kept on disk until now",
                file=sys.stderr,
            )
        if stopped := resumed.store.stopped_orphans:
            print(
                f"tuiprof run: stopped {', '.join(stopped)}, still running after its tuiprof "
                "had gone; running it again",
                file=sys.stderr,
            )
        return resumed
    spec = _spec_from_args(args)
    spec = replace(spec, backend=with_options(spec.backend, **options))
    if given:
        spec = replace(spec, min_difference_pct={**spec.min_difference_pct, **given})
    runner = Runner.create(
        spec,
        args.output,
        on_event=on_event,
        parallel=args.parallel,
        profiler_ports=not args.no_profiler_port,
    )
    try:
        save_spec(spec, runner.experiment_dir / SPEC_FILE)  # for people and `tuiprof run` again
    except SpecError as exc:  # the store has the spec too: say so and run
        print(f"tuiprof run: warning: {printable(str(exc))}", file=sys.stderr)
    return runner


class _Board:
    """The runs as the events describe them, for the live table and the plain lines."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, RunRecord] = {}
        self.started: dict[str, float] = {}
        self.progress: dict[str, str] = {}
        self.metrics: dict[str, dict[str, float]] = {}
        self.lines: list[str] = []  # plain progress lines not printed yet
        self.version = 0  # bumped by every event: the live table is redrawn only when it moved

    def _pos(self, run_id: str) -> str:
        ids = list(self.runs)
        return f"[{ids.index(run_id) + 1}/{len(ids)}]" if run_id in self.runs else ""

    def on_event(self, e: Any) -> None:
        with self.lock:
            self.version += 1
            if isinstance(e, ev.ExperimentStarted):
                self.runs = {r.run_id: r for r in e.runs if r.status != RUN_FINISHED}
                self.lines.append(f"experiment {e.experiment_dir}: {len(self.runs)} runs to go")
            elif isinstance(e, ev.RunQueued):
                self.runs[e.run_id] = e.run
                where = f" for {e.run.node}" if e.run.node else ""
                self.lines.append(f"{self._pos(e.run_id)} {e.run_id} queued{where}")
            elif isinstance(e, ev.RunStarted):
                self.runs[e.run_id] = e.run
                self.started[e.run_id] = time.monotonic()
                where = f" on {e.run.node}" if e.run.node else ""
                self.lines.append(f"{self._pos(e.run_id)} {e.run_id} started{where}")
            elif isinstance(e, ev.RunProgress):
                self.progress[e.run_id] = e.progress
                self.metrics[e.run_id] = e.metrics
            elif isinstance(e, (ev.RunFinished, ev.RunFailed)):
                r = e.run
                self.runs[r.run_id] = r
                wall = f" in {r.wall_time_s:.2f} s" if r.wall_time_s is not None else ""
                shown = {k: v for k, v in r.metrics.items() if k != "wall_time_s"}
                ms = (
                    "  " + " ".join(f"{k}={v:.4g}" for k, v in list(shown.items())[:6])
                    if shown
                    else ""
                )
                why = f" ({r.error})" if r.error else ""
                noise = noise_reasons(r.environment.get("machine_state"))
                why += f" [⚠ {'; '.join(noise)}]" if noise else ""
                self.lines.append(f"{self._pos(r.run_id)} {r.run_id} {r.status}{wall}{why}{ms}")

    def take_lines(self) -> list[str]:
        with self.lock:
            out, self.lines = self.lines, []
        return out

    def table(
        self, title: str, metrics: tuple[str, ...], max_rows: int, nodes: bool = False
    ) -> Any:
        from rich.table import Table
        from rich.text import Text

        from tui_prof.render.status import status_text

        with self.lock:
            runs = list(self.runs.values())
            now = time.monotonic()
            done = sum(r.status not in (RUN_PENDING, RUN_QUEUED, RUN_RUNNING) for r in runs)
            t = Table(
                box=None,
                pad_edge=False,
                header_style="bold",
                title_justify="left",
                title=f"{title}: {done}/{len(runs)} runs done",
                title_style="bold",
            )
            where = ("node",) if nodes else ()
            for col in ("run", "status", *where, "elapsed", "progress", *metrics):
                t.add_column(col, justify="right" if col in ("elapsed", *metrics) else "left")
            if len(runs) > max_rows:  # keep the running ones and their neighbours in view
                first = next(
                    (
                        i
                        for i, r in enumerate(runs)
                        if r.status in (RUN_RUNNING, RUN_QUEUED, RUN_PENDING)
                    ),
                    len(runs),
                )
                start = max(0, min(first - max_rows // 3, len(runs) - max_rows))
                runs = runs[start : start + max_rows]
            for r in runs:
                if r.wall_time_s is not None:
                    elapsed = f"{r.wall_time_s:.1f} s"
                elif r.run_id in self.started:  # whole seconds: one redraw a second
                    elapsed = f"{now - self.started[r.run_id]:.0f} s"
                else:
                    elapsed = ""
                vals = r.metrics or self.metrics.get(r.run_id, {})
                cells = [_cell(vals, m) for m in metrics]
                t.add_row(
                    Text(r.run_id),
                    status_text(r.status),
                    *([Text(r.node)] if nodes else []),
                    elapsed,
                    Text(r.progress or self.progress.get(r.run_id, "")),
                    *cells,
                )
            return t


def _cell(values: dict[str, float], metric: str) -> str:
    """A metric's value, or a distribution's median (`latency_ms` -> `latency_ms:p50`)."""
    for key in (metric, f"{metric}:p50"):
        if key in values:
            return f"{values[key]:.4g}"
    return ""


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class _Detached(BaseException):
    """SIGTERM or SIGHUP with a cluster's runs in flight: leave them going."""


def _detach(signum: int, frame: Any) -> None:
    raise _Detached


def _wait(runner: Any, tick: Any) -> bool:
    """Wait for the end, calling tick() a few times a second; False if interrupted by Ctrl+C."""
    try:
        while not runner.wait(0.25):
            tick()
        tick()
        return True
    except KeyboardInterrupt:
        print("tuiprof run: stopping the runs (Ctrl+C again to leave them)…", file=sys.stderr)
        runner.stop_all()
        try:
            while not runner.wait(0.25):
                tick()
        except KeyboardInterrupt:
            pass
        tick()
        return False


def run_command(args: argparse.Namespace) -> int:
    from tui_prof.experiments.backends import BackendError
    from tui_prof.experiments.spec import SpecError
    from tui_prof.experiments.store import StoreError
    from tui_prof.render.console import SafeConsole as Console

    board = _Board()
    try:
        runner = _make_runner(args, board.on_event)
    except (SpecError, StoreError, BackendError, ValueError) as exc:
        return _fail(str(exc))
    except (OSError, sqlite3.Error) as exc:  # a full disk or an unwritable place, before any run
        where = args.resume or args.output or "the experiment directory"
        return _fail(f"{where}: cannot write ({getattr(exc, 'strerror', None) or exc})")
    console = Console(stderr=True)
    remote = runner.backend.remote
    if threading.current_thread() is threading.main_thread():
        # A killed `tuiprof run` stops its local runs first; a cluster's runs outlive it.
        signal.signal(signal.SIGTERM, _detach if remote else _terminated)
        if remote:
            signal.signal(signal.SIGHUP, _detach)
    try:
        return _run_and_report(args, runner, board, console)
    except _Detached:
        runner.backend.close()
        print(
            f"tuiprof run: left the submitted runs going on the cluster; reattach with "
            f"tuiprof run --resume {runner.experiment_dir}",
            file=sys.stderr,
        )
        print(runner.experiment_dir, flush=True)
        return 130


def _left(run: RunRecord) -> str:
    """A run's state once its runner is done: one it left running never finished here."""
    return "interrupted" if run.status in (RUN_RUNNING, RUN_QUEUED) else str(run.status)


def _run_and_report(args: argparse.Namespace, runner: Any, board: _Board, console: Any) -> int:
    from tui_prof.experiments.store import load_experiment

    live_ok = not args.headless and console.is_terminal

    def print_lines() -> None:
        for line in board.take_lines():
            print(printable(line), file=sys.stderr, flush=True)

    runner.start()
    if live_ok:
        from rich.live import Live

        metrics = tuple(m for m in runner.spec.metrics if m != "wall_time_s")[:4]
        rows = max(5, console.size.height - 5)
        title = runner.spec.name
        nodes = runner.backend.remote
        # Drawn when an event changed the board or a running run's elapsed second moved, at most
        # four times a second; never on a timer of its own (the observer stays out of the way).
        shown: list[object] = [None]

        def redraw() -> None:
            key = (board.version, int(time.monotonic()))
            if key != shown[0]:
                shown[0] = key
                live.update(board.table(title, metrics, rows, nodes), refresh=True)

        with Live(
            board.table(title, metrics, rows, nodes),
            console=console,
            auto_refresh=False,
            transient=False,
        ) as live:
            completed = _wait(runner, redraw)
    else:
        completed = _wait(runner, print_lines)
    board.take_lines()
    if runner.problem:
        print(f"tuiprof run: {runner.problem}", file=sys.stderr, flush=True)
    record = load_experiment(runner.experiment_dir)
    counted = [r for r in record.runs if not r.is_warmup]
    finished = sum(r.status == RUN_FINISHED for r in counted)
    bad = [r for r in record.runs if r.status not in (RUN_FINISHED, RUN_PENDING)]
    print(
        f"{record.name}: {finished}/{len(counted)} runs finished"
        + ("; not finished: " + ", ".join(f"{r.run_id} ({_left(r)})" for r in bad) if bad else "")
    )
    print(runner.experiment_dir, flush=True)
    if not completed:
        return 130
    return 1 if bad or finished < len(counted) else 0
