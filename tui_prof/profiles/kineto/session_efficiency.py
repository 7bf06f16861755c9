"""A Kineto session's FLOPs, MFU and memory: every rank's counts combined.

Contract: `combine(results, steps, env, op_times)` returns (Efficiency or None, MemoryUse or None,
FLOPs per op name). Step FLOPs are summed over ranks for the step numbers the session keeps (each
rank's devices did their share of the step), as are the devices the MFU divides by. Math ops
that got no count are named with their share of the session's device self time. An op's float32
FLOPs count as TF32 for the share of its matrix kernels' time that ran as TF32 (cuDNN's default
for convolutions): the peak they ran against is the Tensor Cores', not the CUDA cores'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tui_prof.device_use import DeviceMemory, Efficiency, MemoryUse, UnmodelledOp
from tui_prof.model import Environment, KernelStat, StepBreakdown
from tui_prof.profiles.efficiency import efficiency
from tui_prof.profiles.kernel_names import is_tf32_kernel, uses_matrix_units
from tui_prof.profiles.kineto.memory import top_allocators
from tui_prof.profiles.kineto.rank import RankResult

UNMODELLED_SHOWN = 8


def combine(
    results: Sequence[RankResult],
    steps: Sequence[StepBreakdown],
    env: Environment,
    device_us: Mapping[str, float],
    kernels: Sequence[KernelStat] = (),
) -> tuple[Efficiency | None, MemoryUse | None, dict[str, float]]:
    counts = [r.extras.flops for r in results if r.extras is not None]
    per_op: dict[str, float] = {}
    by_format: dict[str, float] = {}
    sources: set[str] = set()
    uncovered: set[str] = set()
    covered: set[str] = set()
    total = 0.0
    for c in counts:
        for name, (f, _n) in c.per_op.items():
            per_op[name] = per_op.get(name, 0.0) + f
        for fmt, f in c.by_format.items():
            by_format[fmt] = by_format.get(fmt, 0.0) + f
        sources |= c.sources
        uncovered |= c.uncovered
        covered |= c.covered
        total += c.total
    step_flops = [sum(c.step_flops.get(s.step, 0.0) for c in counts) for s in steps]
    step_ms = sum(s.step_time_ms for s in steps) / len(steps) if steps else None
    device_total = sum(device_us.values())
    modelled = None
    unmodelled: list[UnmodelledOp] = []
    if device_total > 0:
        counted = per_op.keys() | covered
        modelled = 100.0 * sum(t for n, t in device_us.items() if n in counted) / device_total
        missing = sorted(
            ((n, device_us.get(n, 0.0)) for n in uncovered - counted),
            key=lambda kv: -kv[1],
        )
        unmodelled = [
            UnmodelledOp(n, 100.0 * t / device_total)
            for n, t in missing[:UNMODELLED_SHOWN]
            if t > 0
        ]
    source = "+".join(s for s in ("flops_arg", "shapes") if s in sources)
    eff = efficiency(
        source=source,
        total=total,
        step_flops=step_flops if steps else [],
        step_time_ms=step_ms,
        by_format=_as_tf32(by_format, per_op, kernels),
        env=env,
        modelled_percent=modelled,
        unmodelled=unmodelled,
    )
    return eff, _memory(results, steps), per_op


_CUDA_CORE_MATH = ("ffma", "simt", "sgemm")


def _as_tf32(
    by_format: Mapping[str, float], per_op: Mapping[str, float], kernels: Sequence[KernelStat]
) -> dict[str, float]:
    """float32 FLOPs moved to "tf32" in proportion to their op's TF32 kernel time against its
    float32 matrix kernels on the CUDA cores (`…_ffma_…`, `sgemm`); elementwise kernels beside
    them (layout changes, bias) do no counted math and weigh nothing."""
    out = dict(by_format)
    fp32 = out.get("fp32", 0.0)
    if fp32 <= 0:
        return out
    tf32_us: dict[str, float] = {}
    cores_us: dict[str, float] = {}
    for k in kernels:
        if is_tf32_kernel(k.name):
            tf32_us[k.op_name] = tf32_us.get(k.op_name, 0.0) + k.total_duration_us
        elif not uses_matrix_units(k.name) and any(m in k.name for m in _CUDA_CORE_MATH):
            cores_us[k.op_name] = cores_us.get(k.op_name, 0.0) + k.total_duration_us
    moved = 0.0
    for op, tf32 in tf32_us.items():
        moved += per_op.get(op, 0.0) * tf32 / (tf32 + cores_us.get(op, 0.0))
    moved = min(moved, fp32)
    if moved > 0:
        out["fp32"] = fp32 - moved
        out["tf32"] = out.get("tf32", 0.0) + moved
    return out


def _memory(results: Sequence[RankResult], steps: Sequence[StepBreakdown]) -> MemoryUse | None:
    ranks = [r for r in results if r.extras is not None and r.extras.memory is not None]
    if not ranks:
        return None
    devices: list[DeviceMemory] = []
    allocators: dict[str, tuple[float, int]] = {}
    best = None
    for r in ranks:
        m = r.extras.memory if r.extras else None
        assert m is not None
        prefix = f"{r.name} " if len(ranks) > 1 else ""
        devices.extend(
            DeviceMemory(prefix + d.name, d.peak_allocated_mb, d.peak_reserved_mb)
            for d in m.devices
        )
        for op, (b, n) in m.allocators.items():
            tb, tn = allocators.get(op, (0.0, 0))
            allocators[op] = (tb + b, tn + n)
        peak = max((v for _, v in m.series), default=0.0)
        if best is None or peak > best[0]:
            best = (peak, m)
    assert best is not None
    m = best[1]
    on_device = [d for d in devices if not d.name.endswith("CPU")] or devices
    top = max(on_device, key=lambda d: d.peak_allocated_mb or 0.0)
    t0 = m.series[0][0] if m.series else 0.0
    return MemoryUse(
        source="kineto_memory_events",
        peak_allocated_mb=top.peak_allocated_mb,
        peak_reserved_mb=top.peak_reserved_mb,
        devices=tuple(devices),
        step_peak_allocated_mb=tuple(m.step_peaks[s.step] for s in steps if s.step in m.step_peaks),
        series_mb=tuple(((t - t0) / 1e3, v) for t, v in m.series),
        top_allocators=tuple(top_allocators(allocators)),
        relative=any(
            r.extras is not None and r.extras.memory is not None and r.extras.memory.relative
            for r in ranks
        ),
    )
