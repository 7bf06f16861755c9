"""`tuiprof summary` on a large realistic Kineto trace vs `zcat` of the same file, as ratios.

The file is made by make_realistic_kineto.py (a real A100 trace repeated to `--size-gb` of JSON,
gzip level 6, ≈ 19:1) unless `--file` names one. Rounds alternate `zcat FILE > /dev/null` (the
floor for any reader of the file on one core) and `tuiprof summary FILE --json --no-cache`, each
under GNU time (wall and CPU seconds, peak RSS; the whole process tree's peak PSS sampled
beside it, worker processes included), once with the reading worker processes (one per core)
and once in one process (TUIPROF_READ_WORKERS=0); ratios are taken per round, so a busy
neighbour slows all alike. tuiprof inflates in a second thread and decodes in worker processes:
on a loaded machine the CPU-time ratio is the steadier figure, the wall ratio what a user waits.
Aims: ≤ 2× zcat, ≤ 600 MB.

    python benchmarks/bench_realistic.py [--file /tmp/a100_2g.json.gz] [--size-gb 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, preflight, quiet_env, write_result

DEFAULT = Path("/tmp/tuiprof_a100_2g.json.gz")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--file", type=Path, default=DEFAULT, help="made when missing")
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, help="TUIPROF_READ_WORKERS (default: one per core)")
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
    tuiprof = [PYTHON, "-m", "tui_prof.cli", "summary", f, "--json", "--no-cache"]
    cmds = {  # name: (command, environment)
        "zcat": (["sh", "-c", 'exec zcat "$0" > /dev/null', f], quiet_env()),
        "tuiprof": (tuiprof, quiet_env()),  # worker processes: one per core (up to 4)
        "one process": (tuiprof, quiet_env(TUIPROF_READ_WORKERS="0")),
    }
    if args.workers is not None:
        cmds["tuiprof"] = (tuiprof, quiet_env(TUIPROF_READ_WORKERS=str(args.workers)))
    rounds: list[dict[str, dict[str, float]]] = []
    for i in range(args.runs):  # alternating: a busy neighbour slows all alike
        rounds.append({name: _timed(cmd, env) for name, (cmd, env) in cmds.items()})
        z = rounds[-1]["zcat"]
        line = [f"round {i + 1}: zcat {z['wall']:.1f} s ({z['cpu']:.1f} s CPU)"]
        for name in list(cmds)[1:]:
            t = rounds[-1][name]
            line.append(
                f"{name} {t['wall']:.1f} s ({t['cpu']:.1f} s CPU), x{t['wall'] / z['wall']:.2f} "
                f"wall, x{t['cpu'] / z['cpu']:.2f} CPU, peak {t['rss_mb']:.0f} MB "
                f"(all processes {t['tree_mb']:.0f} MB)"
            )
        print("; ".join(line) + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    for name in list(cmds)[1:]:
        wall = [r[name]["wall"] / r["zcat"]["wall"] for r in rounds]
        cpu = [r[name]["cpu"] / r["zcat"]["cpu"] for r in rounds]
        peak = max(r[name]["rss_mb"] for r in rounds)
        tree = max(r[name]["tree_mb"] for r in rounds)
        print(
            f"{name} / zcat, per round: wall {statistics.median(wall):.2f}x (median; "
            f"{min(wall):.2f}-{max(wall):.2f}), CPU time {statistics.median(cpu):.2f}x "
            f"({min(cpu):.2f}-{max(cpu):.2f}); peak RSS {peak:.0f} MB, all processes "
            f"{tree:.0f} MB"
        )
    write_result(
        "bench_realistic",
        {"file": f, "file_bytes": args.file.stat().st_size, "rounds": rounds},
    )


def _timed(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + system, every thread and worker process) and the main
    process's peak RSS, from GNU time; and the peak of the whole process tree's memory (the sum
    of its processes' PSS, sampled every 0.1 s: the worker processes count too, pages they
    share with each other once)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        proc = subprocess.Popen(
            ["/usr/bin/time", "-f", "%e %U %S %M", "-o", out.name, *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        tree_peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal tree_peak
            while not done.wait(0.1):
                tree_peak = max(tree_peak, _tree_pss(proc.pid))

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        _, err = proc.communicate()
        done.set()
        t.join()
        if proc.returncode:
            sys.exit(f"{cmd[0]} failed: {err.strip()[-400:]}")
        wall, user, system, rss = out.read().split()[-4:]
    return {
        "wall": float(wall),
        "cpu": float(user) + float(system),
        "rss_mb": int(rss) / 1024,
        "tree_mb": tree_peak / 1024,
    }


def _tree_pss(root: int) -> int:
    """kB: the PSS of `root` and every process under it, now."""
    children: dict[int, list[int]] = {}
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(st.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            continue
    return total


if __name__ == "__main__":
    main()
