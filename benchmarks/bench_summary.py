"""`tuiprof summary FILE --json --no-cache` vs TensorBoard's converter alone, whole processes, same file.

The converter alone is the least any tool built on it can cost: a fresh Python that imports
xprof.convert.raw_to_tool_data and converts the overview page. tuiprof's process does more
(three converter tools, its own model, JSON out), so the ratio is the price of everything else.
For reading the gap: tuiprof's analysis and JSON in a bare `python -c` (no CLI), the converter
doing the three tools tuiprof reads (op stats shared through
its saved result, as tuiprof's wrapper lets it), `tuiprof summary --help` (the CLI's own start-up:
Python, argparse and every subcommand module) and a bare Python.
Runs alternate A, B, C, ... so load from other processes falls on all. Aim: ratio <= 1.5.
Every process may cache its bytecode (into a private PYTHONPYCACHEPREFIX, filled by the warm-up
round), as an installed package has it: with PYTHONDONTWRITEBYTECODE set, as on some machines,
tuiprof's own modules would be compiled anew in every run while xprof's come precompiled.

    python benchmarks/bench_summary.py [FILE] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    CONVERTER_ALONE,
    CONVERTER_THREE_TOOLS,
    LOAD_AT_START,
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

# tuiprof's analysis and JSON without the CLI around it: what `tuiprof summary` would cost if
# its start-up imported nothing else.
CORE_ONLY = (
    "import json, sys\n"
    "from tui_prof.profiles.load import load_summary\n"
    "print(json.dumps({'sessions': [load_summary(sys.argv[1], use_cache=False).to_dict()]}))\n"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "file",
        nargs="?",
        type=Path,
        default=None,
        help="an .xplane.pb (default: the 8-GPU profile)",
    )
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--fallback", action="store_true", help="also time `tuiprof summary --fallback`"
    )
    ap.add_argument(
        "--env-bytecode",
        action="store_true",
        help="keep this environment's bytecode settings (e.g. PYTHONDONTWRITEBYTECODE)",
    )
    ap.add_argument(
        "--before",
        type=Path,
        metavar="TREE",
        help="also time `tuiprof summary` from this checkout (e.g. a `git worktree` of an "
        "earlier commit), in the same rounds",
    )
    args = ap.parse_args()
    preflight("xprof")
    f = (args.file or default_profile()).resolve()
    print(f"profile: {f} ({f.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    with (
        tempfile.TemporaryDirectory(prefix="tuiprof-bench-cache-") as cache,
        tempfile.TemporaryDirectory(prefix="tuiprof-bench-pyc-") as pyc,
    ):
        env = quiet_env(TUIPROF_CACHE_DIR=cache)
        if not args.env_bytecode:
            env["PYTHONPYCACHEPREFIX"] = pyc
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        commands = {
            "converter_alone": ([PYTHON, "-c", CONVERTER_ALONE, str(f)], env),
            "tuiprof_summary": (tuiprof_cmd("summary", str(f), "--json", "--no-cache"), env),
            "core_without_cli": ([PYTHON, "-c", CORE_ONLY, str(f)], env),
            "converter_three_tools": ([PYTHON, "-c", CONVERTER_THREE_TOOLS, str(f)], env),
            "tuiprof_cli_startup": (tuiprof_cmd("summary", "--help"), env),
            "python_startup": ([PYTHON, "-c", "pass"], env),
        }
        if args.before:
            before_env = dict(env, PYTHONPATH=str(args.before.resolve()))
            commands["tuiprof_summary_before"] = (
                tuiprof_cmd("summary", str(f), "--json", "--no-cache"),
                before_env,
            )
        if args.fallback:
            commands["tuiprof_fallback"] = (
                tuiprof_cmd("summary", str(f), "--json", "--no-cache", "--fallback"),
                env,
            )
        series = interleaved(commands, args.runs)
    r = ratio(series["tuiprof_summary"], series["converter_alone"])
    print()
    load = (LOAD_AT_START, os.getloadavg())
    print(f"load average (1, 5, 15 min): {load[0]} at start, {load[1]} at end")
    for name, s in series.items():
        print(fmt_series(name, s))
    print(
        f"tuiprof / converter: {r['of_medians']:.2f}x (per-round median {r['per_round_median']:.2f}, "
        f"min {r['per_round_min']:.2f}, max {r['per_round_max']:.2f}); aim <= 1.5x"
    )
    print(
        f"tuiprof / converter, CPU time: per-round median {r['cpu_per_round_median']:.2f} "
        f"(min {r['cpu_per_round_min']:.2f}, max {r['cpu_per_round_max']:.2f})"
    )
    if "tuiprof_summary_before" in series:
        b = ratio(series["tuiprof_summary_before"], series["converter_alone"])
        print(
            f"before ({args.before}) / converter: {b['of_medians']:.2f}x (per-round median "
            f"{b['per_round_median']:.2f}); CPU per-round median {b['cpu_per_round_median']:.2f}"
        )
    result: dict[str, object] = {
        "profile": str(f),
        "profile_bytes": f.stat().st_size,
        "bytecode_cached": not args.env_bytecode,
        "series": {n: s.stats() for n, s in series.items()},
        "ratio_tuiprof_over_converter": r,
    }
    if "tuiprof_summary_before" in series:
        result["before"] = str(args.before)
        result["ratio_before_over_converter"] = ratio(
            series["tuiprof_summary_before"], series["converter_alone"]
        )
    if "tuiprof_fallback" in series:
        result["ratio_fallback_over_converter"] = ratio(
            series["tuiprof_fallback"], series["converter_alone"]
        )
    write_result("summary", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
