"""Achieved FLOP/s, MFU and the roofline, from FLOPs any reader counted and the hardware's peaks.

Contract: pure functions. `efficiency(...)` turns FLOPs per step and the step time into an
Efficiency: achieved FLOP/s over all devices, and MFU against the devices' dense peak for the
number format most FLOPs ran in (the hardware table's row for the device, or the user's
`--peak-tflops`, `with_peak`). Where FLOPs ran in several formats, the peak is their FLOP-weighted
harmonic mean (the time the math would take at each format's peak, summed) and the format reads
"mixed". Per op: `op_rate`, `intensity` and `roofline` (memory- or compute-bound, and the share
of its roof reached), the roof being min(peak, bandwidth × FLOPs per byte).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from tui_prof.device_use import Efficiency, UnmodelledOp, is_plane_name
from tui_prof.model import Environment, OpStat, ProfileSummary
from tui_prof.profiles import peaks

DOMINANT_SHARE = 0.9  # a format with this share of the FLOPs names the peak alone
USER_PEAK = "--peak-tflops"


def _shares(by_format: Mapping[str, float]) -> dict[str, float]:
    total = sum(by_format.values())
    if total <= 0:
        return {}
    return {k: 100.0 * v / total for k, v in sorted(by_format.items(), key=lambda kv: -kv[1])}


def _table_peak(
    env: Environment, by_format: Mapping[str, float]
) -> tuple[float | None, str | None, str, float | None]:
    """(peak TFLOP/s per device, format, source, bandwidth GB/s) from the hardware table."""
    known = {k: v for k, v in by_format.items() if k != "unknown" and v > 0}
    if not known:
        return None, None, "the math's number format is not recorded", None
    dominant = max(known, key=lambda k: known[k])
    row = peaks.device_row(env)
    if row is None:
        return None, dominant, _no_row(env), None
    total = sum(known.values())
    if known[dominant] >= DOMINANT_SHARE * total:
        p = row.peak_tflops(dominant)
        if p is None:
            return None, dominant, f"{row.name}: no {dominant} peak in the hardware table", None
        return p, dominant, f"{row.name} {dominant} dense", row.bandwidth_gbs
    seconds = 0.0
    for fmt, f in known.items():
        p = row.peak_tflops(fmt)
        if p is None:
            return None, "mixed", f"{row.name}: no {fmt} peak in the hardware table", None
        seconds += f / p
    return total / seconds, "mixed", f"{row.name} mixed formats, dense", row.bandwidth_gbs


def _no_row(env: Environment) -> str:
    """Why the table has no peak for these devices, naming them."""
    if env.device_type.upper() == "CPU":
        return "the hardware table has no dense peak for a CPU"
    models = [n for n in env.device_names if not is_plane_name(n)]
    name = models[0] if models else env.device_type
    if not name or name.upper() in ("GPU", "UNKNOWN"):
        return "the profile does not name the device's model"
    return f"{name} is not in the hardware table"


def efficiency(
    *,
    source: str,
    total: float,
    step_flops: Sequence[float],
    step_time_ms: float | None,
    by_format: Mapping[str, float],
    env: Environment,
    modelled_percent: float | None = None,
    unmodelled: Sequence[UnmodelledOp] = (),
    devices: int | None = None,
) -> Efficiency | None:
    """None where nothing was counted; `devices` (those that did the work) defaults to the
    environment's device count."""
    if total <= 0:
        return None
    per_step = sum(step_flops) / len(step_flops) if step_flops else None
    achieved = None
    if per_step is not None and step_time_ms:
        achieved = per_step / (step_time_ms / 1e3) / 1e12
    peak, fmt, peak_source, bandwidth = _table_peak(env, by_format)
    devices = max(1, devices or env.device_count)
    eff = Efficiency(
        flops_source=source,
        flops_total=total,
        flops_per_step=per_step,
        achieved_tflops=achieved,
        peak_tflops=peak,
        peak_format=fmt,
        peak_source=peak_source,
        devices=devices,
        mfu_percent=None,
        step_flops=tuple(step_flops),
        formats=_shares(by_format),
        modelled_device_percent=modelled_percent,
        unmodelled=tuple(unmodelled),
        memory_bandwidth_gbs=bandwidth,
    )
    eff = _with_mfu(eff)
    return _tf32(eff, env) if fmt == "fp32" else eff


def _tf32(e: Efficiency, env: Environment) -> Efficiency:
    """fp32 math above the fp32 peak ran as TF32 on Tensor Cores (cuDNN's default for
    convolutions): MFU against the tf32 peak then, and the source says so."""
    row = peaks.device_row(env)
    tf32 = row.peak_tflops("tf32") if row is not None else None
    if e.mfu_percent is None or e.mfu_percent <= 100.0 or tf32 is None or row is None:
        return e
    return _with_mfu(
        dataclasses.replace(
            e,
            peak_tflops=tf32,
            peak_format="tf32",
            peak_source=f"{row.name} tf32 dense (fp32 math faster than the fp32 peak ran as TF32)",
        )
    )


def _with_mfu(e: Efficiency) -> Efficiency:
    mfu = None
    if e.achieved_tflops is not None and e.peak_tflops:
        mfu = 100.0 * e.achieved_tflops / (e.peak_tflops * e.devices)
    return dataclasses.replace(e, mfu_percent=mfu)


def with_peak(summary: ProfileSummary, tflops: float | None) -> ProfileSummary:
    """The summary with MFU against the user's peak per device (`--peak-tflops`)."""
    if tflops is None or summary.efficiency is None:
        return summary
    e = dataclasses.replace(summary.efficiency, peak_tflops=tflops, peak_source=USER_PEAK)
    return dataclasses.replace(summary, efficiency=_with_mfu(e))


def op_rate(op: OpStat) -> float | None:
    """Achieved TFLOP/s of a device op over its own device time."""
    if op.flops is None or op.where != "Device" or op.total_self_time_us <= 0:
        return None
    return op.flops / (op.total_self_time_us * 1e-6) / 1e12


def intensity(op: OpStat) -> float | None:
    """FLOPs per byte moved (arithmetic intensity)."""
    if op.flops is None or not op.bytes_accessed:
        return None
    return op.flops / op.bytes_accessed


def roofline(op: OpStat, e: Efficiency | None) -> tuple[str, float] | None:
    """("memory" or "compute", percent of its roof reached), where bytes and peaks are known."""
    rate, ai = op_rate(op), intensity(op)
    if rate is None or ai is None or e is None or not e.peak_tflops:
        return None
    if not e.memory_bandwidth_gbs:
        return None
    mem_roof = e.memory_bandwidth_gbs * ai / 1e3  # TFLOP/s the bandwidth allows at this AI
    roof = min(e.peak_tflops, mem_roof)
    bound = "memory" if mem_roof < e.peak_tflops else "compute"
    return bound, 100.0 * rate / roof
