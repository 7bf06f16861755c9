"""`tuiprof capture HOST:PORT[,HOST:PORT...]`: profile a running job from the terminal.

Contract for scripts: exits 0 after the job wrote a session under LOGDIR/plugins/profile/<session>/
and prints that session directory on its last line; on failure exits non-zero with one line on
stderr saying why. With `--every S`, captures repeatedly and prints one line per capture:
the session directory, a tab, then its average step time and breakdown.

Exit codes: 0 captured; 1 the capture failed (no server, server died, empty, timeout);
2 bad arguments (address, duration); 130 interrupted before any capture finished.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
from pathlib import Path
from typing import Any

from tui_prof.live.capture import (
    CaptureError,
    CaptureResult,
    capture,
    capture_series,
    parse_addresses,
)
from tui_prof.printable import printable


def register(sub: Any) -> None:
    p = sub.add_parser(
        "capture",
        help="capture a profile from a running job's profiler server",
        description=(
            "Ask a job's profiler server (tf.profiler.experimental.server.start(PORT), "
            "jax.profiler.start_server(PORT)) for a trace, as TensorBoard's 'Capture profile' "
            "does. The job writes the session into LOGDIR/plugins/profile/<session>/, so LOGDIR "
            "must be a path both the job and tuiprof can reach (same machine or shared disk)."
        ),
    )
    p.add_argument("address", help="HOST:PORT of the profiler server; several: HOST:PORT,HOST:PORT")
    p.add_argument("--duration-ms", type=int, default=2000, help="trace length (default: 2000)")
    p.add_argument("--logdir", default=".", help="TensorBoard logdir to write into (default: .)")
    p.add_argument(
        "--host-tracer-level",
        type=int,
        choices=range(4),
        default=2,
        help="0 off, 1 user events, 2 + framework ops (default), 3 everything",
    )
    p.add_argument(
        "--device-tracer-level",
        type=int,
        choices=range(4),
        default=1,
        help="0 off, 1 on (default)",
    )
    p.add_argument(
        "--python-tracer-level",
        type=int,
        choices=range(4),
        default=0,
        help="1 traces Python calls (costly; default 0)",
    )
    p.add_argument("--delay-ms", type=int, default=0, help="start tracing this much later")
    p.add_argument(
        "--retries",
        type=int,
        default=3,
        help="ask again this many times when nothing was recorded (default: 3)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up after S seconds (default: enough for connect + trace + retries)",
    )
    p.add_argument(
        "--every",
        type=float,
        default=None,
        metavar="S",
        help="capture every S seconds (start to start) until --count or Ctrl-C",
    )
    p.add_argument(
        "--count", type=int, default=None, metavar="K", help="with --every: stop after K captures"
    )
    p.add_argument(
        "--summary",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print average step time and breakdown per capture (default: on with --every)",
    )
    p.add_argument(
        "--log", default=None, metavar="FILE", help="keep the capture client's own log here"
    )
    p.set_defaults(func=run)


def _err(msg: str) -> None:
    print(f"tuiprof capture: {printable(msg)}", file=sys.stderr)


class _Status:
    """One self-rewriting progress line on a terminal's stderr; silent when piped."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self.shown = False

    def __call__(self, _fraction: float, message: str) -> None:
        if self.live:
            sys.stderr.write(f"\r\033[K{message[:120]}")
            sys.stderr.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False


def summary_text(session_dir: Path) -> str:
    """Average step time and the non-zero breakdown categories of one session, on one line."""
    try:
        from tui_prof.model import CATEGORIES, CATEGORY_LABELS
        from tui_prof.profiles.load import load_summary
        from tui_prof.render.summary import fmt_ms

        s = load_summary(session_dir)
    except Exception as exc:  # a summary is a bonus: never fail the capture over it
        return f"(no summary: {' '.join(str(exc).split())})"
    avg = s.average
    if avg is None:
        return f"no steps found ({s.step_source_detail})"
    sd = f" ± {fmt_ms(avg.step_time_std_ms)}" if avg.step_time_std_ms is not None else ""
    parts = [
        f"{CATEGORY_LABELS[c]} {fmt_ms(avg.breakdown_ms.get(c, 0.0))}"
        for c in CATEGORIES
        if avg.breakdown_ms.get(c, 0.0) > 0.0
    ]
    return f"avg step {fmt_ms(avg.step_time_ms)}{sd} ms over {len(s.steps)} steps: " + ", ".join(
        parts
    )


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "duration_ms": args.duration_ms,
        "host_tracer_level": args.host_tracer_level,
        "device_tracer_level": args.device_tracer_level,
        "python_tracer_level": args.python_tracer_level,
        "delay_ms": args.delay_ms,
        "retries": args.retries,
        "timeout_s": args.timeout,
        "log_path": args.log,
    }


def _validate(args: argparse.Namespace) -> str | None:
    try:
        parse_addresses(args.address)
    except CaptureError as exc:
        return str(exc)
    if args.duration_ms <= 0:
        return f"--duration-ms must be positive, got {args.duration_ms}"
    if args.delay_ms < 0 or args.retries < 0:
        return "--delay-ms and --retries cannot be negative"
    # `not x > 0`, not `x <= 0`: NaN is neither, and must be refused too
    if args.timeout is not None and not (0 < args.timeout < math.inf):
        return f"--timeout must be positive (seconds), got {args.timeout}"
    if args.count is not None and (args.every is None or args.count <= 0):
        return "--count needs --every and must be positive"
    if args.every is not None and not (0 < args.every < math.inf):
        return f"--every must be positive (seconds), got {args.every}"
    return _log_problem(args.log)


def _log_problem(log: str | None) -> str | None:
    """Why `--log FILE` cannot be written, checked before any capture starts."""
    if log is None:
        return None
    path = Path(log)
    if "\n" in log or "\r" in log:
        return f"--log {log!r}: a path with a line break"
    if path.is_dir():
        return f"--log {printable(log)}: is a directory; name a file in it"
    parent = path.parent
    if not parent.is_dir():
        return f"--log {printable(log)}: no such directory {printable(str(parent))}"
    if not os.access(path if path.exists() else parent, os.W_OK):
        return f"--log {printable(log)}: not writable (permission denied)"
    return None


def run(args: argparse.Namespace) -> int:
    problem = _validate(args)
    if problem:
        _err(problem)
        return 2
    if args.every is not None:
        return _run_series(args)
    status = _Status()
    try:
        result = capture(args.address, logdir=args.logdir, progress=status, **_options(args))
    except CaptureError as exc:
        status.clear()
        _err(str(exc))
        return 2 if exc.kind in ("bad_address", "bad_request") else 1
    finally:
        status.clear()
    _warn(result)
    if args.summary:
        print(summary_text(result.session_dir), flush=True)
    print(result.session_dir, flush=True)
    return 0


def _warn(result: CaptureResult) -> None:
    for w in result.warnings:
        _err(f"warning: {w}")


def _run_series(args: argparse.Namespace) -> int:
    cancel = threading.Event()
    status = _Status()
    done = 0
    with_summary = args.summary is not False
    series = capture_series(
        args.address,
        logdir=args.logdir,
        every_s=args.every,
        count=args.count,
        cancel=cancel,
        progress=status,
        **_options(args),
    )
    try:
        for item in series:
            status.clear()
            if isinstance(item, CaptureError):
                _err(str(item))
                if item.kind != "empty":
                    return 1
                continue
            done += 1
            _warn(item)
            line = str(item.session_dir)
            if with_summary:
                line += "\t" + summary_text(item.session_dir)
            print(line, flush=True)
    except KeyboardInterrupt:
        cancel.set()
        status.clear()
        _err(f"stopped after {done} capture(s)")
        return 0 if done else 130
    finally:
        status.clear()
    if done == 0:
        _err("no capture recorded anything")
        return 1
    return 0
