"""Rich renderables for a ProfileSummary, shared by `tuiprof summary` and the TUI.

Contract: every name that comes from a trace (ops, kernels, hosts) goes through `Text` objects or
`escape`, never into markup; colour is never the only carrier of meaning (NO_COLOR terminals get
distinct glyphs in the breakdown bar).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tui_prof.device_use import DeviceUtilization, GpuMetric
from tui_prof.model import (
    CATEGORIES,
    CATEGORY_LABELS,
    NATIVE_CATEGORIES,
    NATIVE_LABELS,
    ProfileSummary,
    StepBreakdown,
)
from tui_prof.profiles.assemble import fmt_ms as fmt_ms  # the faces' import of it
from tui_prof.profiles.assemble import matrix_units, step_time_words
from tui_prof.render.efficiency import PEAK_HINT, efficiency_text, memory_text
from tui_prof.render.name_cells import KernelCut, PathsCut, TailCut
from tui_prof.render.names import kernel_names

# Colour and a monochrome glyph per category; the glyph is also drawn in colour terminals' legend.
CATEGORY_STYLE: dict[str, tuple[str, str]] = {
    "device_compute": ("green", "█"),
    "device_to_device": ("magenta", "▓"),
    "device_collectives": ("bright_magenta", "▒"),
    "host_compute": ("blue", "▚"),
    "kernel_launch": ("yellow", "╳"),
    "input": ("red", "▤"),
    "output": ("bright_red", "▥"),
    "compilation": ("cyan", "▦"),
    "other": ("bright_black", "░"),
}


def used_categories(steps: Sequence[StepBreakdown]) -> list[str]:
    """Categories with time in any step, in TensorBoard's order (empty columns waste 80 columns)."""
    return [c for c in CATEGORIES if any(s.breakdown_ms.get(c, 0.0) > 0 for s in steps)]


def headline(summary: ProfileSummary, *, source: bool = True, with_notes: bool = True) -> Text:
    """Step time, devices, verdict, warnings; with `source`, where the steps came from too."""
    t = Text()
    avg = summary.average
    if avg is None:
        t.append("No steps found", style="bold yellow")
    else:
        mean, rest = step_time_words(avg, len(summary.steps))
        t.append(mean, style="bold")
        t.append(rest)
    env = summary.environment
    t.append(f"   {env.device_type}")
    if env.device_count:
        t.append(f" ×{env.device_count}")
    if summary.framework == "pytorch":
        _torch_where(t, summary)
    else:
        t.append(f", {len(summary.hosts)} host{'s' if len(summary.hosts) != 1 else ''}")
    t.append("\n")
    t.append("Verdict: ", style="bold")
    t.append(summary.bottleneck)
    if source:
        t.append("\n")
        t.append_text(step_source_text(summary))
    for w in notes(summary) if with_notes else ():
        t.append("\n⚠ " + w, style="yellow")
    return t


def notes(summary: ProfileSummary) -> list[str]:
    """The summary's warnings and caveats, less what the Steps line says already."""
    return [w for w in summary.warnings if w != f"No steps found: {summary.step_source_detail}"]


def headline_folded(summary: ProfileSummary) -> RenderableType:
    """The headline with its notes folded to one line (`w` in the TUI unfolds them), so the
    numbers, the verdict and the breakdown fit a first screen of 80x24."""
    folded = notes(summary)
    main = headline(summary, source=False, with_notes=False)
    if not folded:
        return main
    n = len(folded)
    line = Text(f"⚠ {n} note{'s' if n != 1 else ''} (w: show): ", style="yellow")
    line.append(folded[0], style="dim")
    line.no_wrap = True
    line.overflow = "ellipsis"
    return Group(main, line)


def _torch_where(t: Text, summary: ProfileSummary) -> None:
    """PyTorch sessions: the GPU model and ranks (one trace file per rank)."""
    env = summary.environment
    if env.device_names:
        t.append(f" ({', '.join(env.device_names)})")
    n = len(summary.hosts)
    t.append(f", {n} rank{'s' if n != 1 else ''}")
    if env.world_size is not None and env.world_size != n:
        t.append(f" of {env.world_size}")


def native_table(summary: ProfileSummary) -> Table | None:
    """The average step in the profiler's own categories (PyTorch: torch-tb-profiler's), if any."""
    avg = summary.average
    if avg is None or avg.native_breakdown_ms is None:
        return None
    t = Table(
        title="PyTorch profiler plugin's categories (average)", title_justify="left", expand=False
    )
    t.add_column("Category")
    t.add_column("ms", justify="right")
    t.add_column("% of step", justify="right")
    for c in NATIVE_CATEGORIES:
        v = avg.native_breakdown_ms.get(c, 0.0)
        pct = 100.0 * v / avg.step_time_ms if avg.step_time_ms else 0.0
        t.add_row(NATIVE_LABELS[c], fmt_ms(v), f"{pct:.1f}%", style="dim" if v == 0 else None)
    return t


def ranks_table(summary: ProfileSummary) -> Table | None:
    """Each rank's average step, the slowest marked (multi-rank sessions only)."""
    if len(summary.ranks) < 2:
        return None
    t = Table(title="Ranks", title_justify="left", expand=False)
    t.add_column("Rank")
    t.add_column("Trace", overflow="ellipsis", no_wrap=True, max_width=32)
    t.add_column("Steps", justify="right")
    t.add_column("Step ms", justify="right")
    t.add_column("± std", justify="right")
    t.add_column("Largest category")
    t.add_column("")
    for r in summary.ranks:
        top = max(r.breakdown_ms, key=lambda c: r.breakdown_ms[c]) if r.breakdown_ms else ""
        t.add_row(
            "–" if r.rank is None else str(r.rank),
            Text(r.name),
            str(r.steps),
            fmt_ms(r.step_time_ms),
            fmt_ms(r.step_time_std_ms),
            CATEGORY_LABELS.get(top, ""),
            Text("◀ slowest", style="bold red") if r.slowest else "",
            style="bold" if r.slowest else None,
        )
    return t


def step_source_text(summary: ProfileSummary) -> Text:
    """Where the steps came from: the converter's markers, or tuiprof's own step finder."""
    t = Text("Steps: ", style="dim")
    t.append(summary.step_source_detail, style="dim")
    return t


def legend(categories: Sequence[str], mono: bool = False) -> Text:
    t = Text()
    for c in categories:
        color, glyph = CATEGORY_STYLE[c]
        t.append(glyph * 2, style="" if mono else color)
        t.append(f" {CATEGORY_LABELS[c]}  ")
    return t


class BreakdownBars:
    """One stacked bar per step (or the average), scaled to the longest step."""

    def __init__(self, steps: Sequence[StepBreakdown], label_width: int = 8) -> None:
        self.steps = list(steps)
        self.label_width = label_width

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(30, options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.steps:
            yield Text("no steps", style="dim")
            return
        mono = console.no_color or console.color_system is None
        cats = used_categories(self.steps) or ["other"]
        longest = max(s.step_time_ms for s in self.steps) or 1.0
        bar_width = max(10, options.max_width - self.label_width - 12)
        for s in self.steps:
            line = Text(f"{s.step:>{self.label_width - 1}} ", style="dim")
            cells = round(bar_width * s.step_time_ms / longest)
            # Largest-remainder rounding so the segments add up to the bar's length.
            # Split over the step, or over its categories where a damaged file has them longer
            # (a bar millions of cells long took the memory).
            whole = max(s.step_time_ms, sum(max(0.0, s.breakdown_ms.get(c, 0.0)) for c in cats))
            raw = [(c, cells * max(0.0, s.breakdown_ms.get(c, 0.0)) / (whole or 1.0)) for c in cats]
            widths = {c: int(w) for c, w in raw}
            rest = cells - sum(widths.values())
            for c, _w in sorted(raw, key=lambda cw: cw[1] - int(cw[1]), reverse=True)[
                : max(0, rest)
            ]:
                widths[c] += 1
            for c in cats:
                color, glyph = CATEGORY_STYLE[c]
                line.append(glyph * widths[c], style="" if mono else color)
            line.append(f" {fmt_ms(s.step_time_ms)} ms")
            yield line
        yield legend(cats, mono)


def averages_table(summary: ProfileSummary) -> Table:
    t = Table(title="Average step-time breakdown", title_justify="left", expand=False)
    t.add_column("Category")
    t.add_column("ms", justify="right")
    t.add_column("± std", justify="right")
    t.add_column("% of step", justify="right")
    avg = summary.average
    if avg is None:
        return t
    for c in CATEGORIES:
        v = avg.breakdown_ms.get(c, 0.0)
        pct = 100.0 * v / avg.step_time_ms if avg.step_time_ms else 0.0
        t.add_row(
            CATEGORY_LABELS[c],
            fmt_ms(v),
            fmt_ms(avg.breakdown_std_ms.get(c)),
            f"{pct:.1f}%",
            style="dim" if v == 0 else None,
        )
    t.add_row(
        "Step time", fmt_ms(avg.step_time_ms), fmt_ms(avg.step_time_std_ms), "100%", style="bold"
    )
    return t


def steps_table(summary: ProfileSummary) -> Table:
    cats = used_categories(summary.steps)
    t = Table(title="Per step (ms)", title_justify="left")
    t.add_column("Step", justify="right")
    t.add_column("Step time", justify="right", style="bold")
    for c in cats:
        t.add_column(CATEGORY_LABELS[c], justify="right")
    for s in summary.steps:
        t.add_row(
            str(s.step), fmt_ms(s.step_time_ms), *(fmt_ms(s.breakdown_ms.get(c, 0.0)) for c in cats)
        )
    return t


# Where a 16-bit share came from, when not from the steps (model.Precision.source).
PRECISION_SOURCES: dict[str, str] = {
    "hlo_ops": "device HLO ops by their types",
    "kernel_names": "kernel names",
    "precomputed": "TensorBoard's saved overview",
    "kernels_and_op_types": "all GPU kernels: names and their ops' input types",
}


def _device_label(name: str) -> str:
    return name.replace("/device:", "")


def utilization_text(u: DeviceUtilization) -> Text:
    """Device busy time over the whole profile: the mean, then each device (idle ones counted)."""
    t = Text()
    n = len(u.devices)
    if u.rule == "duty_cycle":  # TPUs: the converter's duty cycle (each over its programs' span)
        t.append(f"TPU duty cycle {u.busy_percent:.1f}%" + (f" ({n} cores)" if n > 1 else ""))
    else:
        t.append(
            f"Devices busy {u.busy_percent:.1f}% of the {fmt_ms(u.profile_ms)} ms profile"
            + (f" (mean of {n})" if n > 1 else "")
        )
    # A device with any event is busy, however little (never "idle" beside device compute);
    # devices without a single event are listed apart.
    busy = sorted((d for d in u.devices if d.busy_percent > 0), key=lambda d: -d.busy_percent)
    silent = [d for d in u.devices if d.busy_percent <= 0]
    if n > 1 and busy:
        shown = ", ".join(f"{_device_label(d.name)} {_pct(d.busy_percent)}" for d in busy[:6])
        t.append(": ")
        t.append(shown + (" …" if len(busy) > 6 else ""))
    if n > 1 and silent:
        names = ", ".join(_device_label(d.name) for d in silent[:4])
        more = " …" if len(silent) > 4 else ""
        t.append(f"; no events on {len(silent)} ({names}{more})", style="dim")
    return t


def step_gpu_utilization(metrics: Sequence[GpuMetric]) -> dict[int, float]:
    """Each step's GPU utilization (the mean over GPUs where there are several), by step."""
    per: dict[int, list[float]] = {}
    for m in metrics:
        for s in m.steps:
            per.setdefault(s.step, []).append(s.utilization_percent)
    return {step: sum(v) / len(v) for step, v in per.items()}


def _pct(v: float) -> str:
    return f"{v:.1f}%" if v >= 0.05 else "<0.1%"


def _pct_range(values: Sequence[float | None]) -> str:
    found = [v for v in values if v is not None]
    if len(found) < 2:
        return ""
    return f" (steps {min(found):.1f}–{max(found):.1f}%)"


def gpu_metrics_text(metrics: Sequence[GpuMetric], limit: int = 4) -> Text:
    """The PyTorch plugin's GPU figures over all steps, one line per device, with the spread of
    the per-step utilisation."""
    t = Text()
    for i, m in enumerate(metrics[:limit]):
        if i:
            t.append("\n")
        if len(metrics) > 1:
            where = f"{m.rank} " if m.rank else ""
            t.append(f"{where}GPU {m.device}: ", style="bold")
        t.append(f"GPU utilization {m.utilization_percent:.1f}%")
        t.append(_pct_range([s.utilization_percent for s in m.steps]), style="dim")
        if m.sm_efficiency_percent is not None:
            t.append(f", est. SM efficiency {m.sm_efficiency_percent:.1f}%")
        if m.occupancy_percent is not None:
            t.append(f", est. achieved occupancy {m.occupancy_percent:.1f}%")
    if len(metrics) > limit:
        t.append(f"\n… {len(metrics) - limit} more GPUs (`--json`: gpu_metrics)", style="dim")
    return t


def no_steps_text(summary: ProfileSummary) -> Text:
    """In place of the breakdown, where there are no steps: what the devices did."""
    t = Text("No step-time breakdown: ", style="bold yellow")
    t.append("no steps in this profile (see below for how to mark them).", style="yellow")
    u = summary.device_utilization
    if u is not None:
        t.append("\n")
        t.append_text(utilization_text(u))
    elif summary.environment.device_type == "CPU":
        t.append("\nCPU only: no device planes.", style="dim")
    return t


def programs_table(summary: ProfileSummary, limit: int = 8) -> Table:
    """The XLA programs a profile ran: which one could be the steps (`--step-program`)."""
    t = Table(title="XLA programs run", title_justify="left", expand=False)
    t.add_column("Program", overflow="ellipsis", no_wrap=True, max_width=48)
    t.add_column("Runs", justify="right")
    device = summary.environment.device_type != "CPU"
    t.add_column("Device ms" if device else "Host ms", justify="right")
    for p in summary.programs[:limit]:
        t.add_row(Text(p.name), str(p.runs), fmt_ms(p.time_ms))
    return t


def precision_text(summary: ProfileSummary) -> Text:
    t = Text()
    p = summary.precision
    if p is None:
        t.append("16-bit share: n/a", style="dim")
        t.append(" (no device compute)" if summary.environment.device_type == "CPU" else "")
    elif not p.measured:
        t.append("16-bit share: unknown", style="yellow")
        t.append(
            " — no kernel name, shape or HLO op in this profile says its number type "
            f"(TensorBoard's rule reads such kernels, bf16 ones too, as 32-bit: "
            f"{p.compute_16bit_percent:.1f}% 16-bit)",
            style="dim",
        )
    else:
        t.append(
            f"Device compute: {p.compute_16bit_percent:.1f}% 16-bit, {p.compute_32bit_percent:.1f}% 32-bit"
        )
        if p.source in PRECISION_SOURCES:
            t.append(f" (from {PRECISION_SOURCES[p.source]})", style="dim")
    tc = summary.tensor_core
    if tc is not None and p is not None and not p.measured and tc.percent_of_kernel_time == 0.0:
        word = matrix_units(summary.environment) or "Matrix units"
        t.append(f"\n{word}: unknown", style="yellow")
        t.append(" — the kernels' names do not say whether they ran on them", style="dim")
    elif tc is not None:
        word = matrix_units(summary.environment) or "Matrix units"
        t.append(f"\n{word}: {tc.percent_of_kernel_time:.1f}% of kernel time")
        if tc.percent_of_eligible_time is not None:
            t.append(f", {tc.percent_of_eligible_time:.1f}% of eligible ops' time")
    return t


def top_ops_table(summary: ProfileSummary, limit: int = 15) -> Table:
    t = Table(
        title="Top ops by self time",
        title_justify="left",
        expand=True,
        caption="% of side: of the host's or of the devices' total self time, as Side says",
        caption_justify="left",
    )
    t.add_column("Op", overflow="ellipsis", no_wrap=True, ratio=3)
    t.add_column("Type", overflow="ellipsis", no_wrap=True, ratio=1)
    t.add_column("Side")
    t.add_column("Self ms", justify="right")
    t.add_column("% of\nside", justify="right")  # two lines: the names keep the width
    for o in summary.top_ops[:limit]:
        t.add_row(
            TailCut(o.name),  # a scope loses its head, never the op at its tail
            Text(o.op_type),
            o.where,
            fmt_ms(o.total_self_time_us / 1000),
            f"{o.self_time_percent:.1f}",
        )
    return t


def kernels_table(summary: ProfileSummary, limit: int = 15) -> Table:
    kernels = summary.kernels[:limit]
    names = kernel_names([k.name for k in kernels])  # what tells them apart, not `void Eigen::…`
    ops = [k.op_name for k in kernels]
    # One kernel launched by several ops (TensorFlow's replicas): the op tells the rows apart,
    # so it gets the kernel's share of the width.
    op_tells = len(set(zip(names, ops, strict=True))) > len(set(names))
    t = Table(title="GPU kernels", title_justify="left", expand=True)
    t.add_column("Kernel", overflow="ellipsis", no_wrap=True, ratio=3)
    t.add_column("Op", overflow="ellipsis", no_wrap=True, ratio=3 if op_tells else 1)
    t.add_column("Calls", justify="right")
    t.add_column("Total ms", justify="right")
    word = {"Tensor Cores": "TC", "Matrix Cores": "MC", "MXU": "MXU"}.get(
        matrix_units(summary.environment), "MU"
    )
    t.add_column(f"{word} elig.", justify="center")
    t.add_column(f"{word} used", justify="center")
    shapes = len(set(names)) < len(names)  # one kernel in several launch shapes: say which
    if shapes:
        t.add_column("Grid", justify="right")
    for i, k in enumerate(kernels):
        t.add_row(
            KernelCut(names, i),
            PathsCut(ops, i),  # a scope loses its head, never the op or what tells ops apart
            str(k.occurrences),
            fmt_ms(k.total_duration_us / 1000),
            "yes" if k.tensor_core_eligible else "no",
            "yes" if k.uses_tensor_core else "no",
            *([k.grid or "–"] if shapes else []),
        )
    return t


def recommendations_text(summary: ProfileSummary) -> Text:
    t = Text()
    for i, r in enumerate(summary.recommendations):
        if i:
            t.append("\n")
        t.append("• " + r)
    return t


def overview_sections(
    summary: ProfileSummary, peak_hint: str = PEAK_HINT
) -> tuple[RenderableType, RenderableType | None, Text]:
    """(breakdown, its detail, precision) of the overview, as both faces show it: with steps,
    the bars and the averages table; without, what the devices did and the XLA programs run,
    never an empty table. The precision part ends with the devices' utilisation."""
    prec = precision_text(summary)
    if summary.steps and summary.device_utilization is not None:
        prec.append("\n")
        prec.append_text(utilization_text(summary.device_utilization))
    if summary.gpu_metrics:  # PyTorch: the plugin's figures, from the kernels' own args
        prec.append("\n")
        prec.append_text(gpu_metrics_text(summary.gpu_metrics))
    for extra in (efficiency_text(summary, peak_hint), memory_text(summary)):
        if extra is not None:
            prec.append("\n")
            prec.append_text(extra)
    if summary.steps:
        return BreakdownBars(summary.steps), averages_table(summary), prec
    return no_steps_text(summary), programs_table(summary) if summary.programs else None, prec


def summary_renderable(summary: ProfileSummary) -> RenderableType:
    """The whole summary of a session, as `tuiprof summary` prints it."""
    breakdown, detail, prec = overview_sections(summary)
    parts: list[RenderableType] = [
        Text(summary.path, style="bold underline"),
        headline(summary),
        Text(""),
        breakdown,
        *([detail] if detail is not None else []),
    ]
    # PyTorch sessions: the plugin's categories and the ranks, before precision as on screen
    parts += [x for x in (native_table(summary), ranks_table(summary)) if x is not None]
    parts.append(prec)
    if summary.recommendations:
        parts += [Text("What to try", style="bold"), recommendations_text(summary)]
    if summary.top_ops:
        parts.append(top_ops_table(summary, 10))
    if summary.kernels:
        parts.append(kernels_table(summary, 10))
    return Group(*parts)
