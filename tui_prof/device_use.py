"""How the devices were used: busy time, the PyTorch plugin's GPU figures, FLOP efficiency (MFU)
and memory. Plain frozen data like model.py, which holds them in a ProfileSummary; apart because
they are the readers' newest and largest measures, not the step-time breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How a device is named on a session of several hosts, each numbering its devices from 0: the
# host, then the device, read apart (`tpuhost0 · /device:TPU:1`, shown `tpuhost0 · TPU:1`).
HOST_DEVICE_SEPARATOR = " · "


def host_device(host: str, device: str) -> str:
    """A device's name qualified by its host (the one rule for such labels)."""
    return f"{host}{HOST_DEVICE_SEPARATOR}{device}"


def is_plane_name(name: str) -> bool:
    """Whether a device name is an XSpace plane's (`/device:GPU:0`, on a host or not), not the
    device's model."""
    return "/device:" in name


@dataclass(frozen=True)
class DeviceBusy:
    """One device's busy share of the profile: the union of its ops' and kernels' time."""

    name: str
    busy_percent: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "busy_percent": self.busy_percent}


@dataclass(frozen=True)
class DeviceUtilization:
    """How busy the devices were over the whole profile, steps or not (mean over devices)."""

    profile_ms: float
    busy_percent: float
    devices: tuple[DeviceBusy, ...] = ()
    # "profile": busy over the profile's span (GPUs); "duty_cycle": the converter's TPU duty
    # cycle, each core over its own span of XLA programs (profiles/xplane/utilization.py)
    rule: str = "profile"

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile_ms": self.profile_ms,
            "busy_percent": self.busy_percent,
            "devices": [d.to_dict() for d in self.devices],
            "rule": self.rule,
        }


@dataclass(frozen=True)
class GpuStepMetric:
    """One step's GPU figures on one device (see GpuMetric)."""

    step: int
    utilization_percent: float
    sm_efficiency_percent: float | None = None
    occupancy_percent: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "gpu_utilization_percent": self.utilization_percent,
            "est_sm_efficiency_percent": self.sm_efficiency_percent,
            "est_achieved_occupancy_percent": self.occupancy_percent,
        }


@dataclass(frozen=True)
class GpuMetric:
    """The PyTorch profiler plugin's GPU figures for one device over all steps, and per step:
    utilisation (time any kernel runs), estimated SM efficiency and estimated achieved
    occupancy (None where the trace has no `blocks per SM` / occupancy args)."""

    rank: str  # the trace (rank) the device is in; "" for a one-trace session
    device: int
    name: str
    utilization_percent: float
    sm_efficiency_percent: float | None = None
    occupancy_percent: float | None = None
    steps: tuple[GpuStepMetric, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "name": self.name,
            "gpu_utilization_percent": self.utilization_percent,
            "est_sm_efficiency_percent": self.sm_efficiency_percent,
            "est_achieved_occupancy_percent": self.occupancy_percent,
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(frozen=True)
class UnmodelledOp:
    """An op that carries matrix math but got no FLOP count, and its share of device time."""

    name: str
    device_time_percent: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "device_time_percent": self.device_time_percent}


@dataclass(frozen=True)
class Efficiency:
    """FLOPs per step, the FLOP rate they were done at and its share of the devices' peak (MFU).

    `flops_source` says where the FLOPs come from: "xla_cost" (XLA's own cost per HLO op, as the
    converter reports it), "xla_hlo" (the matrix math of the profile's own HLO, counted by
    tuiprof), "flops_arg" (a `flops` arg on the trace's ops), "shapes" (tuiprof's models of
    GEMMs, convolutions and attention from recorded shapes), or two joined by "+". The peak is per device, for the number format most of the FLOPs ran in
    (`formats`: share of FLOPs per format); `peak_source` names the hardware table's row or the
    user's `--peak-tflops`. MFU = achieved ÷ (peak × devices); None where a part is unknown.
    """

    flops_source: str
    flops_total: float
    flops_per_step: float | None
    achieved_tflops: float | None
    peak_tflops: float | None
    peak_format: str | None
    peak_source: str
    devices: int
    mfu_percent: float | None
    step_flops: tuple[float, ...] = ()
    formats: dict[str, float] = field(default_factory=dict)
    modelled_device_percent: float | None = None
    unmodelled: tuple[UnmodelledOp, ...] = ()
    memory_bandwidth_gbs: float | None = None  # per device, for the roofline

    def to_dict(self) -> dict[str, Any]:
        return {
            "flops_per_step": self.flops_per_step,
            "achieved_tflops": self.achieved_tflops,
            "peak_tflops": self.peak_tflops,
            "peak_format": self.peak_format,
            "mfu_percent": self.mfu_percent,
            "flops_source": self.flops_source,
            "peak_source": self.peak_source,
            "devices": self.devices,
            "flops_total": self.flops_total,
            "step_flops": list(self.step_flops),
            "formats": dict(self.formats),
            "modelled_device_percent": self.modelled_device_percent,
            "unmodelled_ops": [u.to_dict() for u in self.unmodelled],
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
        }


@dataclass(frozen=True)
class DeviceMemory:
    """One device's (or allocator's) memory peaks, in MB (2**20 bytes)."""

    name: str
    peak_allocated_mb: float | None
    peak_reserved_mb: float | None = None
    capacity_mb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "peak_allocated_mb": self.peak_allocated_mb,
            "peak_reserved_mb": self.peak_reserved_mb,
            "capacity_mb": self.capacity_mb,
        }


@dataclass(frozen=True)
class Allocator:
    """An op by the memory its calls allocated (MB over the profile) and how many allocations."""

    op: str
    allocated_mb: float
    allocations: int

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "allocated_mb": self.allocated_mb, "allocations": self.allocations}


@dataclass(frozen=True)
class MemoryUse:
    """Device memory over the profile: peaks per device, per step, a series, the top allocators.

    `source`: "kineto_memory_events" (PyTorch `profile_memory=True`), "xla_memory_profile"
    (the converter's memory profile) or "memory_profile_json" (an older session's file).
    `relative`: the trace recorded allocations but not the allocator's totals, so peaks are
    above the memory in use when the profile began. Peaks are of the device with the highest.
    """

    source: str
    peak_allocated_mb: float | None
    peak_reserved_mb: float | None
    devices: tuple[DeviceMemory, ...] = ()
    step_peak_allocated_mb: tuple[float, ...] = ()
    series_mb: tuple[tuple[float, float], ...] = ()  # (ms from the profile's start, MB)
    top_allocators: tuple[Allocator, ...] = ()
    relative: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_allocated_mb": self.peak_allocated_mb,
            "peak_reserved_mb": self.peak_reserved_mb,
            "source": self.source,
            "relative": self.relative,
            "devices": [d.to_dict() for d in self.devices],
            "step_peak_allocated_mb": list(self.step_peak_allocated_mb),
            "series_mb": [list(p) for p in self.series_mb],
            "top_allocators": [a.to_dict() for a in self.top_allocators],
        }
