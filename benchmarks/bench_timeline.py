"""Time the timeline of a large profile: reading its events, the first frame, a zoom/pan frame.

Each stage runs in a fresh child process so its peak memory (max RSS) is its own; the summary of
the same file is measured the same way for comparison (the issue's aim: no more memory than it).
Stages: `summary` (which, for PyTorch traces and large XSpace sessions, also writes the
timeline's store); `timeline` (the tab's first open after the summary: from that store, else the
timeline's own read, which stores the events); `reopen` (the tab opened again: the stored events
mapped, the first frame timed from the call that loads them).
The children share a fresh cache directory, so nothing comes from an earlier run.

    python benchmarks/bench_timeline.py PATH [--width 120]
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
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
# the largest child (the summary's decode workers), beside this process's own peak
out["peak_rss_child_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--width", type=int, default=120)
    args = ap.parse_args()
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


if __name__ == "__main__":
    raise SystemExit(main())
