"""The bottleneck verdict and what to try next, from a session's average step breakdown.

Contract: one place for the thresholds. They follow TensorBoard's overview page where it has a
rule (input-bound above 20% of step time; kernel-launch and "all others" statements at 10%/20%)
and add the ones a GPU user needs and TensorBoard leaves implicit (mixed precision, TensorCores).
The same thresholds judge every framework; only the advice's words differ (TIPS_BY_FRAMEWORK:
tf.data and Keras for TensorFlow, DataLoader, autocast and torch.compile for PyTorch).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tui_prof.model import CATEGORY_LABELS, Precision, StepAverage, TensorCoreUse

INPUT_BOUND_PERCENT = 20.0
OTHER_BOUND_PERCENT = 20.0
LAUNCH_BOUND_PERCENT = 10.0
HOST_COMPUTE_PERCENT = 10.0
COMPILE_PERCENT = 10.0
COLLECTIVES_PERCENT = 10.0
DEVICE_TO_DEVICE_PERCENT = 10.0
LOW_16BIT_PERCENT = 10.0

TIPS: dict[str, str] = {
    "input": "Input: overlap the input pipeline with training — tf.data `.prefetch(tf.data.AUTOTUNE)`, "
    "`num_parallel_calls=tf.data.AUTOTUNE` in `.map`, `.cache()` small datasets; move Python "
    "(`py_function`) work out of the pipeline.",
    "kernel_launch": "Kernel launch: fewer, larger kernels — a larger batch, `jit_compile=True` (XLA) "
    "to fuse ops, and `steps_per_execution` in `model.compile` to cut per-step host overhead.",
    "host_compute": "Host compute: ops running on the CPU inside the step — check the top host ops; move "
    "preprocessing into tf.data or onto the device.",
    "compilation": "Compilation: recompiling during steps — keep input shapes stable (pad, fixed batch) "
    "and profile after warm-up steps.",
    "device_collectives": "Collectives: communication dominates — larger per-device batch, gradient "
    "accumulation, or overlap communication with compute.",
    "device_to_device": "Device to device: copies between devices — check placement and avoid "
    "unnecessary transfers.",
    "other": "All others: time the profile does not attribute (Python, I/O, synchronisation) — look at "
    "the host threads in a trace viewer; `tf.function` the step and raise `steps_per_execution`.",
    "device_compute": "Device compute: the device is busy — speed up the math itself: mixed precision, "
    "XLA (`jit_compile=True`), TensorCore-friendly shapes (multiples of 8).",
    "host_compute_cpu": "CPU job: compute dominates — a larger batch, XLA (`jit_compile=True`), "
    "and bfloat16 mixed precision on CPUs that support it.",
}

TIPS_PYTORCH: dict[str, str] = {
    "input": "Input: the step waits for data — `DataLoader(num_workers=N, pin_memory=True, "
    "persistent_workers=True)` (raise `prefetch_factor` if workers keep up only in bursts); move "
    "per-sample CPU work (decoding, augmentation) into the workers; copy batches with "
    "`.to(device, non_blocking=True)`.",
    "kernel_launch": "Kernel launch: the CPU spends the step launching many small kernels — CUDA "
    'graphs (`torch.compile(model, mode="reduce-overhead")` or `torch.cuda.CUDAGraph`), '
    "`torch.compile` to fuse elementwise ops, a larger batch; avoid host syncs (`.item()`, "
    "`.cpu()`, printing tensors) inside the step.",
    "host_compute": "Host compute: PyTorch ops run on the CPU inside the step — check the top host "
    "ops; keep tensors on the GPU; `torch.compile` cuts Python and dispatcher overhead.",
    "compilation": "Compilation: `torch.compile` recompiles during steps — keep shapes stable (pad "
    "to fixed sizes, `dynamic=False`) and profile after warm-up (`torch.profiler.schedule`).",
    "device_collectives": "Collectives: communication dominates — let DDP overlap it with the "
    "backward pass (`bucket_cap_mb`, `gradient_as_bucket_view=True`), accumulate gradients under "
    "`model.no_sync()`, or use a larger per-GPU batch.",
    "device_to_device": "Memory copies: memcpy/memset take the step — `pin_memory=True` with "
    "`.to(device, non_blocking=True)`; avoid `.cpu()`/`.item()` round trips and copies between "
    "devices inside the step.",
    "other": "All others: time no kernel, copy or op covers — the host waiting for the GPU "
    "(`.item()`, `.cpu()`, `torch.cuda.synchronize()`, blocking copies) or for other ranks, or "
    "Python between ops; look at the host threads in a trace viewer (Perfetto), remove syncs "
    "from the step; `torch.compile` and CUDA graphs cut Python overhead.",
    "device_compute": "Device compute: the GPU is busy — speed up the math itself: "
    '`torch.autocast("cuda", dtype=torch.bfloat16)`, `torch.compile`, `channels_last` for '
    "convolutions (`model.to(memory_format=torch.channels_last)`), TF32 for float32 matmuls "
    "(`torch.backends.cuda.matmul.allow_tf32 = True`), dimensions in multiples of 8.",
    "host_compute_cpu": "CPU job: compute dominates — `torch.compile`, "
    '`torch.autocast("cpu", dtype=torch.bfloat16)` on CPUs with bfloat16, '
    "`torch.set_num_threads` to the physical cores, `channels_last` for convolutions.",
}

# Advice vocabulary by ProfileSummary.framework; anything else gets TensorFlow's.
TIPS_BY_FRAMEWORK: dict[str, dict[str, str]] = {"tensorflow": TIPS, "pytorch": TIPS_PYTORCH}

MIXED_PRECISION_TIP_PYTORCH = (
    "Consider mixed precision: only {p16:.1f}% of GPU kernel time is 16-bit. "
    '`with torch.autocast("cuda", dtype=torch.bfloat16):` around the forward pass (float16 '
    "also needs `torch.amp.GradScaler`) runs matmuls and convolutions on Tensor Cores."
)
TENSOR_CORE_TIP_PYTORCH = (
    "Tensor Cores: only {pct:.0f}% of the kernel time of Tensor-Core-eligible ops (matmul, conv, "
    "linear) runs on Tensor Cores — `torch.autocast` to 16-bit, or TF32 for float32 "
    "(`torch.backends.cuda.matmul.allow_tf32 = True`), and dimensions in multiples of 8."
)

# Where a profile has no steps: how to mark them (JAX, TensorFlow, tuiprof's helpers).
STEP_MARKERS_TIP = (
    "No steps: mark each training step to get a step-time breakdown — JAX: "
    '`with jax.profiler.StepTraceAnnotation("train", step_num=step):`; TensorFlow: '
    '`with tf.profiler.experimental.Trace("train", step_num=step, _r=1):`; or tuiprof\'s '
    "helpers (`tui_prof.instrument.jax.trace_steps`, `TuiprofCallback`, `tuiprof_run`)."
)
PROGRAM_RUNS_TIP = (
    "XLA programs ran repeatedly here: `tuiprof summary --step-program NAME` (in the TUI: `P`) "
    "takes each run of one as a step, e.g. {name} ({runs} runs)."
)

MIXED_PRECISION_TIP = (
    "Consider mixed precision: only {p16:.1f}% of device compute is 16-bit. "
    "`keras.mixed_precision.set_global_policy('mixed_float16')` uses TensorCores on recent GPUs."
)
TENSOR_CORE_TIP = (
    "TensorCores: only {pct:.0f}% of the time of TensorCore-eligible ops runs on TensorCores — use "
    "16-bit types and dimensions that are multiples of 8."
)


def _shares(avg: StepAverage) -> dict[str, float]:
    if avg.step_time_ms <= 0:
        return {k: 0.0 for k in avg.breakdown_ms}
    return {k: 100.0 * v / avg.step_time_ms for k, v in avg.breakdown_ms.items()}


def bottleneck(avg: StepAverage | None, device_type: str) -> tuple[str, list[str]]:
    """A one-line verdict and the categories that deserve a look, largest first."""
    if avg is None:
        return "No steps found: no step-time breakdown.", []
    s = _shares(avg)
    flagged: list[str] = []
    rules = [
        ("input", INPUT_BOUND_PERCENT),
        ("kernel_launch", LAUNCH_BOUND_PERCENT),
        ("host_compute", HOST_COMPUTE_PERCENT),
        ("compilation", COMPILE_PERCENT),
        ("device_collectives", COLLECTIVES_PERCENT),
        ("device_to_device", DEVICE_TO_DEVICE_PERCENT),
        ("other", OTHER_BOUND_PERCENT),
    ]
    for cat, limit in rules:
        # On a CPU-only job host compute *is* the compute, not overhead to flag.
        if cat == "host_compute" and device_type == "CPU":
            continue
        if s.get(cat, 0.0) >= limit:
            flagged.append(cat)
    flagged.sort(key=lambda c: s.get(c, 0.0), reverse=True)
    top = max(s, key=lambda c: s[c]) if s else "other"
    if "input" in flagged:
        verdict = f"Input-bound: {s['input']:.1f}% of step time waits for input."
    elif flagged:
        c = flagged[0]
        verdict = f"{CATEGORY_LABELS[c]} is {s[c]:.1f}% of step time."
    elif top == "device_compute":
        verdict = f"Device-compute bound: {s[top]:.1f}% of step time is device compute."
    elif top == "host_compute" and device_type == "CPU":
        verdict = f"Compute-bound on the CPU: {s[top]:.1f}% of step time is host compute."
    else:
        verdict = f"Largest share: {CATEGORY_LABELS[top]} ({s[top]:.1f}% of step time)."
    if top not in flagged:
        flagged.append(top)
    return verdict, flagged


def recommendations(
    flagged: list[str],
    device_type: str,
    precision: Precision | None,
    tensor_core: TensorCoreUse | None,
    framework: str = "",
) -> list[str]:
    table = TIPS_BY_FRAMEWORK.get(framework, TIPS)
    pytorch = framework == "pytorch"
    tips: list[str] = []
    for cat in flagged:
        key = "host_compute_cpu" if cat == "host_compute" and device_type == "CPU" else cat
        if key in table and table[key] not in tips:
            tips.append(table[key])
    if (
        device_type == "GPU"
        and precision is not None
        and precision.compute_16bit_percent < LOW_16BIT_PERCENT
    ):
        tip = MIXED_PRECISION_TIP_PYTORCH if pytorch else MIXED_PRECISION_TIP
        tips.insert(0, tip.format(p16=precision.compute_16bit_percent))
    if (
        tensor_core is not None
        and tensor_core.percent_of_eligible_time is not None
        and tensor_core.percent_of_eligible_time < 50.0
    ):
        tip = TENSOR_CORE_TIP_PYTORCH if pytorch else TENSOR_CORE_TIP
        tips.append(tip.format(pct=tensor_core.percent_of_eligible_time))
    return tips


# The changes a new experiment can try, and the words by which advice names them (any format's
# tips: TensorFlow's above, and PyTorch's or JAX's where their readers word them alike).
CHANGES: dict[str, str] = {
    "mixed_precision": r"mixed precision|mixed_float16|bfloat16|autocast|\bAMP\b|16-bit",
    "xla": r"\bXLA\b(?! program)|jit_compile|torch\.compile",  # not "XLA programs ran …"
    "batch_size": r"larger batch|batch size|per-device batch",
    "input_pipeline": r"input pipeline|prefetch|num_parallel_calls|num_workers|DataLoader|tf\.data",
}


def suggested_changes(recommendations: Sequence[str]) -> tuple[str, ...]:
    """The CHANGES the advice names, in the order it names them (first tip first)."""
    found: list[str] = []
    for tip in recommendations:
        hits = []
        for change, pattern in CHANGES.items():
            m = re.search(pattern, tip, re.IGNORECASE if change != "xla" else 0)
            if m:
                hits.append((m.start(), change))
        found.extend(c for _, c in sorted(hits) if c not in found)
    return tuple(found)
