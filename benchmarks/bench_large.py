"""A ~300 MB profile: time and peak memory of the converter alone, `tuiprof summary`, and the fallback.

The profile is made by make_large_profile.py (the 8-GPU profile's events replicated whole, so the
steps replicate too) unless it already exists in benchmarks/out/large. Each process is timed
from spawn to exit; peak memory is that process's own ru_maxrss (os.wait4), which counts the
pages of a memory-mapped file it touched. Series:
  converter_alone    a fresh Python converting the overview page with TensorBoard's converter
  tuiprof_summary    `tuiprof summary FILE --json --no-cache` (official steps via the converter)
  tuiprof_fallback   the same with --fallback (today this still runs the converter for the
                     overview/op/kernel tables, then tuiprof's own step finder)
  step_finder_alone  tuiprof's streaming XPlane decoder and step finder (profiles/steps.py) alone,
                     the part of --fallback that does not need the converter
Also, once: what `tuiprof summary FILE` shows on a terminal while it works (its progress lines).
Aims: tuiprof no slower than the converter, progress shown, peak memory well under the converter's.

    python benchmarks/bench_large.py [--size-mb 300] [--runs 3] [--regen]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    CONVERTER_ALONE,
    OUT,
    PYTHON,
    default_profile,
    fmt_series,
    interleaved,
    preflight,
    quiet_env,
    ratio,
    tuiprof_cmd,
    write_result,
)
from bench_startup import ANSI
from make_large_profile import replicate

STEP_FINDER_ALONE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from tui_prof.profiles.xplane.steps import find_steps\n"
    "found = find_steps([Path(sys.argv[1])])\n"
    "assert found.steps, 'no steps'\n"
)


def large_profile(size_mb: float, regen: bool) -> Path:
    base = OUT / "large"
    existing = sorted(base.glob("plugins/profile/replicated_x*/*.xplane.pb"))
    if existing and not regen:
        return existing[0]
    for old in existing:
        old.unlink()
    t = time.perf_counter()
    info = replicate(default_profile(), base, None, size_mb * 1e6)
    print(
        f"made {info['path']} ({info['bytes'] / 1e6:.0f} MB, {info['copies']} copies) "
        f"in {time.perf_counter() - t:.0f} s",
        file=sys.stderr,
    )
    return Path(info["path"])


def progress_lines(path: Path, env: dict[str, str], timeout: float = 300) -> dict[str, object]:
    """Run `tuiprof summary PATH` on a pseudo-terminal; collect the distinct progress messages it shows."""
    import fcntl
    import select
    import signal
    import struct
    import subprocess
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        tuiprof_cmd("summary", str(path), "--no-cache"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=dict(env, TERM="xterm-256color"),
        start_new_session=True,
    )
    os.close(slave)
    seen: dict[str, float] = {}
    buf = b""
    while time.perf_counter() - t0 < timeout:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            buf = (buf + chunk)[-100_000:]
            for m in re.finditer(rb"\] [^\r\n]*?: ([^\r\n]*?\(\d+%\))", ANSI.sub(b"", buf)):
                msg = m.group(1).decode(errors="replace").strip()
                seen.setdefault(msg, round(time.perf_counter() - t0, 2))
        elif proc.poll() is not None:
            break
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    os.close(master)
    return {
        "messages_first_seen_s": seen,
        "exit": proc.returncode,
        "seconds": time.perf_counter() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=300.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--regen", action="store_true", help="make the large profile again")
    ap.add_argument("--no-progress-check", action="store_true")
    args = ap.parse_args()
    preflight("xprof")
    f = large_profile(args.size_mb, args.regen)
    print(f"profile: {f} ({f.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
    cache = OUT / "cache-large"
    env = quiet_env(TUIPROF_CACHE_DIR=str(cache))
    commands = {
        "converter_alone": ([PYTHON, "-c", CONVERTER_ALONE, str(f)], env),
        "tuiprof_summary": (tuiprof_cmd("summary", str(f), "--json", "--no-cache"), env),
        "tuiprof_fallback": (
            tuiprof_cmd("summary", str(f), "--json", "--no-cache", "--fallback"),
            env,
        ),
    }
    if importlib.util.find_spec("tui_prof.profiles.xplane.steps") is not None:
        commands["step_finder_alone"] = ([PYTHON, "-c", STEP_FINDER_ALONE, str(f)], env)
    series = interleaved(commands, args.runs, warmup=0)
    progress = None if args.no_progress_check else progress_lines(f, env)
    conv = series["converter_alone"]
    ratios = {name: ratio(s, conv) for name, s in series.items() if name != "converter_alone"}
    mem = {
        name: s.stats()["peak_rss_mb_median"] / conv.stats()["peak_rss_mb_median"]
        for name, s in series.items()
    }
    print()
    for name, s in series.items():
        print(fmt_series(name, s))
    for name, r in ratios.items():
        print(
            f"{name} / converter: time {r['of_medians']:.2f}x (per round {r['per_round_min']:.2f}-"
            f"{r['per_round_max']:.2f}), peak memory {mem[name]:.2f}x"
        )
    if progress is not None:
        print(
            f"progress shown by `tuiprof summary` on a terminal: {progress['messages_first_seen_s']}"
        )
    write_result(
        "large",
        {
            "profile": str(f),
            "profile_bytes": f.stat().st_size,
            "series": {n: s.stats() for n, s in series.items()},
            "time_ratio_over_converter": ratios,
            "memory_ratio_over_converter": mem,
            "progress": progress,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
