"""Turn the converter's DataTable JSON (TensorBoard's overview, op and kernel tools) into the model.

Contract: pure functions from parsed JSON to model objects; column lookups are by column id,
never by position, so a converter release that adds columns does not shift our numbers.
"""

from __future__ import annotations

from typing import Any

from tui_prof.model import KernelStat, OpStat, Precision, StepBreakdown
from tui_prof.profiles.kernel_names import uses_matrix_units

# Overview page per-step column ids → our category names.
STEP_COLUMNS: dict[str, str] = {
    "deviceComputeTimeMs": "device_compute",
    "deviceToDeviceTimeMs": "device_to_device",
    "deviceCollectivesTimeMs": "device_collectives",
    "hostComputeTimeMs": "host_compute",
    "kernelLaunchTimeMs": "kernel_launch",
    "infeedTimeMs": "input",
    "outfeedTimeMs": "output",
    "compileTimeMs": "compilation",
    "otherTimeMs": "other",
}


def rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """Each row as {column id: value}."""
    ids = [c.get("id", "") for c in table.get("cols", [])]
    out = []
    for row in table.get("rows") or []:
        cells = row.get("c", [])
        out.append({ids[i]: (c or {}).get("v") for i, c in enumerate(cells) if i < len(ids)})
    return out


def _table_with(tables: list[dict[str, Any]], column: str) -> dict[str, Any] | None:
    for t in tables:
        if any(c.get("id") == column for c in t.get("cols", [])):
            return t
    return None


def _percent(text: Any) -> float | None:
    if text is None:
        return None
    try:
        return float(str(text).strip().rstrip("%"))
    except ValueError:
        return None


def overview_steps(overview: list[dict[str, Any]]) -> list[StepBreakdown]:
    """The converter's per-step rows at full precision (its averages are rounded to 0.1 ms)."""
    table = _table_with(overview, "stepTimeMs")
    if table is None:
        return []
    steps = []
    for i, row in enumerate(rows(table)):
        try:
            step = int(str(row.get("stepnum", i)))
        except ValueError:
            step = i
        breakdown = {cat: float(row.get(col) or 0.0) for col, cat in STEP_COLUMNS.items()}
        steps.append(StepBreakdown(step, float(row.get("stepTimeMs") or 0.0), breakdown))
    return steps


def overview_properties(overview: list[dict[str, Any]]) -> dict[str, str]:
    """All tables' `p` properties merged (names do not collide across the overview's tables)."""
    props: dict[str, str] = {}
    for t in overview:
        for k, v in (t.get("p") or {}).items():
            props.setdefault(k, str(v))
    return props


def precision(props: dict[str, str]) -> Precision | None:
    p16 = _percent(props.get("device_compute_16bit_percent"))
    p32 = _percent(props.get("device_compute_32bit_percent"))
    if p16 is None or p32 is None or (p16 == 0.0 and p32 == 0.0):
        return None
    return Precision(p16, p32)


def _cost(rate: Any, self_us: float) -> float | None:
    """XLA's cost back from the converter's rate over the op's self time: its rates are the
    op's FLOPs (bytes) per nanosecond, GFLOP/s (GB/s); None where it has none."""
    try:
        value = float(rate or 0.0)
    except (TypeError, ValueError):
        return None
    return value * self_us * 1e3 if value > 0 and self_us > 0 else None


def top_ops(op_stats: list[dict[str, Any]]) -> list[OpStat]:
    """Every framework op by total self time, idle excluded (TensorBoard's default view).

    All of them, not the first N: `profiles.diff` compares two sessions op by op, and an op
    below a cut-off in A may be the one that grew in B. Views show the first few.
    """
    tables = [
        t for t in op_stats if any(c.get("id") == "total_self_time" for c in t.get("cols", []))
    ]
    if not tables:
        return []
    busy = [r for r in rows(tables[-1]) if r.get("type") != "IDLE"]
    ops = []
    for r in busy:
        where = str(r.get("host_or_device") or "")
        frac = r.get(
            "device_total_self_time_percent"
            if where == "Device"
            else "host_total_self_time_percent"
        )
        self_us = float(r.get("total_self_time") or 0.0)
        ops.append(
            OpStat(
                name=str(r.get("operation") or ""),
                op_type=str(r.get("type") or ""),
                where=where,
                occurrences=int(r.get("occurrences") or 0),
                total_self_time_us=self_us,
                self_time_percent=100.0 * float(frac or 0.0),
                flops=_cost(r.get("model_flop_rate"), self_us),
                bytes_accessed=_cost(r.get("measured_memory_bw"), self_us),
            )
        )
    ops.sort(key=lambda o: o.total_self_time_us, reverse=True)
    return ops


def kernels(kernel_stats: Any) -> list[KernelStat]:
    table = kernel_stats[0] if isinstance(kernel_stats, list) and kernel_stats else kernel_stats
    if not isinstance(table, dict):
        return []
    out = [
        KernelStat(
            name=str(r.get("kernel_name") or ""),
            op_name=str(r.get("op_name") or ""),
            occurrences=int(r.get("occurrences") or 0),
            total_duration_us=float(r.get("total_duration_us") or 0.0),
            tensor_core_eligible=bool(r.get("is_op_tensor_core_eligible")),
            # the converter's list predates Hopper/Blackwell and AMD names: ours as well
            uses_tensor_core=bool(r.get("is_kernel_using_tensor_core"))
            or uses_matrix_units(str(r.get("kernel_name") or "")),
            occupancy_percent=(
                float(r["occupancy_pct"]) if r.get("occupancy_pct") is not None else None
            ),
            grid=str(r.get("grid_dim") or ""),
            block=str(r.get("block_dim") or ""),
        )
        for r in rows(table)
    ]
    out.sort(key=lambda k: k.total_duration_us, reverse=True)
    return out
