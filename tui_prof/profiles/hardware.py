"""One hardware table: what a profiled device's matrix units run, how fast, and what the vendor calls them.

Contract: pure, stdlib only. `device_spec(name=..., compute_capability=...)` maps what a profile
says about its device (a CUDA device name such as "Tesla V100-SXM2-16GB" or "NVIDIA H100 80GB HBM3",
"AMD Instinct MI300X", an XLA device type such as "AMD GPU - gfx942" or "Nvidia GPU (Hopper)", a
TPU's "TPU v6 lite", a CUDA compute capability 7.0 … 10.0, or "CPU") to a `DeviceSpec` row, or None
when it names no device this table knows. Advice (which number formats to suggest) and the
efficiency figures (peak FLOP/s, MFU) read the same rows, so they cannot disagree.

The rows themselves, with their sources, are in hardware_table.py; this module finds the row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from tui_prof.profiles.hardware_table import SPECS, DeviceSpec

# What profiles call devices, most specific first (searched case-insensitively).
_NAMES: tuple[tuple[str, str], ...] = (
    (r"V100S", "v100s_pcie"),
    (r"V100.*PCIE", "v100_pcie"),
    (r"V100", "v100_sxm2"),
    (r"\bT4\b", "t4"),
    (r"A100.*80\s*GB.*PCIE|A100.*PCIE.*80\s*GB", "a100_80gb_pcie"),
    (r"A100.*80\s*GB|PG509-210", "a100_80gb_sxm"),
    (r"A100", "a100_40gb"),
    (r"\bA10\b", "a10"),
    (r"\bL40S\b", "l40s"),
    (r"\bL40\b", "l40"),
    (r"\bL4\b", "l4"),
    (r"H100.*PCIE", "h100_pcie"),
    (r"H100.*NVL", "h100_nvl"),
    (r"H100|GH200", "h100_sxm"),
    (r"H200.*NVL", "h200_nvl"),
    (r"H200", "h200"),
    (r"B200", "b200"),
    (r"MI250X", "mi250x"),
    (r"MI250", "mi250"),
    (r"MI300A", "mi300a"),
    (r"MI300", "mi300x"),
    (r"MI325", "mi325x"),
    (r"MI350", "mi350x"),
    (r"MI355", "mi355x"),
)
# An architecture alone: formats are the architecture's, peaks one member's (exact=False).
_ARCHS: tuple[tuple[str, str], ...] = (
    (r"gfx90a", "mi250x"),
    (r"gfx942", "mi300x"),
    (r"gfx950", "mi355x"),
    (r"\bVolta\b", "v100_sxm2"),
    (r"\bTuring\b", "t4"),
    (r"\bAmpere\b", "a100_40gb"),
    (r"\bAda\b|Lovelace", "l40s"),
    (r"\bHopper\b", "h100_sxm"),
    (r"\bBlackwell\b", "b200"),
)
# CUDA compute capability (NVIDIA only: ROCm reports its own 9.x for gfx9 parts).
_CUDA_CC: dict[tuple[int, int], str] = {
    (7, 0): "v100_sxm2",
    (7, 5): "t4",
    (8, 0): "a100_40gb",
    (8, 6): "a10",
    (8, 9): "l40s",
    (9, 0): "h100_sxm",
    (10, 0): "b200",
}
# TPU generations as XLA and JAX name them: "TPU v4", "TPU v5 lite" (v5e), "TPU v5"/"TPU v5p",
# "TPU v6 lite"/"TPU v6e" (Trillium).
_TPU_NAME = re.compile(r"TPU\s*v?(\d)\s*(lite|e|p)?", re.IGNORECASE)
_TPU_ROWS: dict[tuple[str, str], str] = {
    ("2", ""): "tpu_v2",
    ("3", ""): "tpu_v3",
    ("4", ""): "tpu_v4",
    ("5", "lite"): "tpu_v5e",
    ("5", "e"): "tpu_v5e",
    ("5", ""): "tpu_v5p",
    ("5", "p"): "tpu_v5p",
    ("6", "lite"): "tpu_v6e",
    ("6", "e"): "tpu_v6e",
}


def vendor_of(text: str) -> str:
    """The vendor a device name or XLA device type names ("NVIDIA", "AMD", "Google"), else ""."""
    if re.search(r"\bAMD\b|Radeon|Instinct|gfx\d|ROCm|\bHIP\b", text, re.IGNORECASE):
        return "AMD"
    if re.search(r"NVIDIA|Tesla|GeForce|Quadro|RTX|CUDA|\bsm_?\d", text, re.IGNORECASE):
        return "NVIDIA"
    if re.search(r"\bTPU\b", text, re.IGNORECASE):
        return "Google"
    spec = device_spec(name=text)
    return spec.vendor if spec is not None else ""


def _cc(value: str | float | tuple[int, int] | None) -> tuple[int, int] | None:
    if value is None or value == "":
        return None
    if isinstance(value, tuple):
        return value
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(value))
    return (int(m.group(1)), int(m.group(2))) if m else None


def device_spec(
    name: str = "", compute_capability: str | float | tuple[int, int] | None = None
) -> DeviceSpec | None:
    """The row for a device, from its name (device name, XLA device type, gfx arch, TPU kind,
    "CPU") and, for NVIDIA GPUs, its CUDA compute capability ("9.0", 9.0 or (9, 0)); None when
    neither names a device in the table. A model's name wins; an architecture or compute
    capability alone gives an inexact row."""
    text = name.strip()
    for pattern, key in _NAMES:
        if re.search(pattern, text, re.IGNORECASE):
            return SPECS[key]
    m = _TPU_NAME.search(text)
    if m:
        tpu = _TPU_ROWS.get((m.group(1), (m.group(2) or "").lower()))
        return SPECS[tpu] if tpu else None
    for pattern, key in _ARCHS:
        if re.search(pattern, text, re.IGNORECASE):
            return replace(SPECS[key], exact=False)
    cc = _cc(compute_capability)
    if cc is not None and vendor_of(text) != "AMD" and cc in _CUDA_CC:
        return replace(SPECS[_CUDA_CC[cc]], exact=False)
    if re.fullmatch(r"(host\s*)?CPU.*", text, re.IGNORECASE):
        return SPECS["cpu"]
    return None


def row_of(names: Sequence[str], compute_capability: str = "") -> DeviceSpec | None:
    """The row for a profile's devices: the first of `names` (device model names, then the
    device type: "TPU v4", "AMD GPU - gfx942") the table knows, else, for an NVIDIA GPU it does
    not name (an A10G, a GeForce card), the CUDA compute capability's architecture. The one
    search every user of the table goes through (the advice, efficiency's peaks)."""
    for name in names:
        spec = device_spec(name=name)
        if spec is not None:
            return spec
    if compute_capability:
        return device_spec(name=next(iter(names), ""), compute_capability=compute_capability)
    return None
