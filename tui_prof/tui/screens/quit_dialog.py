"""Quitting while runs are active: stop them, leave them running, or stay."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

STOP, LEAVE, STAY = "stop", "leave", "stay"


class QuitDialog(ModalScreen[str]):
    BINDINGS = [Binding("escape", "stay", "Stay")]

    def __init__(self, running: int, waiting: int = 0) -> None:
        super().__init__()
        self.running = running
        self.waiting = waiting

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog"):
            yield Label(f"Runs not finished: {self.running} running, {self.waiting} waiting.")
            yield Label(
                "Leave them: the running ones go on and write their own files, the waiting ones "
                "wait; `tuiprof run --resume DIR` (or reopening the experiment) stops what still "
                "runs here, records it as interrupted and runs what is missing."
            )
            with Horizontal():
                yield Button("Stop runs and quit", variant="error", id=STOP)
                yield Button("Leave running", id=LEAVE)
                yield Button("Stay", variant="primary", id=STAY)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))

    def action_stay(self) -> None:
        self.dismiss(STAY)
