"""The live table of an experiment's runs: one row per run, updated in place as events arrive.
On a cluster, `Node` says where each run runs and `queued` that it waits there for resources."""

from __future__ import annotations

import time

from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from tui_prof.model import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_INTERRUPTED,
    RUN_PENDING,
    RUN_QUEUED,
    RUN_RUNNING,
    RUN_STOPPED,
    RUN_TIMEOUT,
    RunRecord,
)

STATUS_STYLE = {
    RUN_PENDING: "dim",
    RUN_QUEUED: "cyan",
    RUN_RUNNING: "bold yellow",
    RUN_FINISHED: "green",
    RUN_FAILED: "bold red",
    RUN_TIMEOUT: "bold red",
    RUN_INTERRUPTED: "red",
    RUN_STOPPED: "magenta",
}
COLUMNS = ("variant", "repeat", "status", "node", "elapsed", "progress", "metrics")


def _elapsed(run: RunRecord, now: float) -> str:
    if run.wall_time_s is not None:
        return f"{run.wall_time_s:.1f}s"
    if run.started_at is not None and run.status == RUN_RUNNING:
        return f"{now - run.started_at:.0f}s"
    return "–"


def _metrics(run: RunRecord, limit: int = 3) -> Text:
    items = [(k, v) for k, v in run.metrics.items() if isinstance(v, int | float)][:limit]
    return Text("  ".join(f"{k}={v:.4g}" for k, v in items))


class RunTable(DataTable[object]):
    """Rows keyed by run id, so an event updates its own row without a rebuild."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for c in COLUMNS:
            self.add_column(c.capitalize(), key=c)
        self.runs: dict[str, RunRecord] = {}

    def show_runs(self, runs: list[RunRecord] | tuple[RunRecord, ...]) -> None:
        self.clear()
        self.runs = {}
        for r in runs:
            self.upsert(r)

    def _cells(self, r: RunRecord, now: float) -> tuple[object, ...]:
        repeat = f"warm-up {r.repeat + 1}" if r.is_warmup else str(r.repeat + 1)
        return (
            Text(r.variant),
            repeat,
            Text(r.status, style=STATUS_STYLE.get(r.status, "")),
            Text(r.node),
            _elapsed(r, now),
            Text(r.progress or ""),
            _metrics(r),
        )

    def upsert(self, run: RunRecord) -> None:
        now = time.time()
        self.runs[run.run_id] = run
        cells = self._cells(run, now)
        if run.run_id in self.rows:
            for key, value in zip(COLUMNS, cells, strict=True):
                self.update_cell(run.run_id, key, value)
        else:
            self.add_row(*cells, key=run.run_id)

    def tick(self) -> None:
        """Refresh the elapsed time of running runs (called once a second)."""
        now = time.time()
        for run in self.runs.values():
            if run.status == RUN_RUNNING:
                self.update_cell(run.run_id, "elapsed", _elapsed(run, now))

    @property
    def selected_run(self) -> RunRecord | None:
        if not self.runs or self.cursor_row < 0 or self.cursor_row >= self.row_count:
            return None
        key = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value
        return self.runs.get(str(key))
