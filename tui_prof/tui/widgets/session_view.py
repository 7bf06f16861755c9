"""Everything about one session: overview (headline, bars, averages, precision, advice) and tables.

The first frame holds the headline only; the tabs and their tables (summary_tables, with
Textual's DataTable and TabbedContent: ~7 ms of imports) come after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, ProgressBar, Static

from tui_prof.model import ProfileSummary
from tui_prof.render.name_cells import TailCut
from tui_prof.render.summary import (
    headline,
    headline_folded,
    native_table,
    overview_sections,
    ranks_table,
    recommendations_text,
    step_source_text,
)

if TYPE_CHECKING:
    from textual.widgets import DataTable, TabbedContent

TABS_AT_LATEST_S = 0.5  # the tabs mount after the first numbers, or after this at the latest


TUI_PEAK_HINT = "T: give one"  # the browse screen's key for --peak-tflops

# The same sections `tuiprof summary` prints: bars and averages, or without steps what the devices
# did and the XLA programs run (never an empty table; a part with nothing to show is hidden).
PARTS: dict[str, Callable[[ProfileSummary], RenderableType | None]] = {
    "headline": headline_folded,  # above the tabs, notes folded to a line: fits 80x24
    "source": step_source_text,
    "bars": lambda s: overview_sections(s)[0],
    "averages": lambda s: overview_sections(s)[1],
    "native": native_table,  # PyTorch: the plugin's own categories
    "ranks": ranks_table,  # several ranks: each one's step, the slowest marked
    "precision": lambda s: overview_sections(s, TUI_PEAK_HINT)[2],
    "advice": recommendations_text,
}


class SummaryPart(Static):
    """One part of the overview (its id names it in PARTS), drawn from the view's summary; a
    part mounted after the first numbers draws itself when it mounts."""

    def on_mount(self) -> None:
        shown = self.query_ancestor(SessionView).summary
        if shown is not None:
            self.show(shown)

    def show(self, summary: ProfileSummary | None) -> None:
        unfolded = self.id == "headline" and self.query_ancestor(SessionView).notes_open
        part: RenderableType | None
        if summary is None:
            part = None
        elif unfolded:
            part = headline(summary, source=False)
        else:
            part = PARTS[str(self.id)](summary)
        self.update("" if part is None else part)
        self.display = summary is None or part is not None


class SessionView(Vertical):
    """The right-hand side of the browse screen. The first frame holds the overview only: the
    progress bar comes when an analysis does, the other tabs' tables after the first frame (they
    take the shown summary when they mount)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.summary: ProfileSummary | None = None
        self.notes_open = False  # the headline's notes unfolded (`w`)

    def toggle_notes(self) -> None:
        """Unfold the headline's notes, or fold them back to one line."""
        self.notes_open = not self.notes_open
        if self.summary is not None:
            self.query_one("#headline", SummaryPart).show(self.summary)

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield SummaryPart(id="headline")  # on every tab, and in the first frame

    def on_mount(self) -> None:
        # The tabs come once the first numbers are drawn (or shortly, whatever happens): mounted
        # earlier, they made a cold start's numbers wait for them.
        self.set_timer(TABS_AT_LATEST_S, self.mount_tabs)

    def mount_tabs(self) -> None:
        """The five tabs; each part and table draws the shown summary as it mounts."""
        if self.query("#tabs"):
            return
        from tui_prof.tui.widgets.summary_tables import tabs

        self.mount(tabs())

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.tabbed_content.id == "tabs":
            self.sync_timeline()

    def sync_timeline(self) -> None:
        """Read the shown session's events for the Timeline tab, when that tab is the active one
        (a session's events are read only when someone looks at them)."""
        if not self.query("#tabs") or self.summary is None:
            return  # before the tabs, Textual's TabbedContent is not even imported
        from textual.widgets import TabbedContent, TabPane

        tabs = next(iter(self.query("#tabs").results(TabbedContent)), None)
        if tabs is None or tabs.active != "tab-timeline":
            return
        session = getattr(self.screen, "current_session", None)
        target = session if session is not None else self.summary.path
        from tui_prof.tui.widgets.timeline_view import TimelineView

        view = next(iter(self.query("#timeline").results(TimelineView)), None)
        if view is None:
            self.query_one("#tab-timeline", TabPane).mount(TimelineView(id="timeline"))
            self.call_after_refresh(self.sync_timeline)
            return
        steps = [(s.step, s.step_time_ms) for s in self.summary.steps]
        view.show_session(str(self.summary.path), target, steps)
        view.focus()

    @on(Input.Submitted, "#timeline-find")
    def _find_submitted(self, event: Input.Submitted) -> None:
        from tui_prof.tui.widgets.timeline_view import TimelineView

        view = self.query_one(TimelineView)
        event.input.remove()
        view.focus()
        view.find(event.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The ops' or the kernels' selected row, in full under its table."""
        from tui_prof.tui.widgets.summary_tables import KernelTable, TopOpsTable

        table = event.data_table
        if isinstance(table, TopOpsTable | KernelTable) and table.id in ("ops", "kernels"):
            detail = "#op-detail" if table.id == "ops" else "#kernel-detail"
            self.query_one(detail, Static).update(table.detail())

    def show_message(self, text: str | Text, *, error: bool = False) -> None:
        status = self.query_one("#status", Static)
        status.set_class(error, "error")
        status.update(text if isinstance(text, Text) else Text(text))
        status.display = True

    def _progress(self) -> ProgressBar:
        found = self.query("#progress").results(ProgressBar)
        bar = next(iter(found), None)
        if bar is None:
            bar = ProgressBar(id="progress", show_eta=False)
            self.mount(bar, after="#status")
        return bar

    def hide_progress(self) -> None:
        for bar in self.query("#progress"):
            bar.display = False

    def show_loading(self, name: str) -> None:
        self.show_message(Text(f"Analysing {name} …"))
        bar = self._progress()
        bar.update(total=100, progress=0)
        bar.display = True

    def show_progress(self, fraction: float, text: str) -> None:
        self._progress().update(progress=100 * fraction)
        self.query_one("#status", Static).update(Text(text))

    def show_summary(self, summary: ProfileSummary, seconds: float) -> None:
        self.hide_progress()
        self.summary = summary
        status = self.query_one("#status", Static)
        status.set_class(False, "error")
        # No timing here: the screen shows what is stable, so snapshots can compare it.
        self.log(f"analysed {summary.path} in {seconds * 1000:.0f} ms")
        status.update(TailCut(summary.path, style="dim"))
        with self.app.batch_update():
            for part in self.query(SummaryPart).results(SummaryPart):
                part.show(summary)
            if self.query("#tabs"):  # mounted (else they draw this summary when they mount)
                from tui_prof.tui.widgets.summary_tables import show_in_tables

                show_in_tables(self, summary)
        self.call_after_refresh(self.mount_tabs)  # once these numbers are on screen
        self.sync_timeline()

    def clear_summary(self) -> None:
        self.summary = None
        for part in self.query(SummaryPart).results(SummaryPart):
            part.show(None)
        for static in self.query(".detail").results(Static):
            static.update("")
        if self.query("#tabs"):
            from tui_prof.tui.widgets.summary_tables import FittedTable

            for table in self.query(FittedTable).results(FittedTable):
                table.summary = None
                table.clear(columns=True)
