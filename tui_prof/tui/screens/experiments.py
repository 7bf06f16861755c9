"""Experiments: the live run table, the selected run's log tail and the comparison, side by side.

Runner events arrive on the runner's threads and are posted here as messages; the comparison is
recomputed in a thread worker from the store (the same `build_report` as `tuiprof compare`)
whenever a run ends, so the screen and the CLI always agree.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Header, RichLog, Select, Static

from tui_prof.experiments import events as ev
from tui_prof.experiments.store import (
    IN_FLIGHT,
    ORPHAN_NOTE,
    StoreError,
    find_experiments,
    load_experiment,
)
from tui_prof.model import ExperimentRecord, RunRecord
from tui_prof.printable import printable
from tui_prof.tui.messages import (
    ComparisonReady,
    ExperimentLoaded,
    ExperimentsFound,
    LogTailRead,
    ProfilesChanged,
    RunnerEventArrived,
)
from tui_prof.tui.screens.base import KeysFooter, TuiprofScreen
from tui_prof.tui.widgets.run_table import RunTable

LOG_TAIL_LINES = 400
# The live log is drawn at most every LIVE_FLUSH_S with at most LIVE_LINES_PER_FLUSH new lines: RichLog
# renders each line as it is written (~0.1 ms a line here), so drawing all of four fast streams' output
# stalled the screen > 100 ms at a time (benchmarks/ui_responsiveness.py). The run's log file has it all.
# The flush is a one-shot timer set by the first line that waits, not an interval: between output
# bursts nothing wakes the screen (benchmarks/observer_cpu.py), but for the elapsed times once a second.
LIVE_FLUSH_S = 0.1
LIVE_LINES_PER_FLUSH = 50
COMPARISON_EVERY_S = 10.0  # while runs run, the comparison is recomputed at most this often


class ExperimentsScreen(TuiprofScreen):
    BINDINGS = [
        Binding("x", "stop_selected", "Stop run", id="stop_run", tooltip="Stop the selected run"),
        Binding(
            "X", "stop_all", "Stop all", id="stop_all", tooltip="Stop every run of this experiment"
        ),
        Binding(
            "f5,ctrl+r",
            "rescan",
            "Rescan",
            id="rescan_experiments",
            show=False,
            tooltip="Look for experiments under the open path again",
        ),
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
        self._log_dropped: dict[str, int] = {}  # lines a run printed beyond its kept tail
        self._composed = False
        self._record: ExperimentRecord | None = None  # the shown experiment, as last read
        self._log_run: str | None = None  # whose log the log pane shows
        self._live_runs: dict[str, RunRecord] = {}  # the shown experiment's runs, from events
        self._pending: list[str] = []  # the selected run's lines not drawn yet
        self._pending_skipped = 0
        self._flush_due = False  # a flush timer is set for the pending lines
        self._comparison_due = False  # a comparison refresh is set for when the timer fires

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
        yield KeysFooter()

    def on_mount(self) -> None:
        self._composed = True  # (is_mounted turns True only after on_mount)
        self.set_interval(1.0, self._tick)
        if self.current is not None:
            self.show_experiment(self.current)
        self.scan()

    def _tick(self) -> None:
        if self.is_current:  # a hidden screen's table is not drawn; it catches up when shown
            self.query_one(RunTable).tick()

    @work(
        thread=True,
        exclusive=True,
        group="experiments-scan",
        name="looking for experiments",
        exit_on_error=False,
    )
    def scan(self) -> None:
        self.post_message(ExperimentsFound(tuple(str(p) for p in find_experiments(self.root))))

    def on_experiments_found(self, message: ExperimentsFound) -> None:
        known = list(dict.fromkeys([*message.directories, *self.app.runners]))
        select = self.query_one("#experiment-select", Select)
        select.set_options([(self._label(d), d) for d in known])
        if self.current is None and known:
            self.show_experiment(known[-1] if self.app.runners else known[0])

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
        if directory != self.current:
            self._live_runs = {}
            self._log_run = None
        self.current = directory
        if not self._composed:  # installed but not shown yet: on_mount shows it
            return
        select = self.query_one("#experiment-select", Select)
        if select.value != directory:
            options = [v for _, v in select._options if isinstance(v, str)]
            if directory not in options:
                select.set_options([(self._label(d), d) for d in [*options, directory]])
            select.value = directory
        self.refresh_bindings()
        self._load(directory)

    @work(
        thread=True,
        exclusive=True,
        group="load-experiment",
        name="reading the experiment",
        exit_on_error=False,
    )
    def _load(self, directory: str) -> None:
        """The store is read here: a large experiment must not stop the screen drawing."""
        try:
            record = load_experiment(directory)
        except StoreError as exc:
            self.post_message(ExperimentLoaded(directory, None, str(exc)))
            return
        self.post_message(ExperimentLoaded(directory, record, None))

    def on_experiment_loaded(self, message: ExperimentLoaded) -> None:
        if message.directory != self.current:
            return
        if message.record is None:
            self.query_one("#comparison", Static).update(
                Text(message.error or "cannot read", style="bold red")
            )
            return
        self._record = message.record
        if self._log_run is None:
            self.query_one("#run-log", RichLog).clear()
        table = self.query_one(RunTable)
        table.show_runs(message.record.runs)
        for run in self._live_runs.values():  # events that came while the store was read
            table.upsert(run)
        self.refresh_comparison()
        self.refresh_bindings()
        if any(
            r.status in IN_FLIGHT and (r.backend_ref or r.error == ORPHAN_NOTE)
            for r in message.record.runs
        ):  # a cluster still runs them, or an earlier tuiprof left them running here
            self.app.reattach(message.directory)

    @work(
        thread=True,
        exclusive=True,
        group="comparison",
        name="comparing the experiment",
        exit_on_error=False,
    )
    def refresh_comparison(self) -> None:
        from tui_prof.comparison.report import build_report
        from tui_prof.experiments.reading import read_experiment

        directory = self.current
        if directory is None:
            return
        try:
            report = build_report(read_experiment(directory))
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
            else:  # reopened: runs an earlier tuiprof left running are stopped now
                table = self.query_one(RunTable)
                for found in event.runs:
                    shown = table.runs.get(found.run_id)
                    if shown is not None and shown.status != found.status:
                        table.upsert(found)
            return
        if message.directory != self.current:
            return
        table = self.query_one(RunTable)
        if isinstance(event, ev.RunQueued | ev.RunStarted | ev.RunFinished | ev.RunFailed):
            self._live_runs[event.run_id] = event.run
            table.upsert(event.run)
            if isinstance(event, ev.RunFailed) and event.run.error:
                self._append(event.run_id, [f"[tuiprof] {event.run.status}: {event.run.error}"])
            if isinstance(event, ev.RunFinished | ev.RunFailed):
                self._comparison_soon()
            self.refresh_bindings()
        elif isinstance(event, ev.RunProgress):
            run = table.runs.get(event.run_id)
            if run is not None:
                run = replace(
                    run, progress=event.progress, metrics={**run.metrics, **event.metrics}
                )
                self._live_runs[event.run_id] = run
                table.upsert(run)
        elif isinstance(event, ev.RunOutput):
            self._append(event.run_id, list(event.lines))
        elif isinstance(event, ev.ExperimentFinished):
            self._comparison_due = False  # the refresh below covers it
            counts = ", ".join(f"{n} {s}" for s, n in sorted(event.counts.items()))
            self.notify(f"Experiment finished: {counts}", title="tuiprof", markup=False)
            if event.problem:  # a full disk or a store that did not answer: it stopped itself
                self.notify(event.problem, severity="error", timeout=30, markup=False)
            self.refresh_comparison()
            self.refresh_bindings()
            self.app.post_message(ProfilesChanged())  # its runs' profiles belong in the tree

    def _comparison_soon(self) -> None:
        """A run ended: compare again, but at most every COMPARISON_EVERY_S while this session's
        runs run (reading the store and computing the report after each short run took CPU
        from the next run, which it measures); at once when the experiment ends."""
        runner = self.app.runners.get(self.current or "")
        if runner is None or runner.done:
            self.refresh_comparison()
        elif not self._comparison_due:
            self._comparison_due = True
            self.set_timer(COMPARISON_EVERY_S, self._comparison_timer)

    def _comparison_timer(self) -> None:
        if self._comparison_due:
            self._comparison_due = False
            self.refresh_comparison()

    def _append(self, run_id: str, lines: list[str]) -> None:
        buf = self._log_lines.setdefault(run_id, [])
        buf.extend(lines)
        if len(buf) > LOG_TAIL_LINES:
            self._log_dropped[run_id] = self._log_dropped.get(run_id, 0) + len(buf) - LOG_TAIL_LINES
            del buf[:-LOG_TAIL_LINES]
        if self._log_run == run_id:
            self._pending.extend(lines)
            if len(self._pending) > LIVE_LINES_PER_FLUSH:
                self._pending_skipped += len(self._pending) - LIVE_LINES_PER_FLUSH
                del self._pending[:-LIVE_LINES_PER_FLUSH]
            if not self._flush_due:
                self._flush_due = True
                self.set_timer(LIVE_FLUSH_S, self._flush_log)

    def _flush_log(self) -> None:
        self._flush_due = False
        lines, skipped = self._pending, self._pending_skipped
        self._pending, self._pending_skipped = [], 0
        self._write_log(lines, skipped)

    def _write_log(self, lines: list[str], skipped: int = 0) -> None:
        """One write per batch (RichLog renders and scrolls per write), at most a tail's worth;
        a first line says how many lines were left out."""
        room = LOG_TAIL_LINES - 1 if skipped or len(lines) > LOG_TAIL_LINES else LOG_TAIL_LINES
        skipped += max(0, len(lines) - room)
        lines = lines[-room:]
        if skipped:
            lines = [
                f"[tuiprof: {skipped} lines not shown here; the run's log file has them]",
                *lines,
            ]
        if lines:
            # A job's output is data: escape sequences in it are shown, never obeyed.
            text = printable("\n".join(lines), multiline=True)
            self.query_one("#run-log", RichLog).write(Text(text))

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        run = self.query_one(RunTable).runs.get(str(event.row_key.value))
        self.refresh_bindings()
        if run is not None and run.run_id != self._log_run:
            self._show_log(run)

    def _show_log(self, run: RunRecord) -> None:
        """The selected run's log: what this session received of it, else its file's tail."""
        self.query_one("#run-log", RichLog).clear()
        self._log_run = run.run_id
        self._pending, self._pending_skipped = [], 0
        self.query_one("#log-title", Static).update(
            Text(f"Log: {run.variant} #{run.repeat + 1}  {self._label(run.log_path)}")
        )
        if (self.current or "") in self.app.runners:
            # This session's runner sends every line from the first: the file's would come twice.
            lines = self._log_lines.get(run.run_id, [])
            self._write_log(list(lines), self._log_dropped.get(run.run_id, 0))
        else:
            self._read_log_tail(run.run_id, run.log_path)

    @work(
        thread=True,
        exclusive=True,
        group="log-tail",
        name="reading a run's log",
        exit_on_error=False,
    )
    def _read_log_tail(self, run_id: str, path: str) -> None:
        self.post_message(LogTailRead(run_id, _read_tail(path)))

    def on_log_tail_read(self, message: LogTailRead) -> None:
        if message.run_id == self._log_run:
            self._write_log(message.lines)

    # -- actions -------------------------------------------------------------------------
    @property
    def selected_run(self) -> RunRecord | None:
        return self.query_one(RunTable).selected_run

    def _runner_runs(self) -> set[str]:
        """Run ids of the shown experiment that this session's runner still runs or will."""
        runner = self.app.runners.get(self.current or "")
        return set() if runner is None or runner.done else {*runner.active, *runner.pending}

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """x and X are offered only where they stop something this session started, d where
        there are variants to compare."""
        if action == "stop_selected":
            run = self.selected_run if self._composed else None
            return run is not None and run.run_id in self._runner_runs()
        if action == "stop_all":
            return bool(self._runner_runs())
        if action == "diff_variants":  # an experiment read, with a variant beside its baseline
            return self._record is not None and len(self._record.variants) > 1
        return True

    def action_stop_selected(self) -> None:
        run = self.selected_run
        runner = self.app.runners.get(self.current or "")
        if run is None or runner is None or run.run_id not in self._runner_runs():
            self.notify("The selected run is not running in this session.", severity="warning")
            return
        runner.stop(run.run_id)
        self.notify(f"Stopping {run.variant} #{run.repeat + 1}", markup=False)

    def action_stop_all(self) -> None:
        runner = self.app.runners.get(self.current or "")
        if runner is None or runner.done:
            self.notify("Nothing is running in this experiment.", severity="warning")
            return
        runner.stop_all()
        self.notify("Stopping all runs of this experiment")

    def action_rescan(self) -> None:
        self.scan()

    def action_diff_variants(self) -> None:
        """Baseline (A) against the selected run's variant (B), each over its finished runs."""
        from tui_prof.experiments.diff_targets import VariantRef
        from tui_prof.tui.messages import DiffRequested

        record = self._record
        if self.current is None or record is None or Path(record.directory) != Path(self.current):
            self.notify("No experiment read yet.", severity="warning")
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
