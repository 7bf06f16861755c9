"""A step's timeline as lines of text: one row per track, a cell per time bin, a time axis in ms.

Contract: every line is at most `width` cells; each cell shows the glyph of the category that
fills it most (the breakdown bars' glyphs, so colour is never the only carrier), blank where the
track is idle; names are already printable (timeline.model) and go into Text, never markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from tui_prof.model import CATEGORIES, CATEGORY_LABELS
from tui_prof.profiles.timeline.bins import IDLE, bin_track
from tui_prof.profiles.timeline.compare import TrackGrowth
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


# Words a track name can lose when it is too wide: what tells tracks apart (a stream's or
# thread's number) is at the end, so shorten the words and keep the tail.
_SHORTER = (
    (" stream ", " s"),
    ("Stream #", "#"),
    ("(Compute)", ""),
    ("(Memcpy", "("),
    ("thread ", "t"),
)


_KIND_SUFFIX = re.compile(
    r"\([A-Za-z][A-Za-z0-9 ]*\)$"
)  # `(Kernel)`, `(MemcpyH2D)`: a stream's use
_LAST_NUMBER = re.compile(r"\d+(?!.*\d)")


def track_label(name: str, n: int) -> str:
    """A track's name in n cells: as it is, else with its words shortened (then without a
    stream's trailing `(Kernel)`), else its start and its end around an ellipsis, keeping its
    last number whole (two streams of one GPU, two lines of one TPU core, must not read the
    same)."""
    if len(name) <= n:
        return name
    for long, short in _SHORTER:
        name = name.replace(long, short)
    if len(name) > n and _LAST_NUMBER.search(_KIND_SUFFIX.sub("", name)):
        name = _KIND_SUFFIX.sub("", name)
    if len(name) <= n:
        return name
    head = min(6, max(n // 2 - 1, 1))
    tail = n - head - 1
    last = _LAST_NUMBER.search(name)
    if last is not None and last.end() <= len(name) - tail:  # the cut would drop the number
        if len(name) - last.start() <= n - 2:
            tail = len(name) - last.start()  # the end from the number on
        elif last.end() <= n - 2:
            tail = n - last.end() - 1  # the start up to the number, and the very end
        head = n - tail - 1
    return name[:head] + "…" + name[len(name) - tail :]


# The legend's words where the full labels do not fit a narrow view.
SHORT_LABELS = {
    "device_compute": "compute",
    "device_to_device": "copy",
    "device_collectives": "comm",
    "host_compute": "host",
    "kernel_launch": "launch",
    "input": "input",
    "output": "output",
    "compilation": "compile",
    "other": "other",
}


def track_line(
    t: Track, view: View, width: int, mono: bool = False, cursor: int | None = None
) -> Text:
    lw, cells = label_width(width), cells_for(width)
    line = Text(track_label(t.name, lw).ljust(lw), style="bold" if t.kind == "device" else "")
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
    """Each category drawn in the step, glyph and label; short labels where the full ones do
    not all fit, so every glyph on screen is explained."""
    present = [
        c
        for i, c in enumerate(CATEGORIES)
        if i in {int(x) for t in st.tracks for x in set(t.cat.tolist())}
    ]
    for labels, gap in ((CATEGORY_LABELS, "  "), (SHORT_LABELS, " ")):
        if sum(len(labels[c]) + 2 + len(gap) for c in present) - len(gap) <= width:
            break
    line = Text()
    for c in present:
        color, glyph = CATEGORY_STYLE[c]
        piece = f"{glyph} {labels[c]}"
        if line.cell_len + len(piece) > width:
            break
        line.append(glyph, style="" if mono else color)
        line.append(f" {labels[c]}{gap}")
    line.rstrip()
    return line


def header_line(
    st: StepTimeline, view: View, width: int, note: str = "", short_note: str | None = None
) -> Text:
    """The step, its source, the window shown, then `note`; where that is too wide, the window
    said shorter (`216 ms` for the whole step, `41.9–83.8 of 216 ms`), then `short_note`, so
    which step of how many and how many tracks still read at 80 columns."""
    src = f" · {st.source}" if st.source else ""
    whole = view.lo <= 0.0 and view.hi >= st.duration_us
    span = f"{_ms(view.lo)}–{_ms(view.hi)} ms of {_ms(st.duration_us)} ms"
    short = (
        f"{_ms(st.duration_us)} ms"
        if whole
        else f"{_ms(view.lo)}–{_ms(view.hi)} of {_ms(st.duration_us)} ms"
    )
    tries = [(span, note), (short, note), (short, note if short_note is None else short_note)]
    for window, said in tries:
        text = f"Step {st.step}{src} · {window}{said}"
        if len(text) <= width:
            break
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


def growth_line(r: TrackGrowth, width: int, with_kind: bool = False) -> Text:
    """One track's growth, slowest against median step: busy-time change, both busy times, the
    track, and the category whose own time changed most (`input +1.21 ms`), cut to `width`."""
    kind = f"{r.kind:6} " if with_kind else ""
    what = ""
    if abs(r.category_delta_us) >= 5.0:  # under 0.01 ms as shown: nothing to name
        what = f"  ({SHORT_LABELS[r.category]} {r.category_delta_us / 1000:+.2f} ms)"
    text = (
        f"{r.delta_us / 1000:+8.2f} ms  {r.median_us / 1000:7.2f} → {r.slow_us / 1000:7.2f} ms  "
        f"{kind}{r.name}{what}"
    )
    return Text(text if len(text) <= width else text[: width - 1] + "…")


def event_detail(st: StepTimeline, track: int, i: int, width: int) -> Text:
    """The selected event: its name (two lines at most), then one line each for where and how
    long, its inputs and its partner, cut to the width, so the tracks keep their rows."""
    t = st.tracks[track]
    name = st.event_name(int(t.nid[i]))
    if len(name) > 2 * width:
        name = name[: 2 * width - 1] + "…"
    dur = float(t.end[i] - t.start[i])
    out = Text(name, style="bold", overflow="fold")
    long = f"{dur / 1000:,.3f} ms" if dur >= 1000 else f"{dur:,.1f} µs"
    at = f" · at {float(t.start[i]) / 1000:.3f} ms · "
    what = CATEGORY_LABELS[CATEGORIES[int(t.cat[i])]]
    tail = f"{at}{long} long · {what}"
    if len(t.name) + len(tail) > width:  # when and how long stay whole: the words go first
        tail = f"{at}{long} · {what}"
    where = track_label(t.name, max(width - len(tail), 8)) + tail
    for line in (where, st.info(track, i), partner_line(st, track, i, width)):
        if line:
            out.append("\n" + (line if len(line) <= width else line[: width - 1] + "…"))
    out.stylize("dim", len(name))
    return out


def partner_line(st: StepTimeline, track: int, i: int, width: int) -> str:
    """Where `p` goes: the call (and op) that launched a kernel, or what an op launched; the
    names cut so the line's end (where it is) stays in `width`."""

    def fit(head: str, name: str, tail: str) -> str:
        room = max(width - len(head) - len(tail), 6)
        return head + (name if len(name) <= room else name[: room - 1] + "…") + tail

    by = st.launched_by(track, i)
    if by is not None:
        (k, j), op = by
        call = st.tracks[k]
        what = st.event_name(int(call.nid[j]))
        if op is not None:
            what = f"{st.event_name(int(call.nid[op]))} → {what}"
        return fit(
            "launched by (p): ",
            what,
            f" · {track_label(call.name, 20)} {float(call.start[j]) / 1000:.3f} ms",
        )
    found = st.launched(track, i)
    if not found:
        return ""
    k, j = found[0]
    dev = st.tracks[k]
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return fit(
        "launched (p): ",
        st.event_name(int(dev.nid[j])),
        f"{more} · {track_label(dev.name, 20)} {float(dev.start[j]) / 1000:.3f} ms",
    )
