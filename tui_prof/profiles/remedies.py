"""What to try, in the words of the profile's framework and for the device's hardware row.

Contract: pure text. Each remedy is a function of `Facts` (framework, device row, measured
16-bit share), so advice never names a number format the device's matrix units lack (bf16 or
TF32 on a V100), a matrix unit under another vendor's word ("TensorCores" on AMD), or another
framework's API (`tf.function` to a JAX user). advice.py decides which remedies a profile gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui_prof.model import Precision
from tui_prof.profiles.hardware_table import DeviceSpec

# Mixed precision is advice only below this share of 16-bit device compute.
ALREADY_16BIT_PERCENT = 90.0
# Below this share of 16-bit device compute the mixed-precision recipe leads the tips; from it
# on, a tip that gives the recipe also says that the 32-bit rest is often meant to stay 32-bit.
PARTLY_16BIT_PERCENT = 10.0
FRAMEWORKS = ("tensorflow", "pytorch", "jax")


@dataclass(frozen=True)
class Facts:
    """What the advice may rely on: measured or read from the profile, never guessed."""

    framework: str  # "tensorflow", "pytorch", "jax", "" (unknown)
    device_type: str  # the profile's: "GPU", "CPU", "TPU v4", "AMD GPU - gfx942", …
    spec: DeviceSpec | None  # the hardware table's row, None where the device is not in it
    vendor: str  # "NVIDIA", "AMD", "Google", ""
    precision: Precision | None = None
    is_training: bool | None = None  # None: the profile does not say
    sixteen_bit_said: bool = False  # a tip already says how to go 16-bit: others need not
    compute_said: bool = False  # the device-compute tip (16-bit, TF32, shapes) is given above
    has_events: bool = False  # the profile holds its events: tuiprof's Timeline can show them

    @property
    def cpu_only(self) -> bool:
        return self.device_type == "CPU"

    @property
    def tpu(self) -> bool:
        return self.vendor == "Google" or "TPU" in self.device_type

    @property
    def device(self) -> str:
        """How to name the device in a sentence: "GPU", "TPU", "CPU"."""
        return "CPU" if self.cpu_only else "TPU" if self.tpu else "GPU"

    @property
    def matrix_units(self) -> str:
        """The vendor's word for its matrix units; "" where unknown (no such word is used)."""
        if self.spec is not None:
            return self.spec.matrix_units
        return {"NVIDIA": "Tensor Cores", "AMD": "Matrix Cores", "Google": "MXU"}.get(
            self.vendor, ""
        )

    @property
    def mostly_16bit(self) -> bool:
        p = self.precision
        return p is not None and p.compute_16bit_percent >= ALREADY_16BIT_PERCENT

    @property
    def partly_16bit(self) -> bool:
        """Some device compute is 16-bit, not most of it (mixed precision on, or casts)."""
        p = self.precision
        return (
            p is not None
            and PARTLY_16BIT_PERCENT <= p.compute_16bit_percent < ALREADY_16BIT_PERCENT
        )

    def has(self, fmt: str) -> bool | None:
        """Whether the device's matrix units run `fmt`; None where the row is unknown."""
        if self.spec is not None:
            return self.spec.supports(fmt)
        if self.tpu:
            return fmt == "bf16"  # every TPU generation's MXU multiplies bf16
        return None


def sixteen_bit(f: Facts) -> str:
    """How to move matmuls to 16-bit on this device in this framework; "" where nothing fits
    (already 16-bit, a CPU, a device whose matrix units run no 16-bit format)."""
    if f.mostly_16bit or f.cpu_only or f.sixteen_bit_said:
        return ""
    bf16, fp16 = f.has("bf16"), f.has("fp16")
    if bf16 is False and fp16 is False:
        return ""
    if f.framework == "pytorch":
        if bf16:
            return '`torch.autocast("cuda", dtype=torch.bfloat16)` around the forward pass'
        if fp16:
            return (
                '`torch.autocast("cuda", dtype=torch.float16)` with a `torch.amp.GradScaler` '
                "(the one 16-bit format this GPU's Tensor Cores run)"
            )
        return (
            '`torch.autocast("cuda")` around the forward pass (bfloat16 where the GPU has it, '
            "else float16 with a `torch.amp.GradScaler`)"
        )
    if f.framework == "jax":
        if bf16:
            return (
                "bfloat16 parameters and activations (cast with `jnp.bfloat16`, keep an f32 "
                'master copy) or `jax.default_matmul_precision("bfloat16")` for f32 matmuls'
            )
        return (
            "float16 parameters and activations with loss scaling (the one 16-bit format "
            "this device's matrix units run)"
        )
    if bf16:
        return "`keras.mixed_precision.set_global_policy('mixed_bfloat16')`"
    if fp16:
        return "`keras.mixed_precision.set_global_policy('mixed_float16')`"
    return "Keras mixed precision (`'mixed_bfloat16'` where the device has bfloat16, else `'mixed_float16'`)"


def rest_in_32bit(f: Facts) -> str:
    """Where some device compute is 16-bit already: what its 32-bit rest often is, after the
    recipe (an autocast run was told to use autocast and nothing more); "" elsewhere, or where a
    tip has said it."""
    if not f.partly_16bit or f.cpu_only or f.sixteen_bit_said or f.precision is None:
        return ""
    return (
        f"{f.precision.compute_16bit_percent:.0f}% of device compute is 16-bit already; the 32-bit "
        "rest is often what should stay 32-bit (reductions, losses, the optimizer): look for "
        "matmuls and convolutions still in 32-bit in the kernel table"
    )


def _then(tip: str, f: Facts) -> str:
    """`tip`, then what the 32-bit rest often is where some device compute is 16-bit already."""
    rest = rest_in_32bit(f)
    return f"{tip} {rest[0].upper()}{rest[1:]}." if rest else tip


def tf32(f: Facts) -> str:
    """TF32 for float32 matmuls, only on NVIDIA rows whose Tensor Cores run it."""
    if f.mostly_16bit or f.vendor != "NVIDIA" or not f.has("tf32"):
        return ""
    if f.framework == "pytorch":
        return "TF32 for float32 matmuls (`torch.backends.cuda.matmul.allow_tf32 = True`)"
    if f.framework == "jax":
        return 'TF32 for f32 matmuls (`jax.default_matmul_precision("tensorfloat32")`)'
    return (
        "TF32 for float32 matmuls (`tf.config.experimental.enable_tensor_float_32_execution(True)`)"
    )


def shapes(f: Facts) -> str:
    """Matrix shapes the matrix units like, in the vendor's words."""
    if f.tpu:
        return "feature dimensions in multiples of 128 and batch sizes in multiples of 8 (the MXU's tiles)"
    if f.vendor == "NVIDIA":
        return "matrix dimensions in multiples of 8 for the Tensor Cores"
    if f.vendor == "AMD":
        return "matrix dimensions in multiples of 16 for the Matrix Cores"
    return "matrix dimensions in multiples of 8" if f.device == "GPU" else ""


def _join(parts: list[str]) -> str:
    return ", ".join(p for p in parts if p)


def device_compute(f: Facts) -> str:
    if f.framework == "pytorch":
        how = _join(
            [
                sixteen_bit(f),
                "`torch.compile`",
                "`channels_last` for convolutions (`model.to(memory_format=torch.channels_last)`)",
                tf32(f),
                shapes(f),
            ]
        )
    elif f.framework == "jax":
        how = _join(
            [
                sixteen_bit(f),
                tf32(f),
                "one `jax.jit` over the whole step, compiled and fused as one program",
                shapes(f),
            ]
        )
    else:
        how = _join([sixteen_bit(f), "XLA (`jit_compile=True`)", tf32(f), shapes(f)])
    return _then(f"Device compute: the {f.device} is busy — speed up the math itself: {how}.", f)


def mixed_precision(f: Facts) -> str:
    """Where little device compute is 16-bit: the one change that uses the matrix units."""
    how = sixteen_bit(f)
    if not how or f.precision is None:
        return ""
    units = f" runs matmuls and convolutions on the {f.matrix_units}" if f.matrix_units else ""
    return (
        f"Consider mixed precision: only {f.precision.compute_16bit_percent:.1f}% of device "
        f"compute is 16-bit — {how}{units}."
    )


def small_compute_bound(f: Facts, device_compute_percent: float) -> str:
    """What a device-compute tip can gain where device compute is a small part of the step."""
    return (
        f"Worth it later: {f.device} compute is only {device_compute_percent:.1f}% of this step, "
        "so this can save at most that until the rest of the step shrinks."
    )


def matrix_unit_use(f: Facts, percent: float) -> str:
    """Matrix-unit-eligible ops that run off the matrix units."""
    if not f.matrix_units:
        return ""
    if f.compute_said:  # its 16-bit, TF32 and shapes are the same: not said twice
        how = "the device-compute tip above says how to put more on them"
    else:
        how = _join([sixteen_bit(f), tf32(f), shapes(f)]) or shapes(f)
    no_32bit = f.has("tf32") is False and f.has("fp32") is False and not f.tpu
    if f.precision is not None and not f.mostly_16bit and no_32bit:
        # 32-bit math the units cannot run (a V100's float32): shapes alone move nothing on.
        go16 = sixteen_bit(f) or "the mixed precision above"
        then = "" if f.compute_said else f", then {shapes(f)}"
        how = (
            f"they run no 32-bit format on this {f.device}, so float32 matmuls stay off them "
            f"whatever their shapes: {go16}{then}"
        )
    return _then(
        f"{f.matrix_units}: only {percent:.0f}% of the kernel time of ops that could run on "
        f"{f.matrix_units} (matmul, convolution, linear) does" + (f" — {how}." if how else "."),
        f,
    )


# --- remedies per category and framework ---------------------------------------------------

TENSORFLOW: dict[str, str] = {
    "input": "Input: overlap the input pipeline with training — tf.data `.prefetch(tf.data.AUTOTUNE)`, "
    "`num_parallel_calls=tf.data.AUTOTUNE` in `.map`, `.cache()` small datasets; move Python "
    "(`py_function`) work out of the pipeline.",
    "kernel_launch": "Kernel launch: fewer, larger kernels — a larger batch, `jit_compile=True` (XLA) "
    "to fuse ops, and `steps_per_execution` in `model.compile` to cut per-step host overhead; "
    "with tf.data on the same CPUs, `TF_GPU_THREAD_MODE=gpu_private`.",
    "host_compute": "Host compute: ops running on the CPU inside the step — check the top host ops; move "
    "preprocessing into tf.data or onto the device.",
    "compilation": "Compilation: recompiling during steps — keep input shapes stable (pad, fixed batch) "
    "and profile after warm-up steps.",
    "device_collectives": "Collectives: less time in communication — larger per-device batch, gradient "
    "accumulation, or overlap communication with compute.",
    "device_to_device": "Device to device: copies between devices — check placement and avoid "
    "unnecessary transfers.",
    "other": "All others: time the profile does not attribute (Python, I/O, synchronisation) — look at "
    "the host threads in {timeline}; `tf.function` the step and raise `steps_per_execution`.",
    "host_compute_cpu": "CPU job: faster compute on the CPU — a larger batch, XLA (`jit_compile=True`), and "
    "oneDNN's threads set to the physical cores (`tf.config.threading`).",
}

PYTORCH: dict[str, str] = {
    "input": "Input: the step waits for data — `DataLoader(num_workers=N, pin_memory=True, "
    "persistent_workers=True)` (raise `prefetch_factor` if workers keep up only in bursts); move "
    "per-sample CPU work (decoding, augmentation) into the workers; copy batches with "
    "`.to(device, non_blocking=True)`.",
    "kernel_launch": "Kernel launch: time the CPU spends launching kernels — fewer, larger ones: "
    'graphs (`torch.compile(model, mode="reduce-overhead")` or `torch.cuda.CUDAGraph`), '
    "`torch.compile` to fuse elementwise ops, a larger batch; avoid host syncs (`.item()`, "
    "`.cpu()`, printing tensors) inside the step.",
    "host_compute": "Host compute: PyTorch ops run on the CPU inside the step — check the top host "
    "ops; keep tensors on the GPU; `torch.compile` cuts Python and dispatcher overhead.",
    "compilation": "Compilation: `torch.compile` recompiles during steps — keep shapes stable (pad "
    "to fixed sizes, `dynamic=False`) and profile after warm-up (`torch.profiler.schedule`).",
    "device_collectives": "Collectives: less time in communication — let DDP overlap it with the "
    "backward pass (`bucket_cap_mb`, `gradient_as_bucket_view=True`), accumulate gradients under "
    "`model.no_sync()`, or use a larger per-GPU batch.",
    "device_to_device": "Memory copies: less time in memcpy/memset — `pin_memory=True` with "
    "`.to(device, non_blocking=True)`; avoid `.cpu()`/`.item()` round trips and copies between "
    "devices inside the step.",
    "other": "All others: time no kernel, copy or op covers — the host waiting for the GPU "
    "(`.item()`, `.cpu()`, `torch.cuda.synchronize()`, blocking copies) or for other ranks, or "
    "Python between ops; look at the host threads in {timeline}, remove syncs "
    "from the step; `torch.compile` and CUDA graphs cut Python overhead.",
    "host_compute_cpu": "CPU job: faster compute on the CPU — `torch.compile`, `torch.set_num_threads` "
    "to the physical cores, `channels_last` for convolutions, a larger batch.",
}

JAX: dict[str, str] = {
    "input": "Input: the step waits for data — an input pipeline that prefetches to the device "
    "(`tf.data` with `.prefetch`, `grain` with worker processes, or "
    "`flax.jax_utils.prefetch_to_device`); keep host preprocessing off the step's critical path.",
    "kernel_launch": "Kernel launch: many small dispatches — `jax.jit` the whole train step (one "
    "compiled program per step), `jax.lax.scan` over layers or micro-steps, a larger batch.",
    "host_compute": "Host compute: work on the CPU inside the step — NumPy or Python between "
    "jitted calls; move it into the jitted step or into the input pipeline.",
    "compilation": "Compilation: recompiling during steps — stable shapes (pad, fixed batch), "
    "`static_argnums` only for values that rarely change; find the culprit with "
    "`jax.config.update('jax_log_compiles', True)`.",
    "device_collectives": "Collectives: less time in communication — a larger per-device batch, "
    "shardings (`jax.sharding.NamedSharding`, `shard_map`) that let the compiler overlap communication "
    "with compute, gradient accumulation.",
    "device_to_device": "Device to device: copies between devices — check the shardings "
    "(`jax.device_put` with the intended sharding), avoid resharding inside the step; "
    "`donate_argnums` lets JAX reuse the state's buffers.",
    "other": "All others: time no op covers — Python between jitted calls or host "
    "syncs inside the loop (`.block_until_ready()`, `float(x)`, `np.asarray(x)`); `jax.jit` "
    "the whole step (`static_argnums` for its non-array arguments, `donate_argnums` for the "
    "train state) and keep the loop's values on the device.",
    "host_compute_cpu": "CPU job: faster compute on the CPU — `jax.jit` the whole step, a larger batch, "
    "one process per socket with its threads on the physical cores.",
}

BY_FRAMEWORK: dict[str, dict[str, str]] = {
    "tensorflow": TENSORFLOW,
    "pytorch": PYTORCH,
    "jax": JAX,
}


def remedy(category: str, f: Facts) -> str:
    """The remedy for a flagged category, in the framework's words ("" where none)."""
    if category == "device_compute":
        return device_compute(f)
    table = BY_FRAMEWORK.get(f.framework, TENSORFLOW)
    key = "host_compute_cpu" if category == "host_compute" and f.cpu_only else category
    return table.get(key, "").replace("{timeline}", timeline(f))


def timeline(f: Facts) -> str:
    """Where to see the host threads: tuiprof's own Timeline where the profile holds its events
    (it answers without a browser), a trace viewer for the older tool files, which hold none."""
    if f.has_events:
        return "the Timeline tab (`5`) or `tuiprof timeline`"
    return "a trace viewer (TensorBoard's or Perfetto)"


def step_markers(f: Facts) -> str:
    """How to mark steps, in the framework's words (training or serving alike unless known)."""
    what = (
        "each training step" if f.is_training else "each step (a training step, or a batch served)"
    )
    how = {
        "jax": '`with jax.profiler.StepTraceAnnotation("train", step_num=step):` or tuiprof\'s '
        "`tui_prof.instrument.jax.trace_steps`",
        "tensorflow": '`with tf.profiler.experimental.Trace("train", step_num=step, _r=1):`, '
        "or tuiprof's `TuiprofCallback` for Keras",
        "pytorch": "`torch.profiler.profile(schedule=...)` with `prof.step()` after each step "
        "(ProfilerStep#N)",
    }.get(f.framework)
    if how is None:
        how = (
            'JAX: `with jax.profiler.StepTraceAnnotation("train", step_num=step):`; TensorFlow: '
            '`with tf.profiler.experimental.Trace("train", step_num=step, _r=1):`; or tuiprof\'s '
            "helpers (`tui_prof.instrument.jax.trace_steps`, `TuiprofCallback`, `tuiprof_run`)"
        )
    return f"No steps: mark {what} to get a step-time breakdown — {how}."
