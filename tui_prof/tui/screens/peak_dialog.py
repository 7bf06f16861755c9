"""`T`: the dense peak MFU divides by (the TUI's `--peak-tflops`), for devices the hardware table
does not know, CPUs, or a clock or format the table's figure does not fit. Empty: the table's."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from tui_prof.device_use import Efficiency
from tui_prof.tui.screens.form_dialog import FormDialog


@dataclass(frozen=True)
class PeakChoice:
    tflops: float | None  # None: the hardware table's peak again


def parse_peak(text: str) -> float | None:
    """A positive, finite TFLOP/s, or None for an empty field; ValueError says what is wrong."""
    text = text.strip()
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"not a number of TFLOP/s: {text}") from None
    if not v > 0 or math.isinf(v):
        raise ValueError(f"not a positive number of TFLOP/s: {text}")
    return v


class PeakDialog(FormDialog[PeakChoice]):
    AUTO_FOCUS = "#peak"
    ERROR = "#peak-error"

    def __init__(self, current: float | None, efficiency: Efficiency | None) -> None:
        super().__init__()
        self.current = current
        self.efficiency = efficiency

    def _table_words(self) -> Text:
        e = self.efficiency
        if e is None:
            return Text("The selected session has no FLOP count: MFU needs one.", style="yellow")
        if self.current is None and e.peak_tflops:
            return Text(f"Now: {e.peak_source}, {e.peak_tflops:,.4g} TFLOP/s per device.")
        if self.current is None:
            return Text(f"Now: no peak ({e.peak_source}).", style="yellow")
        return Text(f"Now: yours, {self.current:,.4g} TFLOP/s per device.")

    def compose(self) -> ComposeResult:
        with Vertical(id="peak-dialog"):
            yield Label("Dense peak per device for MFU (TFLOP/s)", id="peak-title")
            yield Label(self._table_words())
            yield Label(
                Text("Empty: the hardware table's, for the device and number format.", "dim")
            )
            value = "" if self.current is None else f"{self.current:g}"
            yield Input(value, placeholder="e.g. 989", id="peak", type="number")
            yield Static(id="peak-error")
            with Horizontal(id="peak-buttons"):
                yield Button("OK", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def validated(self) -> PeakChoice:
        return PeakChoice(parse_peak(self.query_one("#peak", Input).value))
