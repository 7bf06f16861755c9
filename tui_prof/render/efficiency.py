"""The Overview's efficiency and memory lines, and the per-op FLOP/s and roofline cells.

Contract: pure functions from a ProfileSummary (or an op) to Rich Text or strings, shared by the
TUI and `tuiprof summary`. The efficiency line leads with MFU and names the peak it divides by
("MFU 38% of H100 SXM bf16 dense 989 TFLOP/s; 412 TFLOP/s achieved"); where a part is unknown
it says which and how to supply it (`--peak-tflops`). Op names from files are plain Text.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from tui_prof.device_use import Efficiency, MemoryUse
from tui_prof.model import OpStat, ProfileSummary
from tui_prof.profiles.efficiency import USER_PEAK, intensity, op_rate, roofline

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40
SOURCES = {
    "xla_cost": "XLA's cost per HLO op",
    "xla_hlo": "the HLO's matrix math (GEMM and convolution calls included)",
    "xla_cost+xla_hlo": "XLA's cost per HLO op and the HLO's GEMM and convolution calls",
    "flops_arg": "the profiler's flops (with_flops)",
    "shapes": "recorded shapes",
    "flops_arg+shapes": "the profiler's flops and recorded shapes",
}


def rate(tflops: float) -> str:
    """A FLOP rate in the unit that keeps it readable."""
    for scale, unit in ((1.0, "TFLOP/s"), (1e-3, "GFLOP/s"), (1e-6, "MFLOP/s")):
        if tflops >= scale:
            return f"{tflops / scale:,.3g} {unit}"
    return f"{tflops * 1e9:,.3g} kFLOP/s"


def percent(v: float) -> str:
    """38% / 3.8% / 0.042% / <0.001%: two figures where small, so a tiny MFU does not read 0,
    and never in exponent notation."""
    if v >= 10:
        return f"{v:.0f}%"
    if v >= 1:
        return f"{v:.1f}%"
    return "<0.001%" if 0 < v < 0.001 else f"{v:.2g}%"


def count(flops: float) -> str:
    for scale, unit in ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")):
        if flops >= scale:
            return f"{flops / scale:,.3g} {unit}"
    return f"{flops:,.0f} FLOP"


def _peak_words(e: Efficiency) -> str:
    devices = f"{e.devices}× " if e.devices > 1 else ""
    peak = f"{e.peak_tflops:,.4g} TFLOP/s"
    if e.peak_source == USER_PEAK:
        return f"{devices}{peak} ({USER_PEAK})"
    return f"{devices}{e.peak_source} {peak}"


PEAK_HINT = f"give one: {USER_PEAK}"


def no_count_reason(summary: ProfileSummary) -> str:
    """Why a session has no FLOP count, in the terms of what wrote it."""
    if summary.framework == "pytorch":
        return (
            "no GEMM, convolution or attention op with recorded shapes "
            "(torch.profiler's record_shapes=True records them)"
        )
    if summary.step_source == "precomputed":
        return "older TensorBoard tool files keep none"
    if summary.framework == "tensorflow":
        return "TensorFlow ops run without XLA carry none"
    return "the profile keeps neither XLA's cost of its device ops nor its programs' HLO"


def efficiency_text(summary: ProfileSummary, peak_hint: str = PEAK_HINT) -> Text | None:
    """`peak_hint` says how to give a peak where the table has none (the TUI: its key)."""
    e = summary.efficiency
    if e is None:
        t = Text("Efficiency: no FLOP count", style="yellow")
        t.append(f" — {no_count_reason(summary)}", style="dim")
        return t
    t = Text()
    if e.mfu_percent is not None and e.achieved_tflops is not None:
        # math ops without a FLOP model did work not counted: the MFU is a lower bound
        at_least = "≥ " if e.unmodelled else ""
        t.append(f"MFU {at_least}{percent(e.mfu_percent)}", style="bold")
        t.append(f" of {_peak_words(e)}; {rate(e.achieved_tflops)} achieved")
    elif e.achieved_tflops is not None:
        t.append(f"{rate(e.achieved_tflops)} achieved", style="bold")
        t.append(f"; MFU n/a: {e.peak_source}", style="yellow")
        t.append(f" ({peak_hint})", style="dim")
    else:
        t.append(f"{count(e.flops_total)} counted", style="bold")
        t.append("; FLOP/s n/a: no steps", style="yellow")
    per_step = f"{count(e.flops_per_step)} per step, " if e.flops_per_step else ""
    fmt = ""
    if e.formats:
        fmt = ", ".join(f"{k} {v:.0f}%" for k, v in e.formats.items()) + "; "
    t.append(f"\n  {per_step}{fmt}from {SOURCES.get(e.flops_source, e.flops_source)}", style="dim")
    if e.modelled_device_percent is not None:
        t.append(
            f"; ops with a count: {e.modelled_device_percent:.0f}% of device time", style="dim"
        )
    if e.unmodelled:
        shown = ", ".join(f"{u.name} {u.device_time_percent:.1f}%" for u in e.unmodelled[:3])
        t.append("\n  No FLOP model (device time): ", style="yellow")
        t.append(shown + (" …" if len(e.unmodelled) > 3 else ""))
    return t


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """Values as block characters, each cell the highest of its share (no peak lost)."""
    if not values:
        return ""
    if len(values) > width:
        step = len(values) / width
        values = [
            max(values[int(i * step) : max(int((i + 1) * step), int(i * step) + 1)])
            for i in range(width)
        ]
    hi = max(values)
    lo = min(values)
    span = hi - lo or 1.0
    return "".join(
        BLOCKS[min(len(BLOCKS) - 1, int((v - lo) / span * (len(BLOCKS) - 1) + 0.5))] for v in values
    )


def megabytes(v: float) -> str:
    return f"{v / 1024:,.2f} GB" if v >= 1024 else f"{v:,.1f} MB"


def memory_text(summary: ProfileSummary) -> Text | None:
    m: MemoryUse | None = summary.memory
    if m is None or m.peak_allocated_mb is None:
        return None
    t = Text("Memory: peak ", style="")
    t.append(megabytes(m.peak_allocated_mb), style="bold")
    t.append(" allocated" + (" above the profile's start" if m.relative else ""))
    if m.peak_reserved_mb:
        t.append(f", {megabytes(m.peak_reserved_mb)} reserved")
    if len(m.devices) > 1:
        top = max(m.devices, key=lambda d: d.peak_allocated_mb or 0.0)
        t.append(f" ({top.name})", style="dim")
    spark = sparkline([v for _, v in m.series_mb])
    if spark:
        span = m.series_mb[-1][0] - m.series_mb[0][0]
        t.append("\n  ")
        t.append(spark, style="cyan")
        t.append(f" over {span:,.4g} ms", style="dim")
    if m.top_allocators:
        a = m.top_allocators[0]
        t.append("\n  Most allocated by ", style="dim")
        t.append(a.op)
        t.append(f" ({megabytes(a.allocated_mb)} in {a.allocations:,} allocations)", style="dim")
    return t


def op_rate_cell(op: OpStat) -> str:
    r = op_rate(op)
    return rate(r) if r is not None else "–"


def bound_cell(op: OpStat, e: Efficiency | None) -> str:
    """ "memory 42%" / "compute 80%": what bounds the op and the share of that roof reached."""
    r = roofline(op, e)
    return f"{r[0]} {percent(r[1])}" if r is not None else "–"


def op_cost_text(op: OpStat, e: Efficiency | None) -> str:
    """An op's FLOPs, FLOP/s, FLOPs per byte and roofline, for its detail line ("" if none)."""
    if op.flops is None:
        return ""
    parts = [count(op.flops)]
    r = op_rate(op)
    if r is not None:
        parts.append(rate(r))
    ai = intensity(op)
    if ai is not None:
        parts.append(f"{ai:,.3g} FLOP/byte")
    roof = roofline(op, e)
    if roof is not None:
        parts.append(f"{roof[0]}-bound, {percent(roof[1])} of its roof")
    return " · ".join(parts)


def kernel_op_rates(summary: ProfileSummary) -> dict[str, str]:
    """Each launching op's FLOP/s over its device time, by op name (kernels show their op's)."""
    out: dict[str, str] = {}
    for o in summary.top_ops:
        r = op_rate(o)
        if r is not None:
            out[o.name] = rate(r)
    return out
