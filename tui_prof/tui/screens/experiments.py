"""Experiments: the live run table, the selected run's log tail and the comparison, side by side.

Runner events arrive on the runner's threads and are posted here as messages; the comparison is
recomputed in a thread worker from the store (the same `build_report` as `tuiprof compare`)
whenever a run ends, so the screen and the CLI always agree.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, RichLog, Select, Static

from tui_prof.experiments import events as ev
from tui_prof.experiments.store import StoreError, find_experiments, load_experiment
from tui_prof.model import RunRecord
from tui_prof.tui.messages import (
    ComparisonReady,
    ExperimentsFound,
    ProfilesChanged,
    RunnerEventArrived,
)
from tui_prof.tui.widgets.run_table import RunTable

LOG_TAIL_LINES = 400
# The live log is drawn at most every LIVE_FLUSH_S with at most LIVE_LINES_PER_FLUSH new lines: RichLog
# renders each line as it is written (~0.1 ms a line here), so drawing all of four fast streams' output
# stalled the screen > 100 ms at a time (benchmarks/ui_responsiveness.py). The run's log file has it all.
LIVE_FLUSH_S = 0.1
LIVE_LINES_PER_FLUSH = 50


class ExperimentsScreen(Screen[None]):
    BINDINGS = [
        Binding("x", "stop_selected", "Stop run", id="stop_run", tooltip="Stop the selected run"),
        Binding(
            "X", "stop_all", "Stop all", id="stop_all", tooltip="Stop every run of this experiment"
        ),
        Binding("f5,ctrl+r", "rescan", "Rescan", id="rescan_experiments", show=False),
        Binding(
            "d",
            "diff_variants",
            "Diff variants",
            id="diff_variants",
            tooltip="The selected run's variant against the baseline, op by op, over all runs",
        ),
    ]

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.current: str | None = None
        self._log_lines: dict[str, list[str]] = {}
        self._pending: list[str] = []  # the selected run's lines not drawn yet
        self._pending_skipped = 0

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Select[str]([], prompt="Experiment", id="experiment-select", allow_blank=True)
        with Horizontal(id="experiments"):
            with Vertical(id="runs-pane"):
                yield RunTable(id="runs")
                yield Static("Log", id="log-title")
                yield RichLog(id="run-log", max_lines=LOG_TAIL_LINES, wrap=False, markup=False)
            with VerticalScroll(id="comparison-pane"):
                yield Static(
                    Text("No experiment yet: press r to start one.", style="dim"), id="comparison"
                )
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)
        self.set_interval(LIVE_FLUSH_S, self._flush_log)
        if self.current is not None:
            self.show_experiment(self.current)
        self.scan()

    def _tick(self) -> None:
        self.query_one(RunTable).tick()

    @work(thread=True, exclusive=True, group="experiments-scan")
    def scan(self) -> None:
        self.post_message(ExperimentsFound(tuple(str(p) for p in find_experiments(self.root))))

    def on_experiments_found(self, message: ExperimentsFound) -> None:
        known = list(dict.fromkeys([*message.directories, *self.app.runners]))  # type: ignore[attr-defined]
        select = self.query_one("#experiment-select", Select)
        select.set_options([(self._label(d), d) for d in known])
        if self.current is None and known:
            self.show_experiment(known[-1] if self.app.runners else known[0])  # type: ignore[attr-defined]

    def _label(self, directory: str) -> str:
        try:
            rel = os.path.relpath(directory)
        except ValueError:
            rel = directory
        return rel if len(rel) < 60 else "…" + rel[-58:]

    @on(Select.Changed, "#experiment-select")
    def _selected(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.current:
            self.show_experiment(event.value)

    def show_experiment(self, directory: str) -> None:
        self.current = directory
        if not self.is_mounted:  # installed but not shown yet: on_mount shows it
            return
        select = self.query_one("#experiment-select", Select)
        if select.value != directory:
            options = [v for _, v in select._options if isinstance(v, str)]
            if directory not in options:
                select.set_options([(self._label(d), d) for d in [*options, directory]])
            select.value = directory
        try:
            record = load_experiment(directory)
        except StoreError as exc:
            self.query_one("#comparison", Static).update(Text(str(exc), style="bold red"))
            return
        self.query_one(RunTable).show_runs(record.runs)
        self.query_one("#run-log", RichLog).clear()
        self.refresh_comparison()
        if any(r.backend_ref and r.status in ("queued", "running") for r in record.runs):
            self.app.reattach(directory)  # type: ignore[attr-defined]  # a cluster still runs them

    @work(thread=True, exclusive=True, group="comparison", exit_on_error=False)
    def refresh_comparison(self) -> None:
        from tui_prof.comparison.report import build_report

        directory = self.current
        if directory is None:
            return
        try:
            report = build_report(directory)
        except ValueError as exc:
            self.post_message(ComparisonReady(directory, None, str(exc)))
            return
        self.post_message(ComparisonReady(directory, report, None))

    def on_comparison_ready(self, message: ComparisonReady) -> None:
        if message.directory != self.current:
            return
        target = self.query_one("#comparison", Static)
        if message.report is None:
            target.update(Text(message.error or "no comparison", style="bold red"))
            return
        from tui_prof.render.stats_table import report_view

        # Time and accuracy side by side where two box plots fit (each needs ~60 columns).
        wide = not self.has_class("narrow") and self.app.size.width >= 180
        target.update(report_view(message.report, side_by_side=wide))

    # -- live events ---------------------------------------------------------------------
    def on_runner_event_arrived(self, message: RunnerEventArrived) -> None:
        event = message.event
        if isinstance(event, ev.ExperimentStarted):
            if self.current != event.experiment_dir:
                self.show_experiment(event.experiment_dir)
            return
        if message.directory != self.current:
            return
        table = self.query_one(RunTable)
        if isinstance(event, ev.RunQueued | ev.RunStarted | ev.RunFinished | ev.RunFailed):
            table.upsert(event.run)
            if isinstance(event, ev.RunFailed) and event.run.error:
                self._append(event.run_id, [f"[tuiprof] {event.run.status}: {event.run.error}"])
            if isinstance(event, ev.RunFinished | ev.RunFailed):
                self.refresh_comparison()
        elif isinstance(event, ev.RunProgress):
            run = table.runs.get(event.run_id)
            if run is not None:
                from dataclasses import replace

                table.upsert(
                    replace(run, progress=event.progress, metrics={**run.metrics, **event.metrics})
                )
        elif isinstance(event, ev.RunOutput):
            self._append(event.run_id, list(event.lines))
        elif isinstance(event, ev.ExperimentFinished):
            counts = ", ".join(f"{n} {s}" for s, n in sorted(event.counts.items()))
            self.notify(f"Experiment finished: {counts}", title="tuiprof", markup=False)
            self.refresh_comparison()
            self.app.post_message(ProfilesChanged())  # its runs' profiles belong in the tree

    def _append(self, run_id: str, lines: list[str]) -> None:
        buf = self._log_lines.setdefault(run_id, [])
        buf.extend(lines)
        del buf[:-LOG_TAIL_LINES]
        selected = self.query_one(RunTable).selected_run
        if selected is not None and selected.run_id == run_id:
            self._pending.extend(lines)
            if len(self._pending) > LIVE_LINES_PER_FLUSH:
                self._pending_skipped += len(self._pending) - LIVE_LINES_PER_FLUSH
                del self._pending[:-LIVE_LINES_PER_FLUSH]

    def _flush_log(self) -> None:
        lines, skipped = self._pending, self._pending_skipped
        self._pending, self._pending_skipped = [], 0
        if skipped:
            lines = [
                f"[tuiprof: {skipped} lines not shown here; the run's log file has them]",
                *lines,
            ]
        self._write_log(lines)

    def _write_log(self, lines: list[str]) -> None:
        """One write per batch (RichLog renders and scrolls per write), at most a tail's worth."""
        if lines:
            self.query_one("#run-log", RichLog).write(Text("\n".join(lines[-LOG_TAIL_LINES:])))

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        run = self.query_one(RunTable).runs.get(str(event.row_key.value))
        if run is not None:
            self._show_log(run)

    def _show_log(self, run: RunRecord) -> None:
        log = self.query_one("#run-log", RichLog)
        log.clear()
        self._pending, self._pending_skipped = [], 0
        self.query_one("#log-title", Static).update(
            Text(f"Log: {run.variant} #{run.repeat + 1}  {self._label(run.log_path)}")
        )
        lines = self._log_lines.get(run.run_id)
        runner = self.app.runners.get(self.current or "")  # type: ignore[attr-defined]
        if lines is None and runner is not None and run.run_id in {*runner.active, *runner.pending}:
            lines = []  # its runner sends every line from the first: the file's would come twice
        if lines is None:
            lines = _read_tail(run.log_path)
        self._write_log(lines)

    # -- actions -------------------------------------------------------------------------
    def action_stop_selected(self) -> None:
        run = self.query_one(RunTable).selected_run
        runner = self.app.runners.get(self.current or "")  # type: ignore[attr-defined]
        if run is None or runner is None:
            self.notify("No run of this session's experiments is selected.", severity="warning")
            return
        runner.stop(run.run_id)
        self.notify(f"Stopping {run.variant} #{run.repeat + 1}", markup=False)

    def action_stop_all(self) -> None:
        runner = self.app.runners.get(self.current or "")  # type: ignore[attr-defined]
        if runner is None:
            self.notify("Nothing is running in this experiment.", severity="warning")
            return
        runner.stop_all()
        self.notify("Stopping all runs of this experiment")

    def action_rescan(self) -> None:
        self.scan()

    def action_diff_variants(self) -> None:
        """Baseline (A) against the selected run's variant (B), each over its finished runs."""
        from tui_prof.comparison.profile_diff import VariantRef
        from tui_prof.tui.messages import DiffRequested

        if self.current is None:
            self.notify("No experiment selected.", severity="warning")
            return
        try:
            record = load_experiment(self.current)
        except StoreError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        run = self.query_one(RunTable).selected_run
        others = [v for v in record.variants if v != record.baseline]
        variant = run.variant if run is not None and run.variant != record.baseline else None
        if variant is None and others:
            variant = others[0]
        if variant is None:
            self.notify("This experiment has one variant: nothing to compare.", severity="warning")
            return
        self.post_message(
            DiffRequested(
                VariantRef(self.current, record.baseline), VariantRef(self.current, variant)
            )
        )


def _read_tail(path: str, lines: int = 200) -> list[str]:
    if not path:
        return []
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]
