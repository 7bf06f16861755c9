"""The `a` dialog: where the profiler server is, how long to trace, once or every N seconds."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from tui_prof.live.capture import CaptureError, parse_addresses
from tui_prof.tui.screens.form_dialog import FormDialog


@dataclass(frozen=True)
class CaptureRequest:
    addresses: tuple[str, ...]
    logdir: str
    duration_ms: int
    every_s: float | None  # None: capture once
    count: int | None


class CaptureDialog(FormDialog[CaptureRequest]):
    AUTO_FOCUS = "#address"
    PRIMARY = "capture"
    ERROR = "#capture-error"
    ERRORS = (ValueError, CaptureError)

    def __init__(self, address: str, logdir: str) -> None:
        super().__init__()
        self.address = address
        self.logdir = logdir

    def compose(self) -> ComposeResult:
        with Vertical(id="capture-dialog"):
            yield Label("Capture a profile from a running job", id="capture-title")
            yield Label("Profiler server HOST:PORT (several: comma-separated)")
            yield Input(self.address, placeholder="localhost:6009", id="address")
            yield Label("Logdir the job writes the session into")
            yield Input(self.logdir, id="logdir")
            yield Label("Duration (ms)")
            yield Input("2000", id="duration", type="integer")
            yield Label("Every N seconds (empty: once) and how many times")
            with Horizontal(id="capture-repeat"):
                yield Input(placeholder="every s", id="every", type="number")
                yield Input(placeholder="count", id="count", type="integer")
            yield Static(id="capture-error")
            with Horizontal(id="capture-buttons"):
                yield Button("Capture", variant="primary", id="capture")
                yield Button("Cancel", id="cancel")

    def _value(self, wid: str) -> str:
        return self.query_one(f"#{wid}", Input).value.strip()

    def validated(self) -> CaptureRequest:
        addresses = parse_addresses(self._value("address"))
        duration = int(self._value("duration") or "0")
        if duration <= 0:
            raise ValueError("duration must be a positive number of milliseconds")
        every = float(self._value("every")) if self._value("every") else None
        count = int(self._value("count")) if self._value("count") else None
        if every is not None and every <= 0:
            raise ValueError("every must be a positive number of seconds")
        if not self._value("logdir"):
            raise ValueError("a logdir is needed: the job writes the session there")
        return CaptureRequest(addresses, self._value("logdir"), duration, every, count)
