"""The live table of an experiment's runs: one row per run, updated in place as events arrive.
On a cluster, `Node` says where each run runs and `queued` that it waits there for resources."""

from __future__ import annotations

import time

from rich.cells import cell_len
from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from tui_prof.experiments.noise import noise_reasons
from tui_prof.model import RunRecord, RunStatus
from tui_prof.render.status import status_text

COLUMNS = ("variant", "repeat", "status", "elapsed", "progress", "metrics")
# On a cluster: where each run runs, after its status (a local experiment leaves it out).
CLUSTER_COLUMNS = ("variant", "repeat", "status", "node", "elapsed", "progress", "metrics")


def _elapsed(run: RunRecord, now: float) -> str:
    if run.wall_time_s is not None:
        return f"{run.wall_time_s:.1f}s"
    if run.started_at is not None and run.status == RunStatus.RUNNING:
        return f"{now - run.started_at:.0f}s"
    return "–"


def _metrics(run: RunRecord, limit: int = 3) -> Text:
    items = [(k, v) for k, v in run.metrics.items() if isinstance(v, int | float)][:limit]
    return Text("  ".join(f"{k}={v:.4g}" for k, v in items))


# A DataTable row costs ~0.5 ms to add and measure (20,000 at once froze the screen for 10 s), and
# each frame that adds rows redraws the visible cells (~50-150 ms): 200 rows a frame balances both.
ROWS_PER_FRAME = 200


class RunTable(DataTable[object]):
    """Rows keyed by run id, so an event updates its own row without a rebuild. A large
    experiment's rows are added a few hundred per frame, so the screen keeps drawing meanwhile."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.runs: dict[str, RunRecord] = {}
        self._unshown: list[str] = []  # run ids whose rows are still to be added, in order
        self.columns_shown: tuple[str, ...] = COLUMNS

    def on_mount(self) -> None:
        self._ensure_columns()

    def _ensure_columns(self) -> None:
        """The columns, once: runs may arrive before this table's mount event (a store read in a
        worker can finish first), and columns added twice would lose their measured widths."""
        if not self.columns:
            for c in self.columns_shown:
                self.add_column(c.capitalize(), key=c)

    def show_runs(self, runs: list[RunRecord] | tuple[RunRecord, ...]) -> None:
        self.runs = {r.run_id: r for r in runs}
        wanted = CLUSTER_COLUMNS if any(r.node for r in runs) else COLUMNS
        self.clear(columns=wanted is not self.columns_shown)
        self.columns_shown = wanted
        self._ensure_columns()
        self._unshown = list(self.runs)
        self._add_some()

    @property
    def complete(self) -> bool:
        """Every run has its row."""
        return not self._unshown

    def _add_some(self) -> None:
        batch, self._unshown = self._unshown[:ROWS_PER_FRAME], self._unshown[ROWS_PER_FRAME:]
        now = time.time()
        for run_id in batch:
            if run_id not in self.rows:
                self._add(run_id, self._cells(self.runs[run_id], now))
        if self._unshown:
            self.call_after_refresh(self._add_some)

    def _cells(self, r: RunRecord, now: float) -> tuple[object, ...]:
        repeat = f"warm-up {r.repeat + 1}" if r.is_warmup else str(r.repeat + 1)
        status = status_text(r.status)
        noise = noise_reasons((r.environment or {}).get("machine_state"))
        if noise:  # measured under load or throttled: said beside the run, not only in the report
            status.append(" ⚠ " + ("throttled" if "throttled" in noise[-1] else "load"), "yellow")
        return (
            Text(r.variant),
            repeat,
            status,
            *([Text(r.node)] if self.columns_shown is CLUSTER_COLUMNS else []),
            _elapsed(r, now),
            Text(r.progress or ""),
            _metrics(r),
        )

    def upsert(self, run: RunRecord) -> None:
        self._ensure_columns()
        known = run.run_id in self.runs
        self.runs[run.run_id] = run
        if run.node and self.columns_shown is not CLUSTER_COLUMNS:  # the first run on a node
            self.show_runs(list(self.runs.values()))
            return
        if run.run_id in self.rows:
            cells = self._cells(run, time.time())
            for key, value in zip(self.columns_shown, cells, strict=True):
                self.update_cell(run.run_id, key, value)
            self._widen(cells)
        elif not known or run.run_id not in self._unshown:  # else its row comes with the rest
            self._add(run.run_id, self._cells(run, time.time()))

    def _add(self, run_id: str, cells: tuple[object, ...]) -> None:
        self.add_row(*cells, key=run_id)
        self._widen(cells)

    def _widen(self, cells: tuple[object, ...]) -> None:
        """Each column as wide as its widest cell, set as rows come. DataTable measures new rows
        only when its queue is idle, and a frame drawn before that (a busy machine) showed every
        cell cut to its header's width: `✓ fini`."""
        for key, value in zip(self.columns_shown, cells, strict=True):
            column = self.columns.get(ColumnKey(key))
            if column is None:
                continue
            width = value.cell_len if isinstance(value, Text) else cell_len(str(value))
            if column.auto_width or width > column.width:
                column.width = max(
                    width,
                    column.width if not column.auto_width else 0,
                    cell_len(column.label.plain),
                )
                column.auto_width = False
                self.refresh()

    def tick(self) -> None:
        """Refresh the elapsed time of running runs (called once a second); a cell whose text
        is unchanged is not touched, since any update redraws the whole table."""
        now = time.time()
        for run in self.runs.values():
            if run.status == RunStatus.RUNNING and run.run_id in self.rows:
                elapsed = _elapsed(run, now)
                if self.get_cell(run.run_id, "elapsed") == elapsed:
                    continue
                self._set_elapsed(run.run_id, elapsed)
                column = self.columns.get(ColumnKey("elapsed"))
                if column is not None and len(elapsed) > column.width:
                    column.width = len(elapsed)
                    self.refresh()

    def _set_elapsed(self, run_id: str, text: str) -> None:
        """`update_cell` redraws the whole table (~20 ms at 120×40, once a second: 2% of a core
        while runs sleep); this redraws the one row. (Textual is pinned: its cell store and
        the counter its line cache is keyed by.)"""
        self._data[RowKey(run_id)][ColumnKey("elapsed")] = text
        self._update_count += 1
        self.refresh_row(self.get_row_index(run_id))

    @property
    def selected_run(self) -> RunRecord | None:
        if not self.runs or self.cursor_row < 0 or self.cursor_row >= self.row_count:
            return None
        key = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value
        return self.runs.get(str(key))
