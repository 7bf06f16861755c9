"""FLOPs of an XSpace profile: XLA's own cost per HLO op, as TensorBoard's converter reports it.

Contract: `xla_efficiency(ops, steps, env, precision, kernels)` sums the device ops' FLOPs (the
converter's `model_flop_rate` × self time: XLA's cost analysis of each op, the figure XProf's op
profile and roofline show; tb_tables.top_ops keeps them per op) and divides by the steps found:
the op statistics cover the whole profile, so FLOPs per step are the profile's over its steps.
The number format is the 16-bit share's (the converter's or the HLO ops' types): 16-bit math is
bf16 on TPUs and where kernel names say bf16, else fp16; the rest fp32.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tui_prof.model import (
    DeviceUtilization,
    Efficiency,
    Environment,
    KernelStat,
    OpStat,
    Precision,
    StepBreakdown,
)
from tui_prof.profiles.efficiency import efficiency

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


def xla_efficiency(
    ops: Sequence[OpStat],
    steps: Sequence[StepBreakdown],
    env: Environment,
    prec: Precision | None,
    kernels: Sequence[KernelStat],
    utilization: DeviceUtilization | None = None,
) -> Efficiency | None:
    """MFU divides by the devices that were busy where the raw events say which."""
    device = [o for o in ops if o.where == "Device"]
    total = sum(o.flops or 0.0 for o in device)
    if total <= 0:
        return None
    busy = sum(o.total_self_time_us for o in device)
    counted = sum(o.total_self_time_us for o in device if o.flops)
    busy_devices = sum(1 for d in utilization.devices if d.busy_percent > 0) if utilization else 0
    step_ms = sum(s.step_time_ms for s in steps) / len(steps) if steps else None
    return efficiency(
        source="xla_cost",
        total=total,
        step_flops=[total / len(steps)] * len(steps) if steps else [],
        step_time_ms=step_ms,
        by_format=_formats(total, env, prec, kernels),
        env=env,
        modelled_percent=100.0 * counted / busy if busy > 0 else None,
        devices=busy_devices or None,
    )
