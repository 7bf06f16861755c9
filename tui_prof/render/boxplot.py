"""Text box plots: one row per variant on a shared, labelled axis, readable in monochrome.

Contract: `BoxPlot` is a Rich renderable used unchanged by `tuiprof compare` and the TUI. It
fills the width it is given (at least `MIN_WIDTH`), draws Tukey box plots from
`tui_prof.comparison.stats.box_stats` with distinct glyphs (colour only adds emphasis), and treats
variant and metric names as data: they are appended as plain `Text`, never parsed as markup.

    fp32   ├────[████│██◆█]──────┤  ○     n=5
           ┬─────────┬─────────┬
           9.0       9.5       10.0 s
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from tui_prof.comparison.stats import BoxStats, box_stats, metric_unit
from tui_prof.comparison.stats import lower_is_better as direction_rule

if TYPE_CHECKING:
    from tui_prof.comparison.report import MetricReport

MIN_WIDTH = 40
WHISKER, CAP_LO, CAP_HI, BOX, BOX_LO, BOX_HI = "─", "├", "┤", "█", "[", "]"
MEDIAN, MEAN, OUTLIER, TICK = "│", "◆", "○", "┬"
PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red")
LEGEND = (
    f"{CAP_LO}{WHISKER}{CAP_HI} whiskers: furthest run within 1.5×IQR of the box; "
    f"{OUTLIER} outlier: beyond it",
    f"{BOX_LO}{BOX}{BOX}{BOX_HI} quartiles (middle half of the runs) · {MEDIAN} median · "
    f"{MEAN} mean",
)


def nice_step(span: float, target_ticks: int) -> float:
    """A 1, 2 or 5 × 10^k step giving about `target_ticks` intervals over `span`."""
    raw = span / max(1, target_ticks)
    mag = 10 ** math.floor(math.log10(raw))
    return float(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9))


class BoxPlot:
    """A metric's variants as box plots on one axis; `series` maps variant -> values."""

    def __init__(
        self,
        metric: str,
        series: Mapping[str, Sequence[float]],
        *,
        unit: str | None = None,
        lower_is_better: bool | None = None,
        title: bool = True,
        legend: bool = True,
    ) -> None:
        self.metric = metric
        self.series = {name: [float(x) for x in xs] for name, xs in series.items()}
        self.unit = metric_unit(metric) if unit is None else unit
        self.lower_is_better = (
            direction_rule(metric) if lower_is_better is None else lower_is_better
        )
        self.title = title
        self.legend = legend
        self.boxes: dict[str, BoxStats | None] = {n: box_stats(xs) for n, xs in self.series.items()}

    @classmethod
    def from_report(
        cls, metric: MetricReport, *, title: bool = True, legend: bool = True
    ) -> BoxPlot:
        """The box plot of one metric of a `ComparisonReport` (same numbers as its tables)."""
        return cls(
            metric.name,
            metric.values,
            unit=metric.unit,
            lower_is_better=metric.lower_is_better,
            title=title,
            legend=legend,
        )

    # -- layout --------------------------------------------------------------------------
    def _range(self) -> tuple[float, float] | None:
        values = [x for xs in self.series.values() for x in xs]
        if not values:
            return None
        lo, hi = min(values), max(values)
        if hi == lo:
            pad = abs(lo) * 0.05 or 1.0
            lo, hi = lo - pad, hi + pad
        return lo, hi

    def _axis(self, width: int) -> tuple[float, float, float]:
        span = self._range()
        assert span is not None
        lo, hi = span
        step = nice_step(hi - lo, max(2, width // 12))
        a_lo, a_hi = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
        return a_lo, a_hi, step

    @staticmethod
    def _col(x: float, a_lo: float, a_hi: float, width: int) -> int:
        return max(0, min(width - 1, round((x - a_lo) / (a_hi - a_lo) * (width - 1))))

    def _row(self, b: BoxStats, a_lo: float, a_hi: float, width: int) -> list[str]:
        cells = [" "] * width

        def col(x: float) -> int:
            return self._col(x, a_lo, a_hi, width)

        for x in b.outliers:
            cells[col(x)] = OUTLIER
        wl, wh, q1, q3 = col(b.whisker_low), col(b.whisker_high), col(b.q1), col(b.q3)
        for c in range(wl, wh + 1):
            cells[c] = WHISKER
        cells[wl], cells[wh] = CAP_LO, CAP_HI
        for c in range(q1, q3 + 1):
            cells[c] = BOX
        if q3 - q1 >= 2:
            cells[q1], cells[q3] = BOX_LO, BOX_HI
        cells[col(b.mean)] = MEAN
        cells[col(b.median)] = MEDIAN
        return cells

    @staticmethod
    def _styled(cells: list[str], colour: str) -> Text:
        text = Text()
        for ch in cells:
            if ch in (BOX, BOX_LO, BOX_HI):
                text.append(ch, style=colour)
            elif ch in (MEDIAN, MEAN):
                text.append(ch, style="bold")
            elif ch == OUTLIER:
                text.append(ch, style=f"bold {colour}")
            else:
                text.append(ch, style=f"dim {colour}" if ch != " " else "")
        return text

    def _axis_lines(self, a_lo: float, a_hi: float, step: float, width: int) -> tuple[str, str]:
        ticks = [a_lo + i * step for i in range(round((a_hi - a_lo) / step) + 1)]
        line = [WHISKER] * width
        labels = [" "] * (width + 8)
        last_end = -2
        dec = _decimals(step)
        for i, t in enumerate(ticks):
            c = self._col(t, a_lo, a_hi, width)
            line[c] = TICK
            label = f"{t:.{dec}f}"
            if label.startswith("-") and float(label) == 0:
                label = label[1:]
            start = c if i == 0 else max(0, c - len(label) // 2)
            if i == len(ticks) - 1:
                start = min(start, width - len(label))
            if start > last_end + 1:
                labels[start : start + len(label)] = list(label)
                last_end = start + len(label) - 1
        text = "".join(labels).rstrip()
        if self.unit and len(text) + 1 + len(self.unit) <= width + 8:
            text += " " + self.unit
        return "".join(line), text

    # -- Rich protocol -------------------------------------------------------------------
    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(MIN_WIDTH, options.max_width), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(MIN_WIDTH, options.max_width)
        names = list(self.series)
        label_w = min(max((len(n) for n in names), default=4), max(6, width // 4))
        counts = {n: f"n={len(xs)}" for n, xs in self.series.items()}
        count_w = max((len(c) for c in counts.values()), default=3)
        plot_w = max(10, width - label_w - count_w - 2)
        if self.title:
            title = Text(self.metric, style="bold")
            if self.unit:
                title.append(f" ({self.unit})")
            title.append(
                " · lower is better" if self.lower_is_better else " · higher is better", style="dim"
            )
            yield title
        if self._range() is None:
            yield Text("no finished runs to plot", style="dim")
            return
        a_lo, a_hi, step = self._axis(plot_w)
        for i, name in enumerate(names):
            label = name if len(name) <= label_w else name[: label_w - 1] + "…"
            row = Text()
            row.append(label.ljust(label_w) + " ", style="bold")
            b = self.boxes[name]
            if b is None:
                row.append("(no finished runs)".ljust(plot_w), style="dim")
            else:
                row.append_text(self._styled(self._row(b, a_lo, a_hi, plot_w), PALETTE[i % 6]))
            row.append(" " + counts[name].rjust(count_w), style="dim")
            yield row
        line, labels = self._axis_lines(a_lo, a_hi, step, plot_w)
        pad = " " * (label_w + 1)
        yield Text(pad + line, style="dim")
        yield Text(pad + labels, no_wrap=True, overflow="crop")
        if self.legend:
            for line in LEGEND:
                yield Text(line, style="dim")
