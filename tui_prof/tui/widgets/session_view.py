"""Everything about one session: overview (headline, bars, averages, precision, advice) and tables."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, ProgressBar, Static, TabbedContent, TabPane

from tui_prof.model import CATEGORY_LABELS, ProfileSummary
from tui_prof.render.summary import (
    fmt_ms,
    headline,
    native_table,
    overview_sections,
    ranks_table,
    recommendations_text,
    used_categories,
)

NAME_WIDTH = 36


class StepBreakdownTable(DataTable[str]):
    """Per-step times; the Pilot tests read its cells."""

    def show(self, summary: ProfileSummary) -> None:
        self.clear(columns=True)
        cats = used_categories(summary.steps)
        self.add_column("Step", key="step")
        self.add_column("Step time ms", key="step_time")
        for c in cats:
            self.add_column(CATEGORY_LABELS[c], key=c)
        for s in summary.steps:
            self.add_row(
                str(s.step),
                fmt_ms(s.step_time_ms),
                *(fmt_ms(s.breakdown_ms.get(c, 0.0)) for c in cats),
            )


class TopOpsTable(DataTable[object]):
    def show(self, summary: ProfileSummary) -> None:
        self.clear(columns=True)
        # Names are long (scopes, templates): a fixed width keeps the numbers on an 80-column screen.
        self.add_column("Op", width=NAME_WIDTH)
        self.add_column("Type", width=16)
        self.add_columns("Where", "Calls", "Self ms", "% of side")
        for o in summary.top_ops:
            self.add_row(
                Text(o.name),
                Text(o.op_type),
                o.where,
                str(o.occurrences),
                fmt_ms(o.total_self_time_us / 1000),
                f"{o.self_time_percent:.1f}",
            )


class KernelTable(DataTable[object]):
    def show(self, summary: ProfileSummary) -> None:
        self.clear(columns=True)
        self.add_column("Kernel", width=NAME_WIDTH)
        self.add_column("Op", width=20)
        self.add_columns("Calls", "Total ms", "TC eligible", "TC used", "Occupancy %")
        for k in summary.kernels:
            occ = "–" if k.occupancy_percent is None else f"{k.occupancy_percent:.0f}"
            self.add_row(
                Text(k.name),
                Text(k.op_name),
                str(k.occurrences),
                fmt_ms(k.total_duration_us / 1000),
                "yes" if k.tensor_core_eligible else "no",
                "yes" if k.uses_tensor_core else "no",
                occ,
            )


class SessionView(Vertical):
    """The right-hand side of the browse screen."""

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield ProgressBar(id="progress", show_eta=False)
        with TabbedContent(id="tabs"):
            with TabPane("Overview", id="tab-overview"), VerticalScroll(id="overview"):
                yield Static(id="headline")
                yield Static(id="bars")
                yield Static(id="averages")
                yield Static(id="native")
                yield Static(id="ranks")
                yield Static(id="precision")
                yield Static(id="advice")
            with TabPane("Steps", id="tab-steps"):
                yield StepBreakdownTable(id="steps", zebra_stripes=True, cursor_type="row")
            with TabPane("Top ops", id="tab-ops"):
                yield TopOpsTable(id="ops", zebra_stripes=True, cursor_type="row")
            with TabPane("Kernels", id="tab-kernels"):
                yield KernelTable(id="kernels", zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        self.query_one("#progress", ProgressBar).display = False
        for sid in ("#native", "#ranks"):
            self.query_one(sid, Static).display = False

    def show_message(self, text: str | Text, *, error: bool = False) -> None:
        status = self.query_one("#status", Static)
        status.set_class(error, "error")
        status.update(text if isinstance(text, Text) else Text(text))
        status.display = True

    def show_loading(self, name: str) -> None:
        self.show_message(Text(f"Analysing {name} …"))
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=100, progress=0)
        bar.display = True

    def show_progress(self, fraction: float, text: str) -> None:
        self.query_one("#progress", ProgressBar).update(progress=100 * fraction)
        self.query_one("#status", Static).update(Text(text))

    def show_summary(self, summary: ProfileSummary, seconds: float) -> None:
        self.query_one("#progress", ProgressBar).display = False
        status = self.query_one("#status", Static)
        status.set_class(False, "error")
        # No timing here: the screen shows what is stable, so snapshots can compare it.
        self.log(f"analysed {summary.path} in {seconds * 1000:.0f} ms")
        status.update(Text(f"{summary.path}", style="dim"))
        # The same sections `tuiprof summary` prints: bars and averages, or without steps what
        # the devices did and the XLA programs run (never an empty table).
        breakdown, detail, prec = overview_sections(summary)
        with self.app.batch_update():
            self.query_one("#headline", Static).update(headline(summary))
            self.query_one("#bars", Static).update(breakdown)
            averages = self.query_one("#averages", Static)
            averages.update(detail if detail is not None else "")
            averages.display = detail is not None
            # PyTorch sessions: the plugin's categories and the ranks (hidden where absent).
            for sid, renderable in (
                ("#native", native_table(summary)),
                ("#ranks", ranks_table(summary)),
            ):
                static = self.query_one(sid, Static)
                static.display = renderable is not None
                static.update(renderable if renderable is not None else "")
            self.query_one("#precision", Static).update(prec)
            self.query_one("#advice", Static).update(recommendations_text(summary))
            self.query_one(StepBreakdownTable).show(summary)
            self.query_one(TopOpsTable).show(summary)
            self.query_one(KernelTable).show(summary)
            self.query_one("#tab-steps", TabPane).disabled = not summary.steps
            self.query_one("#tab-kernels", TabPane).disabled = not summary.kernels

    def clear_summary(self) -> None:
        for sid in (
            "#headline",
            "#bars",
            "#averages",
            "#native",
            "#ranks",
            "#precision",
            "#advice",
        ):
            self.query_one(sid, Static).update("")
        tables: tuple[type[DataTable[Any]], ...] = (
            StepBreakdownTable,
            TopOpsTable,
            KernelTable,
        )
        for table in tables:
            self.query_one(table).clear(columns=True)
