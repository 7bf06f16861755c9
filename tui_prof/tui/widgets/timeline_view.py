"""The Timeline tab: one step's host threads and device streams, zoom, pan, an event cursor.

Contract: the session's events are read in a worker (never on the UI thread) when the tab is
first shown for a session; drawing bins the visible window per track (timeline.bins, numpy
searchsorted), so a key press redraws without walking events. The slowest step comes first.
"""

from __future__ import annotations

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.widget import Widget
from textual.worker import get_current_worker

from tui_prof.model import ProfileError
from tui_prof.profiles.timeline.bins import event_at
from tui_prof.profiles.timeline.compare import Comparison, compare_median
from tui_prof.profiles.timeline.model import StepTimeline, Timeline, Track
from tui_prof.render.timeline import (
    View,
    axis_line,
    cells_for,
    event_detail,
    growth_line,
    header_line,
    label_width,
    legend_line,
    track_line,
)

ZOOM = 2.0
PAN = 0.25  # of the visible window per key press
FIXED_LINES = 3  # header, axis, legend; the detail under them is as tall as it needs


class TimelineView(Widget, can_focus=True):
    """A step at a time; the cursor is a time on the selected track."""

    DEFAULT_CSS = "TimelineView { height: 1fr; }"
    BINDINGS = [
        Binding(
            "left", "event(-1)", "Prev event", show=False, tooltip="Previous event on the track"
        ),
        Binding("right", "event(1)", "Next event", show=False, tooltip="Next event on the track"),
        Binding("up", "track(-1)", "Track up", show=False, tooltip="Select the track above"),
        Binding("down", "track(1)", "Track down", show=False, tooltip="Select the track below"),
        Binding(
            "plus,equals_sign",
            "zoom(0.5)",
            "Zoom in",
            key_display="+",
            tooltip="Zoom in around the cursor",
        ),
        Binding(
            "minus", "zoom(2.0)", "Zoom out", key_display="-", tooltip="Zoom out around the cursor"
        ),
        Binding(
            "comma",
            "pan(-1)",
            "Pan ←",
            key_display=",",
            show=False,
            tooltip="Pan left a quarter view",
        ),
        Binding(
            "full_stop",
            "pan(1)",
            "Pan →",
            key_display=".",
            show=False,
            tooltip="Pan right a quarter view",
        ),
        Binding("z", "fit", "Fit", tooltip="Show the whole step"),
        Binding(
            "left_square_bracket",
            "step(-1)",
            "Prev step",
            key_display="[",
            tooltip="The previous step",
        ),
        Binding(
            "right_square_bracket", "step(1)", "Next step", key_display="]", tooltip="The next step"
        ),
        Binding("s", "jump('slowest')", "Slowest", show=False, tooltip="Jump to the slowest step"),
        Binding("M", "jump('median')", "Median", show=False, tooltip="Jump to the median step"),
        Binding("slash", "find", "Find", key_display="/", tooltip="Find events by name"),
        Binding(
            "p",
            "partner",
            "Partner",
            show=False,
            tooltip="Jump from a kernel to the call that launched it; from a call or an op to "
            "the (first) kernel it launched",
        ),
        Binding(
            "g",
            "group",
            "Collapse",
            show=False,
            tooltip="Collapse the selected track's host or device into one row (again: expand)",
        ),
        Binding(
            "h",
            "source",
            "Rank/host",
            show=False,
            tooltip="Multi-rank or multi-host sessions: the next rank's or host's tracks "
            "(first: each step's slowest)",
        ),
        Binding("n", "next_match", "Next match", show=False, tooltip="The next event found by /"),
        Binding(
            "v",
            "versus",
            "Slow vs median",
            tooltip="The slowest step beside the median one: which tracks grew (again: back)",
        ),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.key: str | None = None  # the session shown or being read
        self.timeline: Timeline | None = None
        self.step_tl: StepTimeline | None = None
        self.view = View(0.0, 1.0)
        self.cursor = 0.0  # µs from the step's start
        self.track = 0
        self.event: int | None = None
        self.message = Text("Open this tab on a session to read its events.", style="dim")
        self.versus = False  # the slowest step against the median one (`v`)
        self.source: str | None = None  # the rank or host shown; None: each step's slowest
        self.raw: StepTimeline | None = None  # the step, every track apart
        self.collapsed: set[str] = set()  # groups drawn as one row (`g`)
        self.query_text = ""  # what `/` looks for
        self.matches: np.ndarray = np.zeros(0, dtype=np.int32)  # name ids that contain it

    # -- loading -----------------------------------------------------------------------------

    def show_session(
        self, key: str, target: object, steps: list[tuple[int, float]] | None = None
    ) -> None:
        """Read `target` (a Session or a path) unless it is already shown or being read;
        `steps`: the summary's (number, ms), whose numbers the tab then uses."""
        if key == self.key:
            return
        self.key = key
        self.timeline = self.step_tl = None
        self.source = None
        self.message = Text("Reading the session's events …", style="dim")
        self.refresh()
        self._read(key, target, steps or [])

    @work(thread=True, exclusive=True, group="timeline", name="reading events", exit_on_error=False)
    def _read(self, key: str, target: object, steps: list[tuple[int, float]]) -> None:
        from tui_prof.model import Cancelled
        from tui_prof.profiles.timeline.load import load_timeline

        cancel = get_current_worker().cancelled_event
        try:
            tl = load_timeline(target, cancel=cancel)  # type: ignore[arg-type]
            tl.renumber(steps)
            slow = tl.slowest()
        except Cancelled:
            return
        except ProfileError as exc:
            self.app.call_from_thread(self._failed, key, str(exc))
            return
        except Exception as exc:  # a bug must not kill the browser
            from tui_prof.tui.errors import one_line

            self.app.call_from_thread(self._failed, key, f"unexpected error: {one_line(exc)}")
            return
        if not cancel.is_set():
            self.app.call_from_thread(self._loaded, key, tl, slow)

    def _failed(self, key: str, error: str) -> None:
        if key == self.key:
            self.message = Text(f"No timeline: {error}")
            self.refresh()

    def _loaded(self, key: str, tl: Timeline, step: int) -> None:
        if key != self.key:
            return
        self.timeline = tl
        self._show_step(step)

    def _show_step(self, number: int) -> None:
        assert self.timeline is not None
        self.raw = self.timeline.step(number, source=self.source)
        self.step_tl = self.raw.collapsed(self.collapsed)
        self.view = View.fit(self.step_tl)
        self.track = min(self.track, max(len(self.step_tl.tracks) - 1, 0))
        self.cursor = 0.0
        self._select(self._first_event())
        self.refresh()

    # -- the cursor ----------------------------------------------------------------------------

    def _first_event(self) -> int | None:
        st = self.step_tl
        if st is None or not st.tracks:
            return None
        return 0 if len(st.tracks[self.track].start) else None

    def _select(self, i: int | None) -> None:
        self.event = i
        st = self.step_tl
        if st is None or i is None or not st.tracks:
            return
        t = st.tracks[self.track]
        self.cursor = float(t.start[i])
        w = self.view.hi - self.view.lo
        if not self.view.lo <= self.cursor <= self.view.hi:  # keep the cursor in view
            lo = max(0.0, min(self.cursor - w / 2, st.duration_us - w))
            self.view = View(lo, lo + w)

    def action_event(self, delta: int) -> None:
        st = self.step_tl
        if st is None or not st.tracks:
            return
        n = len(st.tracks[self.track].start)
        if n:
            i = 0 if self.event is None else min(max(self.event + delta, 0), n - 1)
            self._select(i)
            self.refresh()

    def action_track(self, delta: int) -> None:
        st = self.step_tl
        if st is None or not st.tracks:
            return
        self.track = min(max(self.track + delta, 0), len(st.tracks) - 1)
        self.event = event_at(st.tracks[self.track], self.cursor)
        self.refresh()

    def action_zoom(self, factor: float) -> None:
        st = self.step_tl
        if st is None:
            return
        w = min(max((self.view.hi - self.view.lo) * factor, 1.0), st.duration_us)
        share = (self.cursor - self.view.lo) / max(self.view.hi - self.view.lo, 1e-9)
        lo = min(max(self.cursor - share * w, 0.0), st.duration_us - w)
        self.view = View(lo, lo + w)
        self.refresh()

    def action_pan(self, direction: int) -> None:
        st = self.step_tl
        if st is None:
            return
        w = self.view.hi - self.view.lo
        lo = min(max(self.view.lo + direction * PAN * w, 0.0), st.duration_us - w)
        self.view = View(lo, lo + w)
        self.refresh()

    def action_fit(self) -> None:
        if self.step_tl is not None:
            self.view = View.fit(self.step_tl)
            self.refresh()

    def action_step(self, delta: int) -> None:
        if self.timeline is None or self.step_tl is None:
            return
        nums = self.timeline.step_numbers()
        k = nums.index(self.step_tl.step) if self.step_tl.step in nums else 0
        self._show_step(nums[min(max(k + delta, 0), len(nums) - 1)])

    def action_jump(self, which: str) -> None:
        if self.timeline is not None:
            self._show_step(
                self.timeline.slowest(self.source)
                if which == "slowest"
                else self.timeline.median(self.source)
            )

    # -- drawing ---------------------------------------------------------------------------------

    def action_find(self) -> None:
        from textual.widgets import Input

        parent = self.parent
        if not isinstance(parent, Widget) or parent.query("#timeline-find"):
            return
        box = Input(placeholder="find events by name (enter; empty: clear)", id="timeline-find")
        parent.mount(box)
        box.focus()

    def find(self, text: str) -> None:
        """Highlight the events whose name contains `text` (case-insensitive); go to the first."""
        self.query_text = text.strip()
        if self.timeline is None or not self.query_text:
            self.matches = np.zeros(0, dtype=np.int32)
        else:
            low = self.query_text.lower()
            self.matches = np.array(
                [i for i, n in enumerate(self.timeline.names) if low in n.lower()], dtype=np.int32
            )
        self.cursor = -1.0
        self.action_next_match()
        self.refresh()

    def action_next_match(self) -> None:
        """The next matching event after the cursor, over all tracks."""
        st = self.step_tl
        if st is None or not len(self.matches):
            return
        best: tuple[float, int, int] | None = None
        for k, t in enumerate(st.tracks):
            hit = np.flatnonzero(np.isin(t.nid, self.matches) & (t.start > self.cursor))
            if len(hit) and (best is None or t.start[hit[0]] < best[0]):
                best = (float(t.start[hit[0]]), k, int(hit[0]))
        if best is None:
            self.app.notify(f"no more events named like {self.query_text!r} in this step")
            return
        self.track = best[1]
        self._select(best[2])
        self.refresh()

    def _found_cells(self, t: Track, cells: int) -> list[int]:
        """The cells of matching events in view."""
        if not len(self.matches):
            return []
        w = t.window(self.view.lo, self.view.hi)
        hit = np.isin(t.nid[w], self.matches)
        if not hit.any():
            return []
        span = max(self.view.hi - self.view.lo, 1e-9)
        a = ((t.start[w][hit] - self.view.lo) / span * cells).astype(np.int64)
        b = ((t.end[w][hit] - self.view.lo) / span * cells).astype(np.int64)
        out: set[int] = set()
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            out.update(range(max(x, 0), min(max(y, x) + 1, cells)))
        return sorted(out)

    def action_partner(self) -> None:
        st = self.step_tl
        if st is None or self.event is None or not st.tracks:
            return
        found = st.partner(self.track, self.event)
        if found is None:
            self.app.notify("no partner of this event in this step")
            return
        self.track = found[0]
        self._select(found[1])
        self.refresh()

    def action_group(self) -> None:
        st = self.step_tl
        if st is None or self.raw is None or not st.tracks:
            return
        group = st.tracks[self.track].group
        self.collapsed ^= {group}
        self.step_tl = self.raw.collapsed(self.collapsed)
        rows = [k for k, t in enumerate(self.step_tl.tracks) if t.group == group]
        self.track = rows[0] if rows else 0
        self.event = event_at(self.step_tl.tracks[self.track], self.cursor)
        self.refresh()

    def action_source(self) -> None:
        if self.timeline is None or self.step_tl is None:
            return
        names = self.timeline.source_names()
        if len(names) < 2:
            self.app.notify("one rank or host in this session")
            return
        order: list[str | None] = [None, *names]
        self.source = order[(order.index(self.source) + 1) % len(order)]
        self.app.notify(f"tracks of {self.source}" if self.source else "each step's slowest rank")
        self._show_step(self.step_tl.step)

    def action_versus(self) -> None:
        if self.timeline is None:
            return
        self.versus = not self.versus
        if self.versus:
            self._show_step(self.timeline.slowest(self.source))
        self.refresh()

    def _versus(
        self, c: Comparison, width: int, keys: list[tuple[str, str]], grown: int
    ) -> list[Text]:
        """Under the slowest step: the median step's tracks `keys` (kind, name: those drawn
        above) in the same window, so their lengths compare cell for cell, then the `grown`
        tracks that grew most; every line one line of `width`."""
        median_view = self.view  # the slow step's window: both on one time scale, aligned
        lines = [header_line(c.median, median_view, width, " (median)")]
        by_key = {(t.kind, t.name): t for t in c.median.tracks}
        lines += [track_line(by_key[k], median_view, width) for k in keys if k in by_key]
        lines.append(
            Text(
                f"Step {c.slow.step}: {c.delta_us / 1000:+.2f} ms against the median step "
                f"{c.median.step}; busy time per track, most grown first:",
                style="bold",
            )
        )
        lines += [growth_line(r, width) for r in c.tracks[:grown]]
        return [x if x.cell_len <= width else x[: width - 1] + Text("…") for x in lines]

    def _detail(self, width: int) -> Text:
        st = self.step_tl
        if st is None or not st.tracks or self.event is None:
            return Text("no event selected", style="dim")
        return event_detail(st, self.track, self.event, width)

    def render(self) -> RenderableType:
        st = self.step_tl
        if st is None:
            return self.message
        width = max(self.size.width, 20)
        detail = self._detail(width)
        # the detail's own height (a long kernel name folds), so its last lines are never cut
        tall = len(detail.wrap(self.app.console, width)) if width else 1
        rows = max(self.size.height - FIXED_LINES - tall, 1)
        grown = 0
        order = list(range(len(st.tracks)))
        c = None
        if self.versus and self.timeline is not None:  # no detail: both steps' tracks, growth
            c = compare_median(self.timeline, self.source)
            grown = min(3, max(self.size.height // 5, 1))
            rows = max((self.size.height - FIXED_LINES - 2 - grown) // 2, 1)
            if len(st.tracks) > rows:  # too few rows for all: those that grew most
                rank = {(g.kind, g.name): i for i, g in enumerate(c.tracks)}
                order.sort(key=lambda k: rank.get((st.tracks[k].kind, st.tracks[k].name), 1 << 30))
        first = max(0, min(self.track - rows + 1, len(st.tracks) - rows)) if st.tracks else 0
        if c is not None and len(st.tracks) > rows:
            first = 0
        cells = cells_for(width)
        span = max(self.view.hi - self.view.lo, 1e-9)
        at = int((self.cursor - self.view.lo) / span * cells)
        cursor_cell = at if 0 <= at < cells else None
        nums = self.timeline.step_numbers() if self.timeline else []
        nth = f"{nums.index(st.step) + 1}/{len(nums)}" if st.step in nums else ""
        note = f" · step {nth}" if nth else ""
        short = f" · {nth}" if nth else ""
        if self.query_text:
            found = f" · /{self.query_text}: {len(self.matches)}"
            note, short = f"{note}{found} names", f"{short}{found}"
        if len(st.tracks) > rows:
            most = ", most grown" if c is not None else ""
            note += f" · {rows} of {len(st.tracks)} tracks{most}"
            short += f" · {rows}/{len(st.tracks)} tracks"
        lines: list[Text] = [header_line(st, self.view, width, note, short)]
        shown = order[first : first + rows]
        for k in shown:
            t = st.tracks[k]
            line = track_line(t, self.view, width, cursor=cursor_cell if k == self.track else None)
            if k == self.track:
                line.stylize("bold reverse", 0, label_width(width))
            off = label_width(width) + 1
            for cell in self._found_cells(t, cells):
                line.stylize("bold underline yellow", off + cell, off + cell + 1)
            lines.append(line)
        lines.append(axis_line(self.view, width))
        lines.append(legend_line(st, width))
        if c is not None:
            keys = [(st.tracks[k].kind, st.tracks[k].name) for k in shown]
            lines += self._versus(c, width, keys, grown)
        else:
            lines.append(detail)
        return Group(*lines)
