"""PyTorch traces: `tuiprof summary` against the PyTorch TensorBoard plugin's parser and Holistic
Trace Analysis, whole processes on the same file, alternating.

Series (each a fresh process, timed from spawn to exit, with its peak RSS):
  tuiprof_summary  `tuiprof summary FILE --json --no-cache`
  plugin_parser    a Python that imports torch-tb-profiler's RunProfileData and parses the file
                   (`RunProfileData.parse`: what the plugin computes for its overview, op, kernel
                   and memory views; no TensorBoard server)
  hta_temporal     a Python that loads the file with Holistic Trace Analysis (`TraceAnalysis` on a
                   directory holding only a link to it) and computes its temporal breakdown
Files: make_large_kineto.py's replicated traces (made if missing): the A100 trace doubled
(~56 MB, today's categories: the plugin links no runtime call to a kernel there) and the plugin's
own 2021 sample doubled (~73 MB, the plugin reads it fully). Aims: 5x faster than the
plugin on the ~50 MB trace; peak memory under 3x the unpacked file.

    python benchmarks/bench_kineto.py [--runs 5] [--only a100|plugin]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    OUT,
    PYTHON,
    fmt_series,
    interleaved,
    preflight,
    quiet_env,
    ratio,
    tuiprof_cmd,
    write_result,
)
from make_large_kineto import SOURCES, replicate

PLUGIN_PARSER = (
    "import sys, tempfile, logging\n"
    "logging.disable(logging.WARNING)\n"
    "from torch_tb_profiler.profiler.data import RunProfileData\n"
    "with tempfile.TemporaryDirectory() as d:\n"
    "    data = RunProfileData.parse('worker0', None, sys.argv[1], d)\n"
    "assert data.steps_costs, 'no steps'\n"
)
HTA_TEMPORAL = (
    "import os, sys, tempfile, logging\n"
    "logging.disable(logging.WARNING)\n"
    "from hta.trace_analysis import TraceAnalysis\n"
    "with tempfile.TemporaryDirectory() as d:\n"
    "    os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, os.path.basename(sys.argv[1])))\n"
    "    a = TraceAnalysis(trace_dir=d)\n"
    "    df = a.get_temporal_breakdown(visualize=False)\n"
    "assert len(df), 'no result'\n"
)


def trace_file(source: str) -> Path:
    out = OUT / "large_kineto"
    found = sorted(out.glob(f"{SOURCES[source].name.split('.')[0]}_x2.pt.trace.json"))
    if found:
        return found[0]
    return Path(replicate(SOURCES[source], out, 2)["path"])


def bench(path: Path, runs: int) -> dict[str, object]:
    env = quiet_env(TUIPROF_CACHE_DIR=tempfile.mkdtemp(prefix="tuiprof-bench-"))
    series = interleaved(
        {
            "tuiprof_summary": (tuiprof_cmd("summary", str(path), "--json", "--no-cache"), env),
            "plugin_parser": ([PYTHON, "-c", PLUGIN_PARSER, str(path)], env),
            "hta_temporal": ([PYTHON, "-c", HTA_TEMPORAL, str(path)], env),
        },
        runs,
    )
    size_mb = path.stat().st_size / 2**20
    tp = series["tuiprof_summary"]
    print(f"\n{path.name}: {size_mb:.0f} MB unpacked")
    for name, s in series.items():
        print(fmt_series(name, s))
    plugin_ratio = ratio(series["plugin_parser"], tp)
    hta_ratio = ratio(series["hta_temporal"], tp)
    peak = tp.stats()["peak_rss_mb_median"]
    print(
        f"plugin / tuiprof: {plugin_ratio['of_medians']:.1f}x   "
        f"HTA / tuiprof: {hta_ratio['of_medians']:.1f}x   "
        f"tuiprof peak RSS / file: {peak / size_mb:.2f}x"
    )
    return {
        "file": str(path),
        "file_mb": size_mb,
        "series": {name: s.stats() for name, s in series.items()},
        "plugin_over_tuiprof": plugin_ratio,
        "hta_over_tuiprof": hta_ratio,
        "tuiprof_peak_rss_over_file": peak / size_mb,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=sorted(SOURCES))
    args = ap.parse_args()
    preflight("torch_tb_profiler", "hta", "msgspec")
    results = {
        source: bench(trace_file(source), args.runs)
        for source in (["a100", "plugin"] if args.only is None else [args.only])
    }
    write_result("bench_kineto", {"runs": args.runs, "results": results})


if __name__ == "__main__":
    main()
