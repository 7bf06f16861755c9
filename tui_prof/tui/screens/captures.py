"""Captures: each live capture of this session, summarised, with one breakdown bar per capture.

A series (capture every N seconds) shows how the step time and its breakdown move over time, e.g.
through a learning-rate warm-up or after a data-loader change.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Header, Static
from textual.worker import Worker, get_current_worker

from tui_prof.live.capture import CaptureError, capture_series
from tui_prof.model import ProfileError, StepBreakdown
from tui_prof.render.summary import BreakdownBars, fmt_ms
from tui_prof.tui.messages import Captured, CaptureEnded, CaptureProgressed
from tui_prof.tui.screens.base import KeysFooter, TuiprofScreen
from tui_prof.tui.screens.capture_dialog import CaptureRequest


class CapturesScreen(TuiprofScreen):
    BINDINGS = [
        Binding(
            "s",
            "stop_capture",
            "Stop capturing",
            id="stop_capture",
            tooltip="Stop the capture series (the capture under way finishes)",
        )
    ]

    def __init__(self) -> None:
        super().__init__()
        self.points: list[StepBreakdown] = []
        self._worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with VerticalScroll(id="captures"):
            yield Static(
                Text("No captures yet: press a to capture a running job's profile.", style="dim"),
                id="capture-status",
            )
            yield DataTable(id="capture-table", cursor_type="row", zebra_stripes=True)
            yield Static(
                Text("Average step time per capture", style="bold"), id="capture-chart-title"
            )
            yield Static(id="capture-chart")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#capture-table", DataTable).add_columns(
            "#", "Time", "Session", "Avg step ms", "Steps", "Verdict"
        )

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._worker.is_finished

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """s is offered only while a capture runs."""
        return self.running if action == "stop_capture" else True

    def start(self, request: CaptureRequest) -> None:
        if self.running:
            self.notify("A capture is already running; press s to stop it.", severity="warning")
            return
        self._worker = self._run(request)
        self.refresh_bindings()

    @work(thread=True, group="capture", name="capturing", exit_on_error=False)
    def _run(self, request: CaptureRequest) -> None:
        """Stops at the worker's cancellation: s, or the app closing."""
        from tui_prof.profiles.load import load_summary

        count = request.count if request.every_s is not None else 1
        every = request.every_s if request.every_s is not None else 0.0
        results = capture_series(
            request.addresses,
            logdir=request.logdir,
            every_s=every,
            count=count,
            cancel=get_current_worker().cancelled_event,
            duration_ms=request.duration_ms,
            progress=lambda f, m: self.post_message(CaptureProgressed(f, m)),
        )
        try:
            for item in results:
                if isinstance(item, CaptureError):
                    self.post_message(CaptureEnded(str(item), item.kind == "empty"))
                    continue
                try:
                    summary = load_summary(item.session_dir)
                except ProfileError as exc:
                    self.post_message(Captured(item, None, str(exc)))
                    continue
                self.post_message(Captured(item, summary, None))
        finally:
            self.post_message(CaptureEnded(None, False))

    def on_capture_progressed(self, message: CaptureProgressed) -> None:
        self.query_one("#capture-status", Static).update(
            Text(f"{message.text} ({message.fraction:.0%})")
        )

    def on_captured(self, message: Captured) -> None:
        result = message.result
        table = self.query_one("#capture-table", DataTable)
        n = table.row_count + 1
        s = message.summary
        if s is None or s.average is None:
            table.add_row(
                str(n),
                time.strftime("%H:%M:%S"),
                Text(result.session_dir.name),
                "–",
                "0",
                Text(message.error or "no steps found"),
            )
        else:
            table.add_row(
                str(n),
                time.strftime("%H:%M:%S"),
                Text(result.session_dir.name),
                fmt_ms(s.average.step_time_ms),
                str(len(s.steps)),
                Text(s.bottleneck),
            )
            self.points.append(
                StepBreakdown(n, s.average.step_time_ms, dict(s.average.breakdown_ms))
            )
            self.query_one("#capture-chart", Static).update(
                BreakdownBars(self.points, label_width=6)
            )
        self.query_one("#capture-status", Static).update(Text(f"Captured {result.session_dir}"))
        # The message bubbles on to the app, which lists the browse tree again.

    def on_capture_ended(self, message: CaptureEnded) -> None:
        self.refresh_bindings()
        if message.error:
            self.notify(
                message.error,
                title="Capture",
                severity="warning" if message.empty else "error",
                markup=False,
                timeout=10,
            )
            self.query_one("#capture-status", Static).update(Text(message.error, style="bold red"))

    def action_stop_capture(self) -> None:
        if self._worker is not None and not self._worker.is_finished:
            self._worker.cancel()
            self.notify("Capturing stopped")
        self.refresh_bindings()
