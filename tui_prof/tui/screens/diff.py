"""Diff: two sessions (or two experiment variants) op by op and kernel by kernel.

The diff is computed in a thread worker (the same `diff_targets` as `tuiprof diff`) and drawn with
the renderables `tuiprof diff` prints, so the two faces agree. Names are data: rows show each
name's distinguishing tail as Text, and the selected row's full name sits in the detail line.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, ProgressBar, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from tui_prof.experiments.diff_targets import TargetRef
from tui_prof.profiles.diff import DiffRow, ProfileDiff
from tui_prof.render.diff import (
    diff_header,
    has_spread,
    row_cells,
    row_detail,
    row_names,
    short_names,
    unit,
)
from tui_prof.render.summary import fmt_ms
from tui_prof.tui.messages import DiffProgressed, DiffReady
from tui_prof.tui.screens.base import KeysFooter, TuiprofScreen

SCROLLBAR = 2
EMPTY = "No diff yet. In Browse, press m on a session to mark it as A, then d on another (B)."


class DiffRowsTable(DataTable[object]):
    """One row per op or kernel, in the diff's order (largest change first)."""

    def __init__(self, *, kernels: bool, id: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, id=id)
        self.kernels = kernels
        self.rows_shown: list[DiffRow] = []

    def show(self, diff: ProfileDiff, width: int) -> None:
        rows = list(diff.kernels if self.kernels else diff.ops)
        spread = has_spread(diff)
        heads = ("A", "B", "Δ", "± SE", "Δ %") if spread else ("A", "B", "Δ", "Δ %")
        cells_of: list[list[str | Text]] = []
        for row in rows:
            cells: list[str | Text] = list(row_cells(row))
            if spread:
                cells.insert(3, fmt_ms(diff.delta_se(row)))
            cells_of.append(cells)
        # The numbers take what they need (never cut); the name what is left. A DataTable pads
        # each cell by 1 on both sides; the scrollbar takes 2.
        needs = [
            max([len(h), *(len(str(c[i])) for c in cells_of)]) for i, h in enumerate((*heads, ""))
        ]
        name_width = max(16, width - sum(needs) - 2 * (len(needs) + 1) - SCROLLBAR)
        self.clear(columns=True)
        self.add_column("Kernel" if self.kernels else "Op", width=name_width, key="name")
        for label in heads:
            self.add_column(label, key=label)
        self.add_column("", key="status")
        names = short_names(row_names(rows), name_width, kernels=self.kernels)
        for i, (name, cells) in enumerate(zip(names, cells_of, strict=True)):
            self.add_row(Text(name), *cells, key=str(i))
        self.rows_shown = rows

    def selected(self) -> DiffRow | None:
        if not self.rows_shown or self.cursor_row >= len(self.rows_shown):
            return None
        return self.rows_shown[self.cursor_row]


class DiffScreen(TuiprofScreen):
    BINDINGS = [
        Binding("escape", "app.show('browse')", "Back", id="diff_back"),
        Binding("s", "swap", "Swap A/B", id="diff_swap", tooltip="Compare B with A instead"),
        Binding("1", "tab('diff-tab-ops')", "Ops", id="diff_tab_ops", show=False),
        Binding("2", "tab('diff-tab-kernels')", "Kernels", id="diff_tab_kernels", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.refs: tuple[TargetRef, TargetRef] | None = None
        self.diff: ProfileDiff | None = None
        self._ready = False  # mounted: widgets exist

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(Text(EMPTY, style="dim"), id="diff-status")
        yield ProgressBar(id="diff-progress", show_eta=False)
        yield Static(id="diff-header")
        with TabbedContent(id="diff-tabs"):
            with TabPane("Ops", id="diff-tab-ops"):
                yield DiffRowsTable(kernels=False, id="diff-ops")
            with TabPane("Kernels", id="diff-tab-kernels"):
                yield DiffRowsTable(kernels=True, id="diff-kernels")
        yield Static(id="diff-detail")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#diff-progress", ProgressBar).display = False
        self._ready = True
        if self.refs is not None and self.diff is None:
            self.compare(*self.refs)

    def compare(self, a: TargetRef, b: TargetRef) -> None:
        """Start comparing A with B; the screen shows progress until DiffReady arrives."""
        self.refs = (a, b)
        if not self._ready:
            return  # on_mount starts it
        self.diff = None
        status = self.query_one("#diff-status", Static)
        status.set_class(False, "error")
        status.update(Text("Comparing …"))
        status.display = True
        bar = self.query_one("#diff-progress", ProgressBar)
        bar.update(total=100, progress=0)
        bar.display = True
        self._compute(a, b)

    @work(
        thread=True,
        exclusive=True,
        group="diff",
        name="comparing two profiles",
        exit_on_error=False,
    )
    def _compute(self, a: TargetRef, b: TargetRef) -> None:
        """Stops on its worker's cancellation: a newer comparison (exclusive), or the app closing."""
        from tui_prof.experiments.diff_targets import diff_targets, resolve
        from tui_prof.model import Cancelled, ProfileError

        cancel = get_current_worker().cancelled_event
        try:
            diff = diff_targets(
                resolve(a),
                resolve(b),
                cancel=cancel,
                progress=lambda f, m: self.post_message(DiffProgressed(f, m)),
                peak_tflops=self.app.peak_tflops,
            )
        except Cancelled:
            return
        except ProfileError as exc:
            if not cancel.is_set():
                self.post_message(DiffReady(None, str(exc)))
            return
        except Exception as exc:  # a bug must not kill the app; show it like a bad file
            from tui_prof.tui.errors import log_failure, one_line

            where = log_failure("comparing two profiles", exc)
            detail = f" (traceback in {where})" if where else ""
            self.post_message(DiffReady(None, f"unexpected error: {one_line(exc)}{detail}"))
            return
        if not cancel.is_set():
            self.post_message(DiffReady(diff, None))

    def on_diff_progressed(self, message: DiffProgressed) -> None:
        self.query_one("#diff-progress", ProgressBar).update(progress=100 * message.fraction)
        self.query_one("#diff-status", Static).update(Text(message.text))

    def on_diff_ready(self, message: DiffReady) -> None:
        self.query_one("#diff-progress", ProgressBar).display = False
        status = self.query_one("#diff-status", Static)
        if message.diff is None:
            status.set_class(True, "error")
            status.update(Text(f"Cannot compare: {message.error}"))
            return
        status.display = False
        self.diff = diff = message.diff
        width = self.size.width
        with self.app.batch_update():
            self.query_one("#diff-header", Static).update(diff_header(diff))
            ops = self.query_one("#diff-ops", DiffRowsTable)
            kernels = self.query_one("#diff-kernels", DiffRowsTable)
            ops.show(diff, width)
            kernels.show(diff, width)
            tabs = self.query_one("#diff-tabs", TabbedContent)
            tabs.get_tab("diff-tab-ops").label = f"Ops ({len(diff.ops)}, {unit(diff)})"
            tabs.get_tab("diff-tab-kernels").label = f"Kernels ({len(diff.kernels)})"
            if not diff.ops and diff.kernels:
                tabs.active = "diff-tab-kernels"
            self._show_detail()
        (kernels if tabs.active == "diff-tab-kernels" else ops).focus()

    def _active_table(self) -> DiffRowsTable:
        kernels = self.query_one("#diff-tabs", TabbedContent).active == "diff-tab-kernels"
        return self.query_one("#diff-kernels" if kernels else "#diff-ops", DiffRowsTable)

    def _show_detail(self) -> None:
        detail = self.query_one("#diff-detail", Static)
        table = self._active_table()
        row = table.selected()
        if self.diff is None or row is None:
            detail.update(Text("No rows: neither side has this table.", style="dim"))
            return
        detail.update(row_detail(self.diff, row, kernel=table.kernels))

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if self.diff is not None:
            self._show_detail()

    def action_tab(self, tab: str) -> None:
        self.query_one("#diff-tabs", TabbedContent).active = tab

    def action_swap(self) -> None:
        if self.refs is not None:
            a, b = self.refs
            self.compare(b, a)
