"""`tuiprof summary` on a large realistic Kineto trace vs `zcat` of the same file, as ratios.

The file is made by make_realistic_kineto.py (a real A100 trace repeated to `--size-gb` of JSON,
gzip level 6, ≈ 19:1) unless `--file` names one. Rounds alternate `zcat FILE > /dev/null` (the
floor for any reader of the file on one core) and `tuiprof summary FILE --json --no-cache`, each
under GNU time for its peak RSS; the ratio is taken per round, so a busy neighbour slows both
alike. Aims (issue 22): ≤ 2× zcat, ≤ 600 MB peak.

    python benchmarks/bench_realistic.py [--file /tmp/a100_2g.json.gz] [--size-gb 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, fmt_series, interleaved, preflight, quiet_env, ratio, write_result

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
    env = quiet_env()
    series = interleaved(
        {
            "zcat": (["sh", "-c", 'exec zcat "$0" > /dev/null', f], env),
            "tuiprof": ([PYTHON, "-m", "tui_prof.cli", "summary", f, "--json", "--no-cache"], env),
        },
        args.runs,
        warmup=0,
    )
    r = ratio(series["tuiprof"], series["zcat"])
    for name, s in series.items():
        print(fmt_series(name, s))
    peak = max(s.peak_rss_mb for s in series["tuiprof"].samples)
    print(
        f"tuiprof / zcat: {r['of_medians']:.2f}x of medians (per round {r['per_round_min']:.2f}–"
        f"{r['per_round_max']:.2f}x, median {r['per_round_median']:.2f}); peak RSS {peak:.0f} MB "
        f"(median {statistics.median(s.peak_rss_mb for s in series['tuiprof'].samples):.0f})"
    )
    write_result(
        "bench_realistic",
        {
            "file": f,
            "file_bytes": args.file.stat().st_size,
            "series": {k: v.stats() for k, v in series.items()},
            "ratio": r,
        },
    )


if __name__ == "__main__":
    main()
