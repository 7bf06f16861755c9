"""The session view's tabs and their tables, mounted after the first frame (session_view)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rich.cells import cell_len
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from tui_prof.model import CATEGORY_LABELS, ProfileSummary
from tui_prof.profiles.assemble import matrix_units
from tui_prof.render.efficiency import bound_cell, kernel_op_rates, op_cost_text, op_rate_cell
from tui_prof.render.names import cut_middle, fit_kernels, fit_paths, kernel_names
from tui_prof.render.summary import fmt_ms, step_gpu_utilization, used_categories
from tui_prof.tui.widgets.columns import Column, fit_columns
from tui_prof.tui.widgets.session_view import SessionView, SummaryPart


class FittedTable(DataTable[object]):
    """A summary's table laid out for its own width: drawn when it first has one (a hidden tab
    has none) and again when the width changes; the cursor stays on its row."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, zebra_stripes=True, cursor_type="row")
        self.summary: ProfileSummary | None = None
        self._drawn_width = 0

    def on_mount(self) -> None:
        """Mounted after the first numbers: take the summary the view already shows."""
        shown = self.query_ancestor(SessionView).summary
        if shown is not None and self.summary is None:
            self.show(shown)
        self.watch(self.query_ancestor(TabbedContent), "active", self._tab_shown, init=False)

    def show(self, summary: ProfileSummary) -> None:
        self.summary = summary
        self._drawn_width = 0
        self.clear(columns=True)
        self._draw()

    def on_resize(self) -> None:
        if self.summary is not None and self.size.width != self._drawn_width:
            self._draw()

    def _tab_shown(self) -> None:
        # Shown after the Overview scrolled, a tab's table gets no Resize (nor Show) from
        # Textual and stayed empty: a tab switch draws it too, once laid out.
        self.call_after_refresh(self.on_resize)

    def _draw(self) -> None:
        width = self.size.width
        if self.summary is None or width <= 0:
            return
        row = self.cursor_row
        self._drawn_width = width
        self.clear(columns=True)
        self.fill(self.summary, width)
        if 0 <= row < self.row_count:
            self.move_cursor(row=row)

    def fill(self, summary: ProfileSummary, width: int) -> None:
        raise NotImplementedError

    def add_fitted(self, columns: list[Column], rows: list[dict[str, object]], width: int) -> None:
        # A column is as wide as its widest value, not the width its numbers usually take: a
        # step of 17,708,812 ms in an 8-cell column read "17,708,8" (the DataTable crops).
        columns = [
            c
            if c.flexible
            else dataclasses.replace(
                c, width=max([c.width, *(cell_len(str(r.get(c.key, ""))) for r in rows)])
            )
            for c in columns
        ]
        shown = fit_columns(columns, width)
        for col, w in shown:
            self.add_column(col.label, key=col.key, width=w)
        for r in rows:
            self.add_row(*(r[col.key] for col, _ in shown))


class StepBreakdownTable(FittedTable):
    """Per-step times; the Pilot tests read its cells. Categories with less time go first."""

    def fill(self, summary: ProfileSummary, width: int) -> None:
        cats = used_categories(summary.steps)
        total = {c: sum(s.breakdown_ms.get(c, 0.0) for s in summary.steps) for c in cats}
        rank = {c: i for i, c in enumerate(sorted(cats, key=lambda c: -total[c]))}
        columns = [Column("step", "Step", 5, 0), Column("step_time", "Step time ms", 8, 0)]
        columns += [Column(c, CATEGORY_LABELS[c], 8, 1 + rank[c]) for c in cats]
        util = step_gpu_utilization(summary.gpu_metrics)  # PyTorch: the plugin's figure
        if util:  # shown after the categories; kept before all but the largest one
            columns.append(Column("gpu_util", "GPU util %", 10, 2))
        rows: list[dict[str, object]] = [
            {
                "step": str(s.step),
                "step_time": fmt_ms(s.step_time_ms),
                **{c: fmt_ms(s.breakdown_ms.get(c, 0.0)) for c in cats},
                "gpu_util": f"{util[s.step]:.1f}" if s.step in util else "–",
            }
            for s in summary.steps
        ]
        self.add_fitted(columns, rows, width)


class TopOpsTable(FittedTable):
    """Ops by self time; a long scope loses its head, never the op at its tail."""

    def fill(self, summary: ProfileSummary, width: int) -> None:
        ops = summary.top_ops
        columns = [
            Column("name", "Op", 16, 0, flexible=True, want=_wish(width, (o.name for o in ops))),
            Column("self", "Self ms", 8, 0),
            Column("percent", "% of side", 9, 0),
            Column("type", "Type", 14, 3),
            Column("calls", "Calls", 5, 4),
            Column("where", "Side", 6, 0),  # kept with "% of side": it says which total that is of
        ]
        if any(o.flops for o in ops):  # efficiency columns give way first on narrow screens
            columns += [Column("rate", "FLOP/s", 13, 5), Column("bound", "Bound by", 12, 6)]
        shown = {c.key: w for c, w in fit_columns(columns, width)}
        names = fit_paths([o.name for o in ops], shown["name"])
        rows: list[dict[str, object]] = [
            {
                "name": Text(name),
                "type": Text(cut_middle(o.op_type, shown.get("type", 14))),
                "where": o.where,
                "calls": str(o.occurrences),
                "self": fmt_ms(o.total_self_time_us / 1000),
                "percent": f"{o.self_time_percent:.1f}",
                "rate": op_rate_cell(o),
                "bound": bound_cell(o, summary.efficiency),
            }
            for o, name in zip(ops, names, strict=True)
        ]
        self.add_fitted(columns, rows, width)

    def detail(self) -> Text:
        """The selected op in full: scope, type and where it ran."""
        if self.summary is None or not 0 <= self.cursor_row < len(self.summary.top_ops):
            return Text("")
        o = self.summary.top_ops[self.cursor_row]
        t = Text(o.name, style="bold")
        t.append(f"\n{o.op_type} · {o.where} · {o.occurrences} calls", style="dim")
        cost = op_cost_text(o, self.summary.efficiency)
        if cost:
            t.append(f" · {cost}", style="dim")
        return t


def _wish(width: int, names: Iterable[str]) -> int:
    """A name column's wish: its longest name, up to ~45% of the table (the rest for numbers)."""
    return min(max((len(n) for n in names), default=0), max(16, width * 45 // 100))


def _launch(grid: str) -> str:
    """`160,1,1` → `160`; `8,4,1` → `8×4`: the grid as short as it stays exact."""
    dims = [d.strip() for d in grid.split(",") if d.strip()]
    while len(dims) > 1 and dims[-1] == "1":
        dims.pop()
    return "×".join(dims) or "–"


class KernelTable(FittedTable):
    """GPU kernels by time, named by what tells them apart; the full name in the detail line."""

    def fill(self, summary: ProfileSummary, width: int) -> None:
        kernels = summary.kernels
        shorts = kernel_names([k.name for k in kernels])
        repeated = len(set(shorts)) < len(shorts)  # one kernel in several launch shapes
        # One kernel launched by several ops (TensorFlow's replicas, say): the op is what tells
        # those rows apart, so it stays right after the numbers.
        by_op = len({(s, k.op_name) for s, k in zip(shorts, kernels, strict=True)})
        op_tells = by_op > len(set(shorts))
        columns = [
            Column("name", "Kernel", 16, 0, flexible=True, want=_wish(width, shorts)),
            Column("total", "Total ms", 8, 0),
            Column("calls", "Calls", 6, 1),
            Column("grid", "Grid", 7, 2 if repeated else 6),
            Column("tc", matrix_units(summary.environment) or "Matrix units", 12, 3),
            Column("occupancy", "Occ. %", 6, 4),
            Column("op", "Op", 30 if op_tells else 14, 1 if op_tells else 5),
        ]
        rates = kernel_op_rates(summary)
        if rates:  # the launching op's FLOP/s: gives way first on narrow screens
            columns.append(Column("rate", "Op FLOP/s", 13, 6))
        if not any(k.grid for k in kernels):
            columns = [c for c in columns if c.key != "grid"]
        if not any(k.op_name for k in kernels):
            columns = [c for c in columns if c.key != "op"]
        if all(k.occupancy_percent is None for k in kernels):
            columns = [c for c in columns if c.key != "occupancy"]
        shown = {c.key: w for c, w in fit_columns(columns, width)}
        names = fit_kernels(shorts, shown["name"])
        ops = fit_paths([k.op_name for k in kernels], shown.get("op", 14))
        rows: list[dict[str, object]] = []
        for k, name, op in zip(kernels, names, ops, strict=True):
            tc = "used" if k.uses_tensor_core else "eligible" if k.tensor_core_eligible else "–"
            occupancy = "–" if k.occupancy_percent is None else f"{k.occupancy_percent:.0f}"
            rows.append(
                {
                    "name": Text(name),
                    "total": fmt_ms(k.total_duration_us / 1000),
                    "calls": str(k.occurrences),
                    "grid": _launch(k.grid),
                    "tc": tc,
                    "occupancy": occupancy,
                    "op": Text(op or "–"),
                    "rate": rates.get(k.op_name, "–"),
                }
            )
        self.add_fitted(columns, rows, width)

    def detail(self) -> Text:
        """The selected kernel: its short name, launch shape and op, then its full name."""
        if self.summary is None or not 0 <= self.cursor_row < len(self.summary.kernels):
            return Text("")
        kernels = self.summary.kernels
        k = kernels[self.cursor_row]
        short = kernel_names([x.name for x in kernels])[self.cursor_row]
        t = Text(short, style="bold")
        facts = [f"grid {k.grid}" if k.grid else "", f"block {k.block}" if k.block else ""]
        facts.append(f"op {k.op_name}" if k.op_name else "")
        if any(facts):
            t.append("\n" + " · ".join(f for f in facts if f))
        t.append("\n" + k.name, style="dim")
        return t


class DetailLine(Static):
    """Under a table: the selected row in full, or why the table is empty."""

    def __init__(self, empty: str, *, id: str) -> None:
        super().__init__(id=id, classes="detail")
        self.empty = empty

    def on_mount(self) -> None:
        shown = self.query_ancestor(SessionView).summary
        if shown is not None:
            self.show_empty(shown)

    def show_empty(self, summary: ProfileSummary) -> None:
        kind = summary.kernels if self.id == "kernel-detail" else summary.top_ops
        self.update("" if kind else Text(self.empty, style="dim"))


class NeedsPane(TabPane):
    """A tab disabled while the shown session has none of what it lists (no steps: a profile
    without step markers the finders could use; no kernels: a CPU job, a large profile's quick
    read)."""

    def __init__(self, title: str, *children: Widget, needs: str, id: str) -> None:
        super().__init__(title, *children, id=id)
        self.needs = needs

    def on_mount(self) -> None:
        self.fit(self.query_ancestor(SessionView).summary)

    def fit(self, summary: ProfileSummary | None) -> None:
        self.disabled = summary is not None and not getattr(summary, self.needs)


def tabs() -> TabbedContent:
    """The five tabs; each part and table draws the shown summary as it mounts."""
    tabbed = TabbedContent(id="tabs")
    panes = [
        TabPane(
            "Overview",
            VerticalScroll(
                *(
                    SummaryPart(id=part)
                    for part in (
                        "bars",
                        "averages",
                        "source",
                        "native",
                        "ranks",
                        "precision",
                        "advice",
                    )
                ),
                id="overview",
            ),
            id="tab-overview",
        ),
        NeedsPane("Steps", StepBreakdownTable(id="steps"), needs="steps", id="tab-steps"),
        TabPane(
            "Top ops",
            TopOpsTable(id="ops"),
            DetailLine("No op statistics for this session.", id="op-detail"),
            id="tab-ops",
        ),
        NeedsPane(
            "Kernels",
            KernelTable(id="kernels"),
            DetailLine(
                "No GPU kernels in this session (a CPU job, or a large profile's quick read).",
                id="kernel-detail",
            ),
            needs="kernels",
            id="tab-kernels",
        ),
        # Its view (and numpy with it) is mounted when the tab is first shown: start-up stays lean.
        TabPane("Timeline", id="tab-timeline"),
    ]
    for pane in panes:
        tabbed.compose_add_child(pane)
    return tabbed


def show_in_tables(view: SessionView, summary: ProfileSummary) -> None:
    """The mounted tabs show `summary`."""
    for table in view.query(FittedTable).results(FittedTable):
        table.show(summary)
    for pane in view.query(NeedsPane).results(NeedsPane):
        pane.fit(summary)
    for line in view.query(DetailLine).results(DetailLine):
        line.show_empty(summary)
