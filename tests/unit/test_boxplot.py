"""Box plots: golden text at 80 columns in monochrome, glyph positions, widths and escaping."""

from __future__ import annotations

import io
from typing import Literal

import pytest
from rich.console import Console

from tui_prof.render.boxplot import (
    BOX_HI,
    BOX_LO,
    CAP_LO,
    MEAN,
    MEDIAN,
    OUTLIER,
    BoxPlot,
    nice_step,
)

SERIES = {"fp32": [10.0, 10.2, 10.4, 10.6, 12.5], "mixed": [9.0, 9.2, 9.3, 9.4, 9.6]}

GOLDEN_80 = """\
wall_time_s (s) · lower is better
fp32                   ├───[██│███] ◆                             ○          n=5
mixed ├──[█│█]──┤                                                            n=5
      ┬────────────────┬────────────────┬─────────────────┬────────────────┬
      9               10               11                12               13 s
├─┤ whiskers: furthest run within 1.5×IQR of the box; ○ outlier: beyond it
[██] quartiles (middle half of the runs) · │ median · ◆ mean
"""


def render(
    renderable: object,
    width: int = 80,
    color: Literal["standard", "256", "truecolor"] | None = None,
) -> str:
    console = Console(width=width, color_system=color, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text(styles=color is not None)


def test_golden_text_at_80_columns_monochrome() -> None:
    assert render(BoxPlot("wall_time_s", SERIES)) == GOLDEN_80


def test_glyphs_sit_where_the_shared_axis_puts_the_numbers() -> None:
    lines = render(BoxPlot("wall_time_s", SERIES)).splitlines()
    row, offset, plot_w = lines[1], len("fp32 ") + 1, 80 - 5 - 3 - 2
    # Axis 9..13 over 70 columns; q1=10.2, median=10.4, q3=10.6, mean=10.74, outlier 12.5.

    def col(x: float) -> int:
        return offset + round((x - 9) / 4 * (plot_w - 1))

    assert row[col(10.0)] == CAP_LO
    assert row[col(10.2)] == BOX_LO and row[col(10.6)] == BOX_HI
    assert row[col(10.4)] == MEDIAN and row[col(10.74)] == MEAN
    assert row[col(12.5)] == OUTLIER and row.count(OUTLIER) == 1
    ticks = [i for i, ch in enumerate(lines[3]) if ch == "┬"]
    assert ticks == [col(t) for t in (9, 10, 11, 12, 13)]


def test_no_ansi_codes_in_monochrome_and_colour_only_adds_emphasis() -> None:
    plain = render(BoxPlot("wall_time_s", SERIES))
    assert "\x1b[" not in plain
    coloured = render(BoxPlot("wall_time_s", SERIES), color="truecolor")
    assert "\x1b[" in coloured


@pytest.mark.parametrize("width", [40, 60, 100, 160])
def test_width_follows_the_console(width: int) -> None:
    lines = render(BoxPlot("wall_time_s", SERIES, legend=False), width=width).splitlines()
    assert max(len(line) for line in lines) <= width
    assert len(lines[1]) == width  # rows fill the width: label, plot, n=
    assert lines[1].endswith("n=5")


def test_names_are_data_not_markup() -> None:
    out = render(BoxPlot("val_[bold]acc", {"[red]a[/red]": [1.0, 2.0, 3.0], "b": [2, 3, 4]}))
    assert "val_[bold]acc" in out
    assert "[red]a[/red]" in out


def test_long_names_are_truncated_and_empty_variants_said_so() -> None:
    out = render(BoxPlot("loss", {"x" * 50: [1.0, 2.0, 3.0], "none": []}, legend=False))
    assert "x" * 19 + "…" in out and "x" * 21 not in out
    assert "(no finished runs)" in out and "n=0" in out
    assert "no finished runs to plot" in render(BoxPlot("loss", {"a": []}))


def test_constant_values_still_draw_on_a_padded_axis() -> None:
    out = render(BoxPlot("epochs", {"a": [5.0, 5.0, 5.0]}, legend=False), width=60)
    row = out.splitlines()[1]
    assert MEDIAN in row and "5.0" in out


def test_accuracy_axis_uses_decimals_and_no_unit() -> None:
    plot = BoxPlot("val_accuracy", {"a": [0.931, 0.932, 0.930], "b": [0.91, 0.94, 0.92]})
    lines = render(plot).splitlines()
    assert lines[0] == "val_accuracy · higher is better"  # no unit: accuracy is a fraction
    # Ticks every 0.005 need three decimals, each number printed the same way under its tick.
    assert lines[4] == (
        "  0.910     0.915       0.920       0.925        0.930       0.935     0.940"
    )


def test_nice_step() -> None:
    assert nice_step(3.5, 5) == 1.0
    assert nice_step(0.03, 6) == pytest.approx(0.005)
    assert nice_step(120, 4) == 50
