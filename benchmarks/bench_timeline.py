"""Time the timeline of a large profile: reading its events, the first frame, a zoom/pan frame.

Each stage runs in a fresh child process so its peak memory (max RSS) is its own; the summary of
the same file is measured the same way for comparison (the issue's aim: no more memory than it).
Stages: `summary` (which, for PyTorch traces and large XSpace sessions, also writes the
timeline's store); `timeline` (the tab's first open after the summary: from that store, else the
timeline's own read, which stores the events); `reopen` (the tab opened again: the stored events
mapped, the first frame timed from the call that loads them).
The children share a fresh cache directory, so nothing comes from an earlier run.

    python benchmarks/bench_timeline.py PATH [--width 120]
    python benchmarks/bench_timeline.py PATH --index-cost 3

`--index-cost N`: what indexing costs the summary: N rounds of the summary with the index and
without it, alternating, each in a fresh process and cache (CPU of the process and of its
decode workers, wall, peak RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, resource, sys, time
what, path, width = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
out = {}
if what == "summary":
    from tui_prof.profiles.load import summarize_session
    summarize_session(path)
    out["read_s"] = time.perf_counter() - t0
else:  # timeline, reopen
    from tui_prof.profiles.timeline.load import load_timeline
    from tui_prof.render.timeline import View, timeline_lines
    tl = load_timeline(path)
    out["read_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    st = tl.step(tl.slowest())
    timeline_lines(st, width)
    out["first_frame_s"] = time.perf_counter() - t1
    frames = []
    view = View.fit(st)
    for k in range(20):  # zoom in around the middle, then pan
        t2 = time.perf_counter()
        w = (view.hi - view.lo) / 2 if k < 10 else view.hi - view.lo
        mid = (view.lo + view.hi) / 2 + (w / 4 if k >= 10 else 0.0)
        view = View(max(0.0, mid - w / 2), max(0.0, mid - w / 2) + w)
        timeline_lines(st, width, view)
        frames.append(time.perf_counter() - t2)
    out["zoom_pan_frame_ms_max"] = 1000 * max(frames)
    out["events"] = sum(len(t.start) for s in tl.sources for t in s.tracks)
    if what == "reopen":
        out["first_frame_s"] += out.pop("read_s")  # load + cut + draw, from the store
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
out["cpu_s"] = me.ru_utime + me.ru_stime  # this process's, then its decode workers'
out["cpu_children_s"] = kids.ru_utime + kids.ru_stime
out["peak_rss_mb"] = me.ru_maxrss / 1024
# the largest child (the summary's decode workers), beside this process's own peak
out["peak_rss_child_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--width", type=int, default=120)
    ap.add_argument("--index-cost", type=int, default=0, metavar="N")
    args = ap.parse_args()
    if args.index_cost:
        return index_cost(args.path, args.index_cost)
    result = {}
    # as the TUI runs its summaries: indexing the events for the timeline as they are read
    env = os.environ | {
        "TUIPROF_CACHE_DIR": tempfile.mkdtemp(prefix="bench_timeline_"),
        "TUIPROF_TIMELINE_INDEX": "1",
    }
    for what in ("summary", "timeline", "reopen"):
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, what, args.path, str(args.width)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        result[what] = json.loads(done.stdout) | {"wall_s": time.perf_counter() - t}
    shutil.rmtree(env["TUIPROF_CACHE_DIR"], ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


def index_cost(path: str, rounds: int) -> int:
    """The summary with the timeline's index (as the TUI runs it) and without, alternating."""
    rows = []
    for r in range(rounds):
        for index in ("1", "0"):
            cache = tempfile.mkdtemp(prefix="bench_timeline_")
            env = os.environ | {"TUIPROF_CACHE_DIR": cache, "TUIPROF_TIMELINE_INDEX": index}
            t = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", CHILD, "summary", path, "0"],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            got = json.loads(done.stdout)
            shutil.rmtree(cache, ignore_errors=True)
            rows.append(
                {
                    "round": r,
                    "index": index == "1",
                    "wall_s": round(time.perf_counter() - t, 2),
                    "cpu_s": round(got["cpu_s"] + got["cpu_children_s"], 2),
                    "cpu_workers_s": round(got["cpu_children_s"], 2),
                    "peak_rss_mb": round(got["peak_rss_mb"]),
                    "load": round(os.getloadavg()[0], 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
