"""The hardware table's row for a profile's device, in the terms efficiency needs.

Contract: `device_row(env)` returns the devices' row (name, peak dense TFLOP/s per number format,
memory bandwidth) or None where the device is unknown. The one place efficiency meets the
hardware table (profiles/hardware.py), so the table's shape can change without touching MFU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_prof.model import Environment


@dataclass(frozen=True)
class PeakRow:
    name: str
    peaks: dict[str, float] = field(default_factory=dict)  # format → dense TFLOP/s per device
    bandwidth_gbs: float | None = None

    def peak_tflops(self, fmt: str) -> float | None:
        return self.peaks.get(fmt)


def device_row(env: Environment) -> PeakRow | None:
    """None until the hardware table lands (profiles/hardware.py)."""
    del env
    return None
