"""A text scatter of the trade-off: one labelled point per variant, speed across, quality up.

Contract: `TradeoffScatter` is a Rich renderable both faces print. It needs `MIN_WIDTH` columns
and prints nothing narrower (the trade-off table beside it says it all); it is readable without
colour: `●` a variant's medians (`○` where another variant beats it on both: off the Pareto
front), `─` the quartiles of its speed, `┆` down to `×` its worst run's quality; axes carry units
and say which way is better. Variant names are data: appended as plain text, never parsed as
markup.

    val_accuracy · ↑ better
    0.96 ┤
         │             ───●──── float32
    0.95 ┤ ──●─── mixed   ┆
         │    ┆           ×
    0.94 ┤    ×
         └─┬─────────┬─────────┬
           7         8         9  wall_time_s (s) · ← faster
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from tui_prof.comparison.names import is_time_metric
from tui_prof.comparison.tradeoff import Tradeoff
from tui_prof.render.boxplot import PALETTE, nice_step

MIN_WIDTH = 50
HEIGHT = 9  # plot rows
FRONT, BEATEN, WORST, LINK, SPREAD = "●", "○", "×", "┆", "─"


def _ticks(lo: float, hi: float, count: int) -> tuple[float, float, float]:
    """Axis limits on a 1-2-5 step that cover lo..hi with about `count` intervals."""
    if hi <= lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, count)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


def _label(value: float, step: float) -> str:
    dec = max(0, -math.floor(math.log10(step) + 1e-9))
    text = f"{value:.{dec}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


@dataclass(frozen=True)
class _Layout:
    left: int  # columns before the plot (tick labels and the axis)
    plot_w: int
    label_room: int
    y: tuple[float, float, float]  # lo, hi, step
    x: tuple[float, float, float]
    rows: int

    def col(self, x: float) -> int:
        lo, hi, _ = self.x
        return max(0, min(self.plot_w - 1, round((x - lo) / (hi - lo) * (self.plot_w - 1))))

    def row(self, y: float) -> int:
        """0 is the top row."""
        lo, hi, _ = self.y
        return max(0, min(self.rows - 1, round((hi - y) / (hi - lo) * (self.rows - 1))))

    @staticmethod
    def ticks(axis: tuple[float, float, float]) -> list[float]:
        lo, hi, step = axis
        return [lo + i * step for i in range(round((hi - lo) / step) + 1)]


Cell = tuple[str, str]  # character, style


class TradeoffScatter:
    """The points of a `Tradeoff`; see the module contract."""

    def __init__(self, tradeoff: Tradeoff, height: int = HEIGHT) -> None:
        self.tradeoff = tradeoff
        self.height = max(4, height)
        self.points = [
            p
            for p in tradeoff.points
            if p.speed.median is not None and p.quality.median is not None
        ]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(MIN_WIDTH, options.max_width), options.max_width)

    def _layout(self, width: int) -> _Layout:
        xs = [
            v
            for p in self.points
            for v in (p.speed.median, p.speed.q1, p.speed.q3)
            if v is not None
        ]
        ys = [v for p in self.points for v in (p.quality.median, p.quality.worst) if v is not None]
        y = _ticks(min(ys), max(ys), max(2, self.height // 3))
        left = max(len(_label(v, y[2])) for v in _Layout.ticks(y)) + 2
        label_room = min(max(len(p.variant) for p in self.points) + 2, width // 3)
        plot_w = max(10, width - left - label_room)
        x = _ticks(min(xs), max(xs), max(2, plot_w // 12))
        return _Layout(left, plot_w, label_room, y, x, self.height)

    def _grid(self, lay: _Layout) -> list[list[Cell]]:
        grid: list[list[Cell]] = [
            [(" ", "")] * (lay.plot_w + lay.label_room) for _ in range(lay.rows)
        ]
        marks = []
        for i, p in enumerate(self.points):
            assert p.speed.median is not None and p.quality.median is not None
            colour = PALETTE[i % len(PALETTE)]
            c, r = lay.col(p.speed.median), lay.row(p.quality.median)
            end = c
            if p.speed.q1 is not None and p.speed.q3 is not None:
                lo, end = lay.col(p.speed.q1), lay.col(p.speed.q3)
                for cc in range(lo, end + 1):
                    if grid[r][cc][0] == " ":
                        grid[r][cc] = (SPREAD, f"dim {colour}")
            if p.quality.worst is not None:
                rw = lay.row(p.quality.worst)
                step = 1 if rw > r else -1
                for rr in range(r + step, rw, step):
                    if grid[rr][c][0] == " ":
                        grid[rr][c] = (LINK, f"dim {colour}")
                if rw != r:
                    grid[rw][c] = (WORST, colour)
            grid[r][c] = (FRONT if p.pareto else BEATEN, f"bold {colour}")
            marks.append((r, max(c, end), p.variant, colour))
        for r, c, name, colour in marks:
            _place(grid, r, c, name, colour)
        return grid

    def _x_axis(self, lay: _Layout) -> tuple[str, str]:
        axis = ["─"] * lay.plot_w
        labels = [" "] * (lay.plot_w + 12)
        last_end = -2
        for i, x in enumerate(_Layout.ticks(lay.x)):
            c = lay.col(x)
            axis[c] = "┬"
            lab = _label(x, lay.x[2])
            start = c if i == 0 else max(0, c - len(lab) // 2)
            if start > last_end + 1 and start + len(lab) <= len(labels):
                labels[start : start + len(lab)] = list(lab)
                last_end = start + len(lab) - 1
        return "".join(axis), "".join(labels).rstrip()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if width < MIN_WIDTH or not self.points:
            return
        t = self.tradeoff
        lay = self._layout(width)
        title = Text(t.quality, style="bold")
        if t.quality_unit:
            title.append(f" ({t.quality_unit})")
        title.append(" · ↓ better" if t.quality_lower_is_better else " · ↑ better", style="dim")
        yield title
        tick_rows = {lay.row(v): _label(v, lay.y[2]) for v in _Layout.ticks(lay.y)}
        for r, cells in enumerate(self._grid(lay)):
            line = Text()
            if r in tick_rows:
                line.append(tick_rows[r].rjust(lay.left - 2) + " ┤", style="dim")
            else:
                line.append(" " * (lay.left - 1) + "│", style="dim")
            for ch, style in cells:
                line.append(ch, style=style)
            line.rstrip()
            yield line
        axis, labels = self._x_axis(lay)
        yield Text(" " * (lay.left - 1) + "└" + axis, style="dim")
        better = "faster" if is_time_metric(t.speed) else "better"
        arrow = f"← {better}" if t.speed_lower_is_better else f"→ {better}"
        unit = f" ({t.speed_unit})" if t.speed_unit else ""
        name = f"{t.speed}{unit} · {arrow}"
        if lay.left + len(labels) + 2 + len(name) <= width:
            yield Text(" " * lay.left + labels + "  ", style="dim").append(name)
        else:
            yield Text(" " * lay.left + labels, style="dim")
            yield Text(name.rjust(lay.left + lay.plot_w))
        yield Text(
            f"{FRONT} median · {SPREAD} q1–q3 · {LINK}{WORST} to the worst run · "
            f"{BEATEN} off the Pareto front",
            style="dim",
        )


def _place(grid: list[list[Cell]], r: int, c: int, name: str, colour: str) -> None:
    """The name right of its point, or on a free row next to it, or left of it."""
    width = len(grid[0])
    text = " " + name
    for rr, start in ((r, c + 1), (r - 1, c + 1), (r + 1, c + 1), (r, c - len(text))):
        fits = 0 <= rr < len(grid) and start >= 0 and start + len(text) <= width
        if fits and all(grid[rr][k][0] == " " for k in range(start, start + len(text))):
            for k, ch in enumerate(text):
                grid[rr][start + k] = (ch, colour)
            return
    for k, ch in enumerate(text):  # crowded: overwrite rather than lose the name
        if c + 1 + k < width:
            grid[r][c + 1 + k] = (ch, colour)
