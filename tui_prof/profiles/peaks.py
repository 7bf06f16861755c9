"""The hardware table's row for a profile's device, in the terms efficiency needs.

Contract: `device_row(env)` returns the devices' row (name, dense peak TFLOP/s per number
format, memory bandwidth) from the hardware table (profiles/hardware.py), or None where the table knows none of the
profile's device names or its device type. The one place efficiency meets the hardware table.
NVIDIA's "fp32" is the CUDA cores' peak (its Tensor Cores run fp32 math only as tf32). Peaks are
per framework device: half an MI250's for one of its GCDs, half a TPU v3 chip's for one core.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_prof.model import Environment
from tui_prof.profiles.hardware import row_of


@dataclass(frozen=True)
class PeakRow:
    name: str
    peaks: dict[str, float] = field(default_factory=dict)  # format → dense TFLOP/s per device
    bandwidth_gbs: float | None = None

    def peak_tflops(self, fmt: str) -> float | None:
        return self.peaks.get(fmt)


def device_row(env: Environment) -> PeakRow | None:
    """The first of the device names, then the device type, that the table knows."""
    if env.device_type.upper() == "CPU":
        return None  # no dense peak for "a CPU": MFU needs --peak-tflops there
    # names, then the device type, then the compute capability: hardware.row_of, the one search
    spec = row_of((*env.device_names, env.device_type), env.compute_capability)
    if spec is not None and spec.kind != "CPU":
        spec = spec.per_device()  # one MI250 GCD, one TPU v3 core: what a profiled device is
        peaks = dict(spec.matrix_tflops)
        fp32 = spec.peak_flops("fp32")
        if fp32 is not None:
            peaks["fp32"] = fp32 / 1e12
        name = spec.name if spec.exact else f"{spec.name} (by architecture)"
        return PeakRow(name, peaks, spec.memory_bandwidth_gbs)
    return None
