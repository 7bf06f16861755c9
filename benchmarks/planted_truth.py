"""A planted truth: does an experiment find a 15% slowdown, as often from the TUI as from the CLI?

    python benchmarks/planted_truth.py [--experiments 5] [--repeats 5]

The job is CPU-bound: it spins until it has used WORK seconds of its own CPU time
(`time.process_time`), 0.20 s for variants `a` and `a2`, 0.23 s for `b` (15% more work). One
experiment is the three variants x `--repeats` runs (interleaved, one at a time), measured by
tuiprof's own wall time. It is launched two ways, alternating:
- `cli`: `tuiprof run SPEC --headless`;
- `tui`: `tuiprof DIR` in a real 120x40 pseudo-terminal, the experiment started from the `r` dialog
  by keystrokes (`r`, Tab, Enter: the dialog runs the spec file `tuiprof.toml` in DIR), the
  Experiments view drawing the runs live; `q` once every run finished.
Each finished experiment is compared as `tuiprof compare` does (`build_report`, the default 5%
smallest difference that matters). Reported per way: the share of experiments whose verdict names
`a` the winner against `b` (the slowdown resolved), and for the A/A pair `a2` vs `a`: a winner
named (false), repeats asked. Aim: the same share from both ways; the A/A pair names no
winner and asks for no repeats.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import PYTHON, REPO, preflight, write_result
from observer_cpu import _pty_process

JOB = "import sys, time\nwork = float(sys.argv[1])\nwhile time.process_time() < work: pass\n"


def write_spec(d: Path, repeats: int) -> Path:
    (d / "job.py").write_text(JOB, encoding="utf-8")
    spec = d / "tuiprof.toml"
    spec.write_text(
        f'name = "planted"\ncommand = ["{PYTHON}", "job.py"]\nrepeats = {repeats}\n'
        f'output = "{d / "out"}"\n'
        '[variants.a]\nargs = ["0.20"]\n[variants.a2]\nargs = ["0.20"]\n'
        '[variants.b]\nargs = ["0.23"]\n',
        encoding="utf-8",
    )
    return spec


def _experiment_dir(out: Path) -> Path | None:
    found = sorted(out.glob("*/experiment.sqlite")) if out.exists() else []
    return found[0].parent if found else None


def _all_finished(out: Path, runs: int) -> bool:
    from tui_prof.experiments.store import StoreError, load_experiment

    d = _experiment_dir(out)
    if d is None:
        return False
    try:
        exp = load_experiment(d)
    except StoreError:
        return False
    ended = [r for r in exp.runs if r.ended_at is not None]
    return len(exp.runs) == runs and len(ended) == runs


def run_one(way: str, repeats: int) -> dict[str, Any]:
    from tui_prof.comparison.report import build_report
    from tui_prof.experiments.reading import read_experiment

    with tempfile.TemporaryDirectory(prefix="tuiprof-planted-") as tmp:
        d = Path(tmp)
        spec = write_spec(d, repeats)
        t0 = time.monotonic()
        if way == "cli":
            subprocess.run(
                [PYTHON, "-m", "tui_prof.cli", "run", str(spec), "--headless"],
                cwd=d,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
                timeout=600,
            )
        else:
            proc, master = _pty_process([PYTHON, "-m", "tui_prof.cli", str(d)], d)
            try:
                time.sleep(4.0)
                for keys, pause in ((b"r", 1.5), (b"\t", 0.5), (b"\r", 0.5)):
                    os.write(master, keys)
                    time.sleep(pause)
                deadline = time.monotonic() + 600
                while not _all_finished(d / "out", 3 * repeats):
                    if time.monotonic() > deadline:
                        raise SystemExit("tui: the experiment did not finish")
                    time.sleep(0.5)
                time.sleep(1.0)
                os.write(master, b"q")
                proc.wait(20)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(20)
                os.close(master)
        took = time.monotonic() - t0
        exp_dir = _experiment_dir(d / "out")
        assert exp_dir is not None, f"{way}: no experiment"
        report = build_report(read_experiment(exp_dir))
        wall = report.metric("wall_time_s")
        by = {c.variant: c for c in wall.comparisons}
        b, aa = by["b"], by["a2"]
        return {
            "way": way,
            "seconds": round(took, 1),
            "b_resolved": b.winner == "a",
            "b_ratio": b.ratio,
            "b_verdict": b.verdict,
            "aa_winner": aa.winner,
            "aa_repeats_needed": aa.repeats_needed,
            "aa_verdict": aa.verdict,
            "noisy_runs": len(report.comparability.noisy),
            "load_avg": os.getloadavg()[0],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--experiments", type=int, default=5, help="experiments per way")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    preflight("textual", "numpy")
    sys.path.insert(1, str(REPO))
    results: list[dict[str, Any]] = []
    for i in range(args.experiments):
        for way in ("cli", "tui") if i % 2 == 0 else ("tui", "cli"):
            r = run_one(way, args.repeats)
            results.append(r)
            print(
                f"{way}: b {'resolved' if r['b_resolved'] else 'NOT resolved'} "
                f"(×{r['b_ratio']:.3f}); A/A winner {r['aa_winner']}, repeats "
                f"{r['aa_repeats_needed']}; {r['noisy_runs']} noisy runs; {r['seconds']} s",
                flush=True,
            )
    for way in ("cli", "tui"):
        mine = [r for r in results if r["way"] == way]
        resolved = sum(r["b_resolved"] for r in mine)
        aa_named = sum(r["aa_winner"] is not None for r in mine)
        aa_asked = sum(r["aa_repeats_needed"] is not None for r in mine)
        print(
            f"{way}: slowdown resolved in {resolved}/{len(mine)}; A/A named a winner in "
            f"{aa_named}/{len(mine)}, asked for repeats in {aa_asked}/{len(mine)}"
        )
    write_result("planted_truth", {"repeats": args.repeats, "experiments": results})


if __name__ == "__main__":
    sys.exit(main())
