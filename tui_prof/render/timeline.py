"""A step's timeline as lines of text: one row per track, a cell per time bin, a time axis in ms.

Contract: every line is at most `width` cells; each cell shows the glyph of the category that
fills it most (the breakdown bars' glyphs, so colour is never the only carrier), blank where the
track is idle; names are already printable (timeline.model) and go into Text, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from tui_prof.model import CATEGORIES, CATEGORY_LABELS
from tui_prof.profiles.timeline.bins import IDLE, bin_track
from tui_prof.profiles.timeline.model import StepTimeline, Track
from tui_prof.render.summary import CATEGORY_STYLE

MIN_CELLS = 8
LABEL_MAX = 22


@dataclass(frozen=True)
class View:
    """The visible window of a step, µs from its start."""

    lo: float
    hi: float

    @classmethod
    def fit(cls, st: StepTimeline) -> View:
        return cls(0.0, max(st.duration_us, 1e-3))


def label_width(width: int) -> int:
    return max(6, min(LABEL_MAX, width // 4))


def cells_for(width: int) -> int:
    return max(MIN_CELLS, width - label_width(width) - 1)


def _fit(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def track_line(
    t: Track, view: View, width: int, mono: bool = False, cursor: int | None = None
) -> Text:
    lw, cells = label_width(width), cells_for(width)
    line = Text(_fit(t.name, lw).ljust(lw), style="bold" if t.kind == "device" else "")
    line.append("│", style="dim")
    bins = bin_track(t, view.lo, view.hi, cells)
    for i, b in enumerate(bins):
        style = "reverse" if cursor == i else ""
        if b == IDLE:
            line.append(" ", style=style)
        else:
            color, glyph = CATEGORY_STYLE[CATEGORIES[int(b)]]
            line.append(glyph, style=(style + " " + ("" if mono else color)).strip())
    return line


def _ms(us: float) -> str:
    ms = us / 1000.0
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


def axis_line(view: View, width: int) -> Text:
    """Tick labels in ms every ~12 cells, aligned to the cells."""
    lw, cells = label_width(width), cells_for(width)
    row = [" "] * cells
    step = 12 if cells >= 36 else max(6, cells // 3)
    for pos in range(0, cells - 4, step):
        label = "|" + _ms(view.lo + (view.hi - view.lo) * pos / cells)
        if pos + len(label) <= cells:
            row[pos : pos + len(label)] = list(label)
    return Text("ms".rjust(lw) + " " + "".join(row), style="dim")


def legend_line(st: StepTimeline, width: int, mono: bool = False) -> Text:
    present = {int(c) for t in st.tracks for c in set(t.cat.tolist())}
    line = Text()
    for i, c in enumerate(CATEGORIES):
        if i not in present:
            continue
        color, glyph = CATEGORY_STYLE[c]
        piece = f"{glyph} {CATEGORY_LABELS[c]}  "
        if line.cell_len + len(piece) > width:
            break
        line.append(glyph, style="" if mono else color)
        line.append(f" {CATEGORY_LABELS[c]}  ")
    line.rstrip()
    return line


def header_line(st: StepTimeline, view: View, width: int, note: str = "") -> Text:
    span = f"{_ms(view.lo)}–{_ms(view.hi)} ms of {_ms(st.duration_us)} ms"
    src = f" · {st.source}" if st.source else ""
    text = f"Step {st.step}{src} · {span}{note}"
    return Text(_fit(text, width), style="bold")


def timeline_lines(
    st: StepTimeline,
    width: int,
    view: View | None = None,
    *,
    max_tracks: int | None = None,
    mono: bool = False,
    note: str = "",
) -> list[Text]:
    """The whole view: header, tracks, axis, legend; each line at most `width` cells."""
    view = view or View.fit(st)
    lines = [header_line(st, view, width, note)]
    tracks: Sequence[Track] = st.tracks
    shown = tracks if max_tracks is None else tracks[:max_tracks]
    if not tracks:
        lines.append(Text("no events in this step"))
    for t in shown:
        lines.append(track_line(t, view, width, mono))
    if len(shown) < len(tracks):
        lines.append(Text(f"… {len(tracks) - len(shown)} more tracks", style="dim"))
    lines.append(axis_line(view, width))
    lines.append(legend_line(st, width, mono))
    return [line[:width] if line.cell_len > width else line for line in lines]
