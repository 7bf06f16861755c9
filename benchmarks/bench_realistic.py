"""`tuiprof summary` on a large realistic Kineto trace vs `zcat` of the same file, as ratios.

The file is made by make_realistic_kineto.py (a real A100 trace repeated to `--size-gb` of JSON,
gzip level 6, ≈ 19:1) unless `--file` names one. Rounds alternate `zcat FILE > /dev/null` (the
floor for any reader of the file on one core) and `tuiprof summary FILE --json --no-cache`, each
under GNU time (wall and CPU seconds, peak RSS); ratios are taken per round, so a busy neighbour
slows both alike. tuiprof inflates in a second thread: on a loaded machine the CPU-time ratio
is the steadier figure, the wall ratio what a user waits. Aims: ≤ 2× zcat, ≤ 600 MB.

    python benchmarks/bench_realistic.py [--file /tmp/a100_2g.json.gz] [--size-gb 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, preflight, quiet_env, write_result

DEFAULT = Path("/tmp/tuiprof_a100_2g.json.gz")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--file", type=Path, default=DEFAULT, help="made when missing")
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    preflight("msgspec", "numpy")
    if not args.file.exists():
        here = Path(__file__).resolve().parent
        subprocess.run(
            [
                PYTHON,
                str(here / "make_realistic_kineto.py"),
                "--size-gb",
                str(args.size_gb),
                "--out",
                str(args.file),
            ],
            check=True,
        )
    f = str(args.file)
    cmds = {
        "zcat": ["sh", "-c", 'exec zcat "$0" > /dev/null', f],
        "tuiprof": [PYTHON, "-m", "tui_prof.cli", "summary", f, "--json", "--no-cache"],
    }
    rounds: list[dict[str, dict[str, float]]] = []
    for i in range(args.runs):  # alternating: a busy neighbour slows both alike
        rounds.append({name: _timed(cmd) for name, cmd in cmds.items()})
        z, t = rounds[-1]["zcat"], rounds[-1]["tuiprof"]
        print(
            f"round {i + 1}: zcat {z['wall']:.1f} s ({z['cpu']:.1f} s CPU); tuiprof {t['wall']:.1f} s "
            f"({t['cpu']:.1f} s CPU), peak {t['rss_mb']:.0f} MB; wall ratio "
            f"{t['wall'] / z['wall']:.2f}, CPU ratio {t['cpu'] / z['cpu']:.2f}; load "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    wall = [r["tuiprof"]["wall"] / r["zcat"]["wall"] for r in rounds]
    cpu = [r["tuiprof"]["cpu"] / r["zcat"]["cpu"] for r in rounds]
    peak = max(r["tuiprof"]["rss_mb"] for r in rounds)
    print(
        f"tuiprof / zcat, per round: wall {statistics.median(wall):.2f}x (median; "
        f"{min(wall):.2f}-{max(wall):.2f}), CPU time {statistics.median(cpu):.2f}x "
        f"({min(cpu):.2f}-{max(cpu):.2f}); peak RSS {peak:.0f} MB"
    )
    write_result(
        "bench_realistic",
        {"file": f, "file_bytes": args.file.stat().st_size, "rounds": rounds},
    )


def _timed(cmd: list[str]) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + system, every thread) and peak RSS, from GNU time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        r = subprocess.run(
            ["/usr/bin/time", "-f", "%e %U %S %M", "-o", out.name, *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=quiet_env(),
        )
        if r.returncode:
            sys.exit(f"{cmd[0]} failed: {r.stderr.strip()[-400:]}")
        wall, user, system, rss = out.read().split()[-4:]
    return {"wall": float(wall), "cpu": float(user) + float(system), "rss_mb": int(rss) / 1024}


if __name__ == "__main__":
    main()
