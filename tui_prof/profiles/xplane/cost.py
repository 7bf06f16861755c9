"""FLOPs of an XSpace profile: XLA's own cost per HLO op, and the HLO's math where it says more.

Contract: `xla_efficiency(ops, steps, env, precision, kernels, utilization, hlo)` sums the device
ops' FLOPs (the converter's `model_flop_rate` × self time: XLA's cost analysis of each op, the
figure XProf's op profile and roofline show; tb_tables.top_ops keeps them per op) and divides by
the steps found: the op statistics cover the whole profile, so FLOPs per step are the profile's
over its steps. `with_hlo(ops, hlo)` first gives each device op the FLOPs and bytes tuiprof
counts from the profile's own HLO (xplane/hlo_cost.py) where they are more: the converter counts
none for cuBLAS/hipBLASLt GEMM and cuDNN convolution calls, the bulk of a GPU job's math.
`hlo_efficiency` is the same from the HLO alone, for profiles read without the converter.
The number format is the HLO's where it counted the FLOPs (each dot's input type), else the
16-bit share's (the converter's or the HLO ops' types): 16-bit math is bf16 on TPUs and where
kernel names say bf16, else fp16; the rest fp32.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tui_prof.device_use import DeviceUtilization, Efficiency
from tui_prof.model import Environment, KernelStat, OpStat, Precision, StepBreakdown
from tui_prof.profiles.efficiency import efficiency

if TYPE_CHECKING:  # the HLO counter (numpy, the raw decoder) loads only for GPU profiles
    from tui_prof.profiles.xplane.hlo_cost import HloFlops

XLA_COST, XLA_HLO = "xla_cost", "xla_hlo"

_BF16 = re.compile(r"bf16|bfloat16|_BBS_", re.IGNORECASE)


def _formats(
    total: float, env: Environment, prec: Precision | None, kernels: Sequence[KernelStat]
) -> dict[str, float]:
    if prec is None:
        return {"unknown": total}
    share = prec.compute_16bit_percent / 100.0
    bf16 = "TPU" in env.device_type.upper() or any(_BF16.search(k.name) for k in kernels)
    out = {"bf16" if bf16 else "fp16": total * share, "fp32": total * (1.0 - share)}
    return {k: v for k, v in out.items() if v > 1e-9 * total}


def with_hlo(ops: Sequence[OpStat], hlo: HloFlops | None) -> tuple[list[OpStat], set[str]]:
    """The ops, each device op with the HLO's FLOPs and bytes where they exceed the converter's;
    the names of the ops whose count came from the HLO."""
    if hlo is None:
        return list(ops), set()
    out, took = [], set()
    for o in ops:
        c = hlo.ops.get(o.name) if o.where == "Device" else None
        if c is not None and c.flops > (o.flops or 0.0):
            o = dataclasses.replace(o, flops=c.flops, bytes_accessed=c.bytes_accessed or None)
            took.add(o.name)
        out.append(o)
    return out, took


def _busy(utilization: DeviceUtilization | None) -> int:
    return sum(1 for d in utilization.devices if d.busy_percent > 0) if utilization else 0


def xla_efficiency(
    ops: Sequence[OpStat],
    steps: Sequence[StepBreakdown],
    env: Environment,
    prec: Precision | None,
    kernels: Sequence[KernelStat],
    utilization: DeviceUtilization | None = None,
    hlo: HloFlops | None = None,
    from_hlo: set[str] | None = None,
) -> Efficiency | None:
    """MFU divides by the devices that were busy where the raw events say which; `from_hlo`
    names the ops whose FLOPs with_hlo took from `hlo`."""
    device = [o for o in ops if o.where == "Device"]
    total = sum(o.flops or 0.0 for o in device)
    if total <= 0:
        return None
    busy = sum(o.total_self_time_us for o in device)
    counted = sum(o.total_self_time_us for o in device if o.flops)
    step_ms = sum(s.step_time_ms for s in steps) / len(steps) if steps else None
    took = from_hlo or set()
    hlo_total = sum(o.flops or 0.0 for o in device if o.name in took)
    by_format = _formats(total - hlo_total, env, prec, kernels) if total > hlo_total else {}
    if hlo is not None and hlo_total > 0:
        for fmt, share in _hlo_shares(hlo).items():
            by_format[fmt] = by_format.get(fmt, 0.0) + share * hlo_total
    source = "+".join(
        s for s, used in ((XLA_COST, total > hlo_total), (XLA_HLO, hlo_total > 0)) if used
    )
    return efficiency(
        source=source,
        total=total,
        step_flops=[total / len(steps)] * len(steps) if steps else [],
        step_time_ms=step_ms,
        by_format=by_format,
        env=env,
        modelled_percent=100.0 * counted / busy if busy > 0 else None,
        devices=_busy(utilization) or None,
    )


def _hlo_shares(hlo: HloFlops) -> dict[str, float]:
    return {k: v / hlo.total for k, v in hlo.by_format.items() if hlo.total > 0}


def hlo_efficiency(
    hlo: HloFlops | None,
    steps: Sequence[StepBreakdown],
    env: Environment,
    utilization: DeviceUtilization | None = None,
) -> Efficiency | None:
    """Efficiency from the HLO's count alone (no op statistics: a profile read without the
    converter); the devices that ran counted ops are those MFU divides by."""
    if hlo is None:
        return None
    step_ms = sum(s.step_time_ms for s in steps) / len(steps) if steps else None
    return efficiency(
        source=XLA_HLO,
        total=hlo.total,
        step_flops=[hlo.total / len(steps)] * len(steps) if steps else [],
        step_time_ms=step_ms,
        by_format=dict(hlo.by_format),
        env=env,
        devices=len(hlo.devices) or _busy(utilization) or None,
    )
