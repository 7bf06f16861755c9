"""Rich tables of an experiment's statistics, verdicts and comparability, for CLI and TUI alike.

Contract: every function takes the plain report objects of `tui_prof.comparison.report` and
returns a Rich renderable; names from runs (variants, metrics, errors) enter as `Text`, never
as markup. `report_view` is the whole `tuiprof compare` screen; the TUI may use the pieces.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from tui_prof.comparison.comparability import Comparability
from tui_prof.comparison.report import ComparisonReport, MetricReport
from tui_prof.comparison.tradeoff import Axis, Tradeoff
from tui_prof.render.boxplot import BoxPlot
from tui_prof.render.scatter import TradeoffScatter

STAT_COLUMNS = ("n", "mean", "std", "median", "p90", "min", "max", "q1", "q3")


def decimals_for(values: Iterable[float | None], spreads: Iterable[float | None] = ()) -> int:
    """Decimals that show a metric's spread with two significant digits (0 to 6)."""
    nonzero = [abs(s) for s in spreads if s]
    if nonzero:
        return max(0, min(6, 1 - math.floor(math.log10(min(nonzero)))))
    mags = [abs(v) for v in values if v]
    if not mags:
        return 2
    return max(0, min(6, 3 - math.floor(math.log10(max(mags)))))


def fmt(value: float | None, decimals: int) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


def _metric_title(m: MetricReport) -> Text:
    title = Text(m.name, style="bold")
    if m.unit:
        title.append(f" ({m.unit})")
    title.append(" · lower is better" if m.lower_is_better else " · higher is better", style="dim")
    return title


# What gives way, in turn, when the width is short (the box plot below still draws quartiles
# and extremes); n, mean and std always show.
STAT_GIVE_WAY = (("q1", "q3"), ("p90",), ("min", "max"), ("median",))


def _stats_grid(m: MetricReport, baseline: str | None, columns: tuple[str, ...]) -> Table:
    descs = list(m.variants.values())
    dec = decimals_for([d.mean for d in descs], [d.std for d in descs])
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0), show_edge=False)
    table.add_column("variant", no_wrap=True)
    for col in columns:
        table.add_column(col, justify="right", no_wrap=True)
    for name, d in m.variants.items():
        label = Text(name, style="bold")
        if name == baseline:
            label.append(" (base)", style="dim")
        cells = [str(d.n) if c == "n" else fmt(getattr(d, c), dec) for c in columns]
        table.add_row(label, *cells, style="dim" if d.n == 0 else "")
    return table


class StatsTable:
    """n, mean, std, median, p90, min, max and quartiles per variant (shared decimals). Where the
    width is short, whole columns give way (STAT_GIVE_WAY) and a line names them: numbers are
    never cut."""

    def __init__(self, m: MetricReport, baseline: str | None = None) -> None:
        self.m, self.baseline = m, baseline

    def _width(self, console: Console, columns: tuple[str, ...]) -> int:
        """The width the table needs to show every cell whole."""
        unbounded = console.options.update_width(10_000)
        grid = _stats_grid(self.m, self.baseline, columns)
        return Measurement.get(console, unbounded, grid).maximum

    def columns_for(self, console: Console, width: int) -> tuple[str, ...]:
        shown: tuple[str, ...] = STAT_COLUMNS
        for group in STAT_GIVE_WAY:
            if self._width(console, shown) <= width:
                break
            shown = tuple(c for c in shown if c not in group)
        return shown

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        least = self._width(console, STAT_COLUMNS[:3])
        most = self._width(console, STAT_COLUMNS)
        return Measurement(min(least, options.max_width), min(most, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = self.columns_for(console, options.max_width)
        yield _stats_grid(self.m, self.baseline, shown)
        left_out = [c for c in STAT_COLUMNS if c not in shown]
        if left_out:
            yield Text(f"({', '.join(left_out)}: wider window)", style="dim")


def stats_table(m: MetricReport, baseline: str | None = None) -> StatsTable:
    """The per-variant statistics of one metric, fitted to the width it is drawn at."""
    return StatsTable(m, baseline)


def _p_text(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def comparisons_table(m: MetricReport) -> Table:
    """Each variant against the baseline: ratio, 95% interval, p-value and the plain verdict."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0), show_edge=False)
    baseline = m.comparisons[0].baseline if m.comparisons else ""
    table.add_column(Text(f"vs {baseline}"), no_wrap=True)
    table.add_column("ratio", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    table.add_column("p", justify="right", no_wrap=True)
    table.add_column("verdict", ratio=1)
    for c in m.comparisons:
        ci = "–" if c.ci_low is None or c.ci_high is None else f"{c.ci_low:.3f}–{c.ci_high:.3f}"
        verdict = Text(c.verdict, style="bold green" if c.winner == c.variant else "")
        if c.winner == c.baseline:
            verdict.stylize("bold yellow")
        if c.spread_note:
            verdict.append("\n" + c.spread_note, style="magenta")
        ratio = "–" if c.ratio is None else f"{c.ratio:.3f}"
        name = Text(c.variant, style="bold")
        name.append("\n" + c.design, style="dim")  # paired by repeat, or independent runs
        table.add_row(name, ratio, ci, _p_text(c.p_value), verdict)
    return table


def _spread_text(a: Axis, dec: int) -> str:
    return "–" if a.q1 is None or a.q3 is None else f"{fmt(a.q1, dec)}–{fmt(a.q3, dec)}"


def tradeoff_cells(t: Tradeoff) -> list[list[str]]:
    """variant, speed median, its q1–q3, quality median, its q1–q3, worst quality: the numbers
    the Rich and Markdown tables share (decimals from each metric's spread)."""
    ds = decimals_for([p.speed.median for p in t.points], [_iqr(p.speed) for p in t.points])
    dq = decimals_for([p.quality.median for p in t.points], [_iqr(p.quality) for p in t.points])
    return [
        [
            p.variant,
            fmt(p.speed.median, ds),
            _spread_text(p.speed, ds),
            fmt(p.quality.median, dq),
            _spread_text(p.quality, dq),
            fmt(p.quality.worst, dq),
        ]
        for p in t.points
    ]


TRADEOFF_COLUMNS = ("speed", "speed q1–q3", "quality", "quality q1–q3", "worst")
TRADEOFF_GIVE_WAY = (("quality q1–q3",), ("speed q1–q3",), ("worst",))


def _tradeoff_grid(t: Tradeoff, columns: tuple[str, ...]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0), show_edge=False)
    table.add_column("  variant", no_wrap=True)
    for col in columns:  # short headers, so it fits a side pane
        table.add_column(col.split(" ")[-1], justify="right", no_wrap=True)
    for p, cells in zip(t.points, tradeoff_cells(t), strict=True):
        name = Text("● ", style="bold green") if p.pareto else Text("○ ", style="dim")
        name.append(cells[0], style="bold")
        by_column = dict(zip(TRADEOFF_COLUMNS, cells[1:], strict=True))
        table.add_row(name, *(by_column[c] for c in columns))
    return table


class TradeoffTable:
    """Each variant's median and quartiles on both metrics, its worst run, and whether it is on
    the front (● on it, ○ beaten on both). Where the width is short, quartiles and then the worst
    run give way, and a line names them: numbers are never cut."""

    def __init__(self, t: Tradeoff) -> None:
        self.t = t

    def _width(self, console: Console, columns: tuple[str, ...]) -> int:
        unbounded = console.options.update_width(10_000)
        return Measurement.get(console, unbounded, _tradeoff_grid(self.t, columns)).maximum

    def columns_for(self, console: Console, width: int) -> tuple[str, ...]:
        shown: tuple[str, ...] = TRADEOFF_COLUMNS
        for group in TRADEOFF_GIVE_WAY:
            if self._width(console, shown) <= width:
                break
            shown = tuple(c for c in shown if c not in group)
        return shown

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        least = self._width(console, ("speed", "quality"))
        most = self._width(console, TRADEOFF_COLUMNS)
        return Measurement(min(least, options.max_width), min(most, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = self.columns_for(console, options.max_width)
        yield _tradeoff_grid(self.t, shown)
        left_out = [c for c in TRADEOFF_COLUMNS if c not in shown]
        if left_out:
            yield Text(f"({', '.join(left_out)}: wider window)", style="dim")


def tradeoff_table(t: Tradeoff) -> TradeoffTable:
    """The trade-off's table, fitted to the width it is drawn at."""
    return TradeoffTable(t)


def _axis_text(name: str, unit: str, lower_is_better: bool) -> Text:
    text = Text(name, style="bold")
    what = f"{unit}, " if unit else ""
    text.append(f" ({what}{'lower' if lower_is_better else 'higher'} is better)", style="dim")
    return text


def _iqr(a: Axis) -> float | None:
    return a.q3 - a.q1 if a.q1 is not None and a.q3 is not None else None


def tradeoff_view(t: Tradeoff) -> Group:
    """The trade-off: a title, the table, who is on the front and why, and the scatter."""
    head = Text("Trade-off: speed ", style="bold")
    head.append_text(_axis_text(t.speed, t.speed_unit, t.speed_lower_is_better))
    head.append(" against quality ", style="bold")
    head.append_text(_axis_text(t.quality, t.quality_unit, t.quality_lower_is_better))
    head.append(" · medians, quartiles, worst run; ● Pareto front", style="dim")
    front = t.front
    beaten = [p for p in t.points if p.dominated_by]
    note = Text()
    if front:
        note.append("Pareto front: " + ", ".join(front), style="bold")
    if beaten:
        for p in beaten:
            by = ", ".join(p.dominated_by)
            note.append(f"\n{p.variant} is beaten on both by {by} (95% CI)", style="yellow")
    elif len(front) > 1:
        note.append(" — no variant is better on both with a resolved difference", style="dim")
    return Group(head, tradeoff_table(t), note, Text(""), TradeoffScatter(t))


def comparability_view(c: Comparability) -> RenderableType:
    """Green one-liner when the runs agree; a red panel naming each difference otherwise; a
    yellow line for runs measured under load or throttled."""
    view = _fields_view(c)
    if not c.noisy:
        return view
    return Group(view, Text("⚠ " + c.noise_message, style="bold yellow"))


def _fields_view(c: Comparability) -> RenderableType:
    intended = [d for d in c.differences if d.intentional]
    if c.ok:
        text = Text("✓ runs comparable", style="bold green")
        checked = ", ".join(c.checked) if c.checked else "nothing reported"
        text.append(f": {c.runs} runs agree on {checked}", style="green")
        for d in intended:
            text.append("\n• " + d.message, style="dim")
        return text
    body = Text()
    for i, d in enumerate(c.differences):
        body.append("\n" if i else "")
        body.append("• " + d.message, style="dim" if d.intentional else "bold")
    return Panel(
        body,
        title=Text("⚠ runs are not comparable: check before trusting the verdicts"),
        title_align="left",
        border_style="red",
        style="",
    )


def runs_status_view(report: ComparisonReport) -> Text | None:
    """Failed and still-pending runs, or None when every planned run finished."""
    text = Text()
    if report.failed:
        text.append(
            f"✗ {report.failed_runs} run(s) failed and are left out of the statistics:",
            style="bold red",
        )
        for f in report.failed:
            what = f"{f.run_id}{' (warm-up)' if f.is_warmup else ''}: {f.status}"
            text.append(f"\n  {what}" + (f" — {f.error}" if f.error else ""), style="red")
    if report.pending_runs:
        text.append("\n" if report.failed else "")
        text.append(
            f"… {report.pending_runs} run(s) pending or running: these numbers will change",
            style="yellow",
        )
    return text if text.plain else None


def metric_view(m: MetricReport, baseline: str, *, legend: bool = True) -> Group:
    """One metric: stats table, box plot, comparisons and any warnings."""
    parts: list[RenderableType] = [
        _metric_title(m),
        stats_table(m, baseline),
        Text(""),
        BoxPlot.from_report(m, title=False, legend=legend),
    ]
    if m.comparisons:
        parts.append(Text(""))
        parts.append(comparisons_table(m))
    parts.extend(Text("! " + w, style="yellow") for w in m.warnings)
    return Group(*parts)


def pair_for_side_by_side(report: ComparisonReport) -> tuple[MetricReport, MetricReport] | None:
    """The time metric and the quality metric a user weighs against each other, if both exist."""
    times = [m for m in report.metrics if m.lower_is_better]
    quality = [m for m in report.metrics if not m.lower_is_better]
    if not times or not quality:
        return None
    preferred = next((m for m in times if m.name == "wall_time_s"), times[0])
    return preferred, quality[0]


def report_view(report: ComparisonReport, *, side_by_side: bool = False) -> Group:
    """The whole comparison: header, guard, failures, then each metric.

    With `side_by_side`, the time metric and the first quality metric (e.g. val_accuracy) come
    first, next to each other, so "faster, but at what cost?" reads at a glance.
    """
    head = Text("Experiment ", style="bold")
    head.append(report.experiment, style="bold cyan")
    head.append(f" · baseline {report.baseline} · {report.counted_runs} counted runs", style="")
    head.append(f"\n{report.directory}", style="dim")
    parts: list[RenderableType] = [head, comparability_view(report.comparability)]
    status = runs_status_view(report)
    if status is not None:
        parts.append(status)
    if report.tradeoff is not None:
        parts += [Rule(style="dim"), tradeoff_view(report.tradeoff)]
    metrics = list(report.metrics)
    pair = pair_for_side_by_side(report) if side_by_side else None
    if pair is not None:
        grid = Table.grid(expand=True, padding=(0, 2))
        grid.add_column(ratio=1)
        grid.add_column(ratio=1)
        grid.add_row(*(metric_view(m, report.baseline, legend=False) for m in pair))
        parts += [Rule(style="dim"), grid]
        metrics = [m for m in metrics if m not in pair]
    rest = metrics[MAX_METRIC_SECTIONS:]
    metrics = metrics[:MAX_METRIC_SECTIONS]
    for i, m in enumerate(metrics):
        parts.append(Rule(style="dim"))
        parts.append(metric_view(m, report.baseline, legend=i == len(metrics) - 1 and not rest))
    if rest:
        parts += [Rule(style="dim"), other_metrics_view(rest)]
    return Group(*parts)


# A section (table, box plot, verdicts) per metric reads well for a handful and costs ~30 ms each
# to draw; a job that reports thousands of names gets its first MAX_METRIC_SECTIONS as sections
# (the spec's metrics come first), the next MAX_METRIC_ROWS as one row each, and a count of the
# rest, so the view stays quick and readable whatever the job reported. --json has every metric.
MAX_METRIC_SECTIONS = 20
MAX_METRIC_ROWS = 200


def other_metrics_view(metrics: Sequence[MetricReport]) -> RenderableType:
    """One row per metric: each variant's verdict against the baseline."""
    t = Table(title=f"{len(metrics):,} more metrics", title_justify="left", box=None)
    t.add_column("Metric", overflow="fold")
    t.add_column("Verdicts", overflow="fold")
    for m in metrics[:MAX_METRIC_ROWS]:
        t.add_row(Text(m.name), Text("; ".join(f"{c.variant}: {c.verdict}" for c in m.comparisons)))
    if len(metrics) > MAX_METRIC_ROWS:
        more = len(metrics) - MAX_METRIC_ROWS
        t.add_row(Text(f"… {more:,} more (tuiprof compare --json has them all)", style="dim"), "")
    return t
