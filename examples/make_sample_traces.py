"""Regenerate sample_traces/ (all but experiment_* directories) with the example jobs.

    python examples/make_sample_traces.py            # about a minute on two CPU cores
    python examples/make_sample_traces.py --check    # also print what TensorBoard's converter finds
    python examples/make_sample_traces.py --only torch_float32 torch_autocast   # PyTorch only
    python examples/make_sample_traces.py --gpu --only torch_cuda_float32 torch_cuda_autocast
    python examples/make_sample_traces.py --gpu --only torch_cuda_wide_float32 torch_cuda_wide_autocast
    python examples/make_sample_traces.py --only jax_step_markers jax_program_runs     # JAX only
    python examples/make_sample_traces.py --only jax_cuda_float32 jax_cuda_bf16 jax_cuda_step_markers --gpu
    python examples/make_sample_traces.py --experiment  # only experiment_mixed_precision (`tuiprof
                                                        # run examples/mixed_precision.toml`, ~3 min)
    python examples/make_sample_traces.py --gpu-experiment  # only experiment_torch_autocast_h100
                                                        # (examples/torch_autocast_gpu.toml, a GPU)

TensorFlow profiles come from examples/train_cnn.py, PyTorch ones (Kineto traces) from
examples/train_torch.py on the CPU, JAX ones from examples/train_jax.py on the CPU; the PyTorch
and JAX ones are skipped, with a line, where torch or jax is not installed.

Each profile comes from its own Python process, because Keras's dtype policy and TensorFlow's
profiler are process-wide. Seeds are fixed; timings, session names (a timestamp) and host file
names (the machine's hostname) are what TensorFlow writes and so differ between runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "sample_traces"
TRAIN = ROOT / "examples" / "train_cnn.py"
TRAIN_TORCH = ROOT / "examples" / "train_torch.py"
TRAIN_JAX = ROOT / "examples" / "train_jax.py"
EXPERIMENT = OUT / "experiment_mixed_precision"
EXPERIMENT_SPEC = ROOT / "examples" / "mixed_precision.toml"
GPU_EXPERIMENT = OUT / "experiment_torch_autocast_h100"
GPU_EXPERIMENT_SPEC = ROOT / "examples" / "torch_autocast_gpu.toml"

# name -> train_cnn.py arguments; every profile covers global steps 5..9.
PROFILES: dict[str, list[str]] = {
    "keras_fit_float32": ["--mode", "fit", "--precision", "float32"],
    "keras_fit_mixed": ["--mode", "fit", "--precision", "mixed"],
    "keras_fit_step_markers": ["--mode", "fit", "--precision", "float32", "--step-markers"],
    "custom_loop": ["--mode", "custom", "--precision", "float32"],
    "input_bound": ["--mode", "custom", "--precision", "float32", "--input-bound"],
}
COMMON = ["--epochs", "3", "--batch-size", "32", "--seed", "0", "--profile-steps", "5,9"]
# PyTorch on the CPU, and on a CUDA GPU with --gpu (on a machine that has one).
TORCH_PROFILES: dict[str, list[str]] = {
    "torch_float32": ["--precision", "float32", "--device", "cpu"],
    "torch_autocast": ["--precision", "autocast", "--device", "cpu"],
}
# GPU-sized (32x32 images, 4x wider convs, batch 128, as examples/torch_autocast_gpu.toml), with
# torch's FLOP estimates and allocations recorded: MFU and memory from a real trace.
GPU_WIDE = ["--device", "cuda", "--width", "4", "--image-size", "32", "--batch-size", "128"]
GPU_WIDE += ["--profile-memory", "--with-flops"]
TORCH_GPU_PROFILES: dict[str, list[str]] = {
    "torch_cuda_float32": ["--precision", "float32", "--device", "cuda"],
    "torch_cuda_autocast": ["--precision", "autocast", "--device", "cuda"],
    "torch_cuda_wide_float32": ["--precision", "float32", *GPU_WIDE],
    "torch_cuda_wide_autocast": ["--precision", "autocast", *GPU_WIDE],
}
# name -> train_jax.py arguments: a jitted train step traced for global steps 5..14, with JAX's
# step markers and without (then tuiprof's steps are the runs of the jitted step). Small
# profiles: no HLO protos, no Python calls.
JAX_PROFILES: dict[str, list[str]] = {
    "jax_step_markers": ["--step-markers"],
    "jax_program_runs": [],
}
JAX_COMMON = ["--epochs", "1", "--seed", "0", "--profile-steps", "5,14", "--small-profile"]
# The same on a CUDA GPU with --gpu: float32 and bfloat16 matmuls without step markers (steps
# are the jitted step's runs), and bfloat16 with JAX's step markers (the converter's steps).
JAX_GPU_PROFILES: dict[str, list[str]] = {
    "jax_cuda_float32": ["--precision", "float32"],
    "jax_cuda_bf16": ["--precision", "bf16"],
    "jax_cuda_step_markers": ["--precision", "bf16", "--step-markers"],
}


def generate(name: str, args: list[str], script: Path = TRAIN, gpu: bool = False) -> None:
    """Train one configuration into a fresh sample_traces/<name>."""
    logdir = OUT / name
    shutil.rmtree(logdir, ignore_errors=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["JAX_PLATFORMS"] = "cpu"
    for var in ("TUIPROF_METRICS_FILE", "TUIPROF_RUN_DIR"):
        env.pop(var, None)
    common = JAX_COMMON if script == TRAIN_JAX else COMMON
    cmd = [sys.executable, str(script), *common, *args, "--logdir", str(logdir)]  # args win
    print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True, env=env)


def generate_experiment(spec: Path, out: Path, gpu: bool = False) -> None:
    """Run an experiment spec with this checkout's tuiprof into a fresh sample_traces/<out> (its
    README.md is kept), then make its stored paths relative to the repository, so the sample
    names no directory of the machine that recorded it."""
    readme = out / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else None
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for key in [k for k in env if k.startswith("TUIPROF_")]:
        env.pop(key)  # not a run of some outer experiment
    cmd = [sys.executable, "-m", "tui_prof.cli", "run", str(spec), "--headless"]
    cmd += ["--no-profiler-port", "--output", str(out)]
    print(f"== {out.name}: tuiprof run {spec.relative_to(ROOT)}", flush=True)
    try:
        subprocess.run(cmd, check=True, env=env)
        relative_paths(out)
    finally:
        if text is not None:
            out.mkdir(parents=True, exist_ok=True)
            readme.write_text(text, encoding="utf-8")


def relative_paths(experiment: Path) -> None:
    """The recorded spec's workdir and output, relative: in spec.toml to the file (as a spec
    file's paths are read), in the store to the repository root (where `--resume` runs)."""
    import json
    import sqlite3

    examples, rel_out = ROOT / "examples", experiment.relative_to(ROOT)
    toml = experiment / "spec.toml"
    if toml.is_file():
        lines = []
        for line in toml.read_text(encoding="utf-8").splitlines():
            if line.startswith("workdir = "):
                line = f'workdir = "{os.path.relpath(examples, experiment)}"'
            elif line.startswith("output = "):
                line = 'output = ".."'
            lines.append(line)
        toml.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with sqlite3.connect(experiment / "experiment.sqlite") as conn:
        (raw,) = conn.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()
        spec = json.loads(raw)
        spec["workdir"], spec["output"] = "examples", str(rel_out.parent)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'spec'", (json.dumps(spec),))


def converter_verdict(path: Path) -> str:
    """What TensorBoard's converter (xprof) says about one profile, without writing next to it."""
    import json
    import tempfile

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as tmp:
        data, _ = raw_to_tool_data.xspace_to_tools_data_from_byte_string(
            [path.read_bytes()],
            [os.path.join(tmp, path.name)],
            "overview_page",
            {"use_saved_result": False},
        )
    tables = json.loads(data)
    rows, p = tables[1].get("rows") or [], tables[1]["p"]
    if not rows:
        diagnostics = [
            r["c"][1]["v"] for t in tables for r in t.get("rows") or [] if len(r["c"]) == 2
        ]
        return "no steps: " + (" ".join(diagnostics) or p.get("input_conclusion", ""))[:100]
    cats = {k.removesuffix("_time_ms_avg"): p[k] for k in sorted(p) if k.endswith("_time_ms_avg")}
    nonzero = ", ".join(f"{k} {v}" for k, v in cats.items() if float(v) > 0)
    return f"{len(rows)} steps, avg {p['steptime_ms_average']} ms ({nonzero})"


def main() -> int:
    """Generate every profile, then list the files with their sizes (and the converter's verdict)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="run TensorBoard's converter on each profile"
    )
    parser.add_argument(
        "--only",
        nargs="*",
        choices=sorted(
            PROFILES | TORCH_PROFILES | TORCH_GPU_PROFILES | JAX_PROFILES | JAX_GPU_PROFILES
        ),
        help="regenerate only these",
    )
    parser.add_argument(
        "--gpu", action="store_true", help="also the CUDA profiles (PyTorch, JAX; needs a GPU)"
    )
    parser.add_argument(
        "--experiment",
        action="store_true",
        help="regenerate only experiment_mixed_precision, by running examples/mixed_precision.toml",
    )
    parser.add_argument(
        "--gpu-experiment",
        action="store_true",
        help="regenerate only experiment_torch_autocast_h100 (examples/torch_autocast_gpu.toml)",
    )
    args = parser.parse_args()
    if args.experiment:
        generate_experiment(EXPERIMENT_SPEC, EXPERIMENT)
        return 0
    if args.gpu_experiment:
        generate_experiment(GPU_EXPERIMENT_SPEC, GPU_EXPERIMENT, gpu=True)
        return 0
    try:
        import torch  # noqa: F401  (only to know whether the PyTorch samples can be made)

        has_torch = True
    except ImportError:
        has_torch = False
    import importlib.util

    has_jax = importlib.util.find_spec("jax") is not None
    default = [
        *PROFILES,
        *TORCH_PROFILES,
        *(TORCH_GPU_PROFILES if args.gpu else []),
        *JAX_PROFILES,
        *(JAX_GPU_PROFILES if args.gpu else []),
    ]
    for name in args.only or default:
        if name in JAX_PROFILES or name in JAX_GPU_PROFILES:
            if not has_jax:
                print(f"== {name}: skipped, jax is not installed (pip install -e '.[jax]')")
                continue
            gpu = name in JAX_GPU_PROFILES
            jax_args = (JAX_GPU_PROFILES if gpu else JAX_PROFILES)[name]
            generate(name, jax_args, TRAIN_JAX, gpu=gpu)
        elif name in TORCH_PROFILES or name in TORCH_GPU_PROFILES:
            if not has_torch:
                print(f"== {name}: skipped, torch is not installed (pip install -e '.[torch]')")
                continue
            gpu = name in TORCH_GPU_PROFILES
            torch_args = (TORCH_GPU_PROFILES if gpu else TORCH_PROFILES)[name]
            generate(name, torch_args, TRAIN_TORCH, gpu=gpu)
        else:
            generate(name, PROFILES[name])
    for leftover in OUT.rglob(
        "*.op_stats_v2.pb"
    ):  # written by TensorBoard if it opened these profiles
        leftover.unlink()
    for name in [
        *JAX_PROFILES,
        *JAX_GPU_PROFILES,
    ]:  # JAX also writes a trace viewer copy; tuiprof reads the xplane
        for trace in (OUT / name).rglob("*.trace.json.gz"):
            trace.unlink()

    total = 0
    print("\nsample_traces/:")
    for name in [*PROFILES, *TORCH_PROFILES, *TORCH_GPU_PROFILES, *JAX_PROFILES, *JAX_GPU_PROFILES]:
        for f in sorted((OUT / name).rglob("*")):
            if f.is_file():
                total += f.stat().st_size
                print(f"  {f.stat().st_size:>9,d}  {f.relative_to(OUT)}")
                if args.check and f.name.endswith(".xplane.pb"):
                    print(f"             converter: {converter_verdict(f)}")
    print(f"  {total:>9,d}  total (excluding experiment_*)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
