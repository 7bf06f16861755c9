"""`tuiprof timeline PATH`: one step's host threads and device streams as text or JSON.

Contract: PATH is a session directory or a profile file. Default: the slowest step; `--step N`
picks one. Text lines are at most `--width` cells (default: the terminal's); `--json` prints
`StepTimeline.to_dict` (step, start_us, end_us, tracks[name, kind, events[name, start_us, dur_us,
category]]), times in µs from the step's start, events clipped to it. `--compare-median` lists
which tracks grew in the slowest step against the median one. Exit codes: 0 shown; 2 nothing to
show (one line on stderr: no such path or step, a session without events).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from typing import Any

from tui_prof.model import ProfileError
from tui_prof.printable import printable, strict_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "timeline",
        help="one step's host threads and device streams, as text or JSON",
        description=(
            "Show one step's timeline: a row per host thread and per device stream, each cell a "
            "time bin with the glyph of the breakdown category that fills it most (blank: idle). "
            "Default: the slowest step."
        ),
    )
    p.add_argument("path", help="a session directory or a profile file")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, metavar="N", help="the step number to show")
    which.add_argument("--slowest", action="store_true", help="the slowest step (the default)")
    which.add_argument(
        "--compare-median",
        action="store_true",
        help="the slowest step beside the median one: which tracks grew and by how much",
    )
    p.add_argument(
        "--width", type=int, metavar="W", help="line width in cells (default: the terminal's)"
    )
    p.add_argument(
        "--rank",
        metavar="NAME",
        help="on a multi-rank or multi-host session, this rank's or host's tracks (default: "
        "each step from the rank or host where it is slowest, as the summary takes it)",
    )
    p.add_argument("--json", action="store_true", help="the step's events as one JSON object")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"tuiprof timeline: {printable(message)}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    width = args.width or shutil.get_terminal_size((100, 24)).columns
    if width < 20:
        return _fail(f"--width {width}: at least 20 cells")
    try:
        tl = _load(args.path)
        if args.compare_median:
            return _compare(tl, args.json, width, args.rank)
        number = args.step if args.step is not None else tl.slowest(args.rank)
        st = tl.step(number, source=args.rank)
    except (ProfileError, FileNotFoundError, PermissionError) as exc:  # a missing path: one line
        return _fail(str(exc))
    if args.json:
        print(strict_json(st.to_dict()))
        return 0
    from tui_prof.render.timeline import timeline_lines

    for line in timeline_lines(st, width, mono=True):
        print(line.plain.rstrip())
    return 0


def _load(path: str) -> Any:
    """The session's timeline, its steps numbered as `tuiprof summary` and the TUI number them:
    where TensorBoard's converter found the steps it numbers them from 0, tuiprof's finder (the
    timeline's) by their markers, so `--step 3` named no step and the slowest read "Step 8"
    beside the summary's step 3. The summary (cached) comes first: a large XSpace profile's read
    for it also stores the timeline's events."""
    from tui_prof.profiles.load import load_summary, session_of
    from tui_prof.profiles.timeline.load import load_timeline

    session = session_of(path)
    if session.format != "xplane":  # Kineto's are the profiler's step numbers in both
        return load_timeline(session)
    steps = [(s.step, s.step_time_ms) for s in load_summary(session).steps]
    tl = load_timeline(session)
    tl.renumber(steps)
    return tl


def _compare(tl: Any, as_json: bool, width: int, rank: str | None) -> int:
    from tui_prof.profiles.timeline.compare import compare_median
    from tui_prof.render.timeline import growth_line, timeline_lines

    c = compare_median(tl, rank)
    if as_json:
        print(strict_json(c.to_dict()))
        return 0
    from tui_prof.render.timeline import View

    same = View(0.0, max(c.slow.duration_us, c.median.duration_us, 1e-3))  # one time scale
    for st, what in ((c.slow, "slowest"), (c.median, "median")):
        for line in timeline_lines(st, width, same, mono=True, note=f" ({what})"):
            print(line.plain.rstrip())
        print()
    head = (
        f"Step {c.slow.step} took {c.slow.duration_us / 1000:.2f} ms, "
        f"{c.delta_us / 1000:+.2f} ms against the median step {c.median.step} "
        f"({c.median.duration_us / 1000:.2f} ms). Busy time per track:"
    )
    print(textwrap.fill(head, width))  # every line no wider than asked, nothing cut
    for r in c.tracks:
        print(growth_line(r, width, with_kind=True).plain)
    return 0
