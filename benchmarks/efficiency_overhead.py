"""What the efficiency and memory passes add to `tuiprof summary FILE --json --no-cache`.

Two whole processes per file, alternating, each `tuiprof summary` run in process by a bare
`python -c`: "on" as shipped, "off" with the passes patched out (the baseline):
  Kineto   the efficiency pass beside the collector (`kineto.extras.Extras`: FLOP counts and
           `[memory]` events) does nothing, so no FLOPs, MFU or memory are computed;
  XSpace   the converter's memory profile tool is not asked for, the HLO's FLOPs are not
           counted, and XLA's op costs are not summed into an efficiency
           (`xplane.reader.memory_use`, `_hlo_flops`, `xla_efficiency`).
Each run's CPU time is the operating system's (user + system of the process and the children it
waited for: the converter's worker too) and its wall time from spawn to exit. The overhead is
on/off - 1 per round (rounds are pairs run back to back), then the median over rounds: CPU
time is the steadier figure on a shared machine. Aim: at most +20% on every file.

Files: the 8-GPU TensorFlow profile, the 2021 V100 plugin sample (12,838 memory events) and the
A100 trace (recorded shapes) from ../shared/traces; with --large, also make_large_kineto.py's
doubled copies (made if missing).

    python benchmarks/efficiency_overhead.py [--runs 7] [--large]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, PYTHON, REPO, SHARED_GPU, preflight, quiet_env, write_result
from make_large_kineto import SOURCES, replicate

# `tuiprof summary FILE --json --no-cache` in this process; with "off", the passes patched out
# first (only the modules of the file's format are imported, as the shipped run imports them).
SUMMARY = """
import sys
mode, path = sys.argv[1], sys.argv[2]
if mode == "off" and path.endswith(".xplane.pb"):
    from tui_prof.profiles.xplane import converter, reader
    real = converter.convert
    def convert(paths, tools=converter.DEFAULT_TOOLS, then=None, meanwhile=None):
        def without_memory(done):
            return [t for t in then(done) if t != converter.MEMORY_PROFILE]
        return real(paths, tools, then=without_memory if then else None, meanwhile=meanwhile)
    converter.convert = convert
    reader.memory_use = lambda doc: None
    reader.xla_efficiency = lambda *args, **kwargs: None
    reader._hlo_flops = lambda *args, **kwargs: None  # the HLO's FLOP count (GPU profiles)
elif mode == "off":
    from tui_prof.profiles.kineto import rank
    class NoExtras:
        def add(self, batch):
            pass
        def result(self, collector, steps):
            return None
    rank.Extras = NoExtras
from tui_prof.cli.main import main
sys.exit(main(["summary", path, "--json", "--no-cache"]))
"""


def doubled(source: str) -> Path:
    """make_large_kineto.py's copy of a shared trace, twice over (as bench_kineto.py uses it)."""
    out = OUT / "large_kineto"
    made = out / f"{SOURCES[source].name.split('.')[0]}_x2.pt.trace.json"
    if made.exists():
        return made
    out.mkdir(parents=True, exist_ok=True)
    return Path(replicate(SOURCES[source], out, 2)["path"])


def run(mode: str, path: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s, the JSON it printed) of one whole process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [PYTHON, "-c", SUMMARY, mode, str(path)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{mode} {path.name} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


def check_modes(on: str, off: str, name: str) -> None:
    """The baseline really lacks what the passes make, and the shipped run has it."""
    import json

    s_on, s_off = json.loads(on)["sessions"][0], json.loads(off)["sessions"][0]
    if s_off.get("efficiency") is not None or s_off.get("memory") is not None:
        sys.exit(f"{name}: the baseline still has efficiency or memory: the patch missed")
    if s_on.get("efficiency") is None and s_on.get("memory") is None:
        sys.exit(f"{name}: neither efficiency nor memory in the shipped run: nothing to measure")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--large", action="store_true", help="also the doubled Kineto traces")
    args = ap.parse_args()
    preflight("xprof")
    files = {
        "tf_8gpu_xspace": SHARED_GPU,
        "v100_plugin_kineto": SOURCES["plugin"],
        "a100_kineto": SOURCES["a100"],
    }
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        sys.exit(f"missing: {', '.join(missing)} (the shared traces)")
    if args.large:
        for name in ("a100", "plugin"):
            files[f"{name}_x2_kineto"] = doubled(name)
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-") as cache:
        env = quiet_env(TUIPROF_CACHE_DIR=cache)
        for name, path in files.items():
            on, off = run("on", path, env), run("off", path, env)  # warm-up, and the check
            check_modes(on[2], off[2], name)
            walls: dict[str, list[float]] = {"on": [], "off": []}
            cpus: dict[str, list[float]] = {"on": [], "off": []}
            for i in range(args.runs):
                for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    wall, cpu, _ = run(mode, path, env)
                    walls[mode].append(wall)
                    cpus[mode].append(cpu)
            cpu_r = [a / b - 1 for a, b in zip(cpus["on"], cpus["off"], strict=True)]
            wall_r = [a / b - 1 for a, b in zip(walls["on"], walls["off"], strict=True)]
            row = {
                "file": str(path),
                "cpu_s": {m: statistics.median(v) for m, v in cpus.items()},
                "wall_s": {m: statistics.median(v) for m, v in walls.items()},
                "cpu_overhead": {
                    "median": statistics.median(cpu_r),
                    "min": min(cpu_r),
                    "max": max(cpu_r),
                },
                "wall_overhead": {
                    "median": statistics.median(wall_r),
                    "min": min(wall_r),
                    "max": max(wall_r),
                },
            }
            results[name] = row
            print(
                f"{name:<22} CPU {row['cpu_s']['on'] * 1000:6.0f} vs {row['cpu_s']['off'] * 1000:6.0f}"
                f" ms: {statistics.median(cpu_r):+.0%} ({min(cpu_r):+.0%} to {max(cpu_r):+.0%});"
                f"  wall {row['wall_s']['on'] * 1000:6.0f} vs {row['wall_s']['off'] * 1000:6.0f}"
                f" ms: {statistics.median(wall_r):+.0%} ({min(wall_r):+.0%} to {max(wall_r):+.0%})",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()}; aim: at most +20% on every file")
    write_result("efficiency_overhead", {"runs": args.runs, "files": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
