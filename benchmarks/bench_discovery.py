"""Listing a logdir with 1,000 profile sessions: `discover()` must parse nothing and take well under a second.

The synthetic logdir mimics Keras' TensorBoard layout, runs nested a few levels deep
(`fit/<time>/train/plugins/profile/<session>/<host>.xplane.pb`), with one or two small host
files per session and the other files a real logdir holds (event files, checkpoints) beside
them. Timed in this process (median of repeated calls; the directory entries are then in the
kernel's cache) and as a whole fresh process that imports tuiprof's discovery and lists once.

    python benchmarks/bench_discovery.py [--sessions 1000] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, REPO, interleaved, preflight, quiet_env, write_result

LIST_ONCE = (
    "import sys\n"
    "from tui_prof.profiles.discover import discover\n"
    "n = len(discover(sys.argv[1]).sessions)\n"
    "assert n == int(sys.argv[2]), n\n"
)


def make_logdir(root: Path, sessions: int, per_run: int = 20) -> None:
    for i in range(sessions):
        run = (
            root
            / "fit"
            / f"2026112{i // per_run // 10}-{i // per_run:04d}"
            / ("train" if i % 2 else "validation")
        )
        sess = (
            run / "plugins" / "profile" / f"2026_11_22_17_{i // 60 % 60:02d}_{i % 60:02d}_{i:04d}"
        )
        sess.mkdir(parents=True, exist_ok=True)
        (sess / "worker0.xplane.pb").write_bytes(b"\x0a\x00" * 32)
        if i % 10 == 0:  # a few multi-host sessions
            (sess / "worker1.xplane.pb").write_bytes(b"\x0a\x00" * 32)
        (sess / "worker0.trace.json.gz").write_bytes(b"")
        if i % per_run == 0:
            (run / f"events.out.tfevents.{i}.host").write_bytes(b"\0" * 64)
            (run.parent / "checkpoint").write_text("model_checkpoint_path: 'ckpt'\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    preflight()
    from tui_prof.profiles.discover import discover

    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-logdir-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        make_logdir(root, args.sessions)
        print(f"made {args.sessions} sessions in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        found = discover(root)
        assert len(found.sessions) == args.sessions, len(found.sessions)
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            discover(root)
            times.append(time.perf_counter() - t)
        proc = interleaved(
            {
                "discover_process": (
                    [PYTHON, "-c", LIST_ONCE, str(root), str(args.sessions)],
                    quiet_env(),
                ),
                "python_startup": ([PYTHON, "-c", "pass"], quiet_env()),
            },
            args.runs,
        )
    in_proc = {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": len(times),
    }
    pst = proc["discover_process"].stats()
    print()
    print(
        f"discover() of {args.sessions} sessions ({len(found.runs)} runs), in process: "
        f"median {in_proc['median_s'] * 1000:.1f} ms (min {in_proc['min_s'] * 1000:.1f}, "
        f"max {in_proc['max_s'] * 1000:.1f})"
    )
    print(
        f"whole process (python + import + list): median {pst['median_s'] * 1000:.0f} ms "
        f"(min {pst['min_s'] * 1000:.0f}, max {pst['max_s'] * 1000:.0f}); "
        f"bare python {proc['python_startup'].stats()['median_s'] * 1000:.0f} ms"
    )
    write_result(
        "discovery",
        {
            "sessions": args.sessions,
            "runs_found": len(found.runs),
            "in_process": in_proc,
            "process": {n: s.stats() for n, s in proc.items()},
            "cwd": str(REPO),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
