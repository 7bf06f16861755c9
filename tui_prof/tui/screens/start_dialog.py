"""The `r` dialog: which spec, which variants, how many repeats; validated before it closes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from tui_prof.experiments.spec import ExperimentSpec, check_executable, load_spec, select
from tui_prof.tui.screens.form_dialog import FormDialog

SPEC_CANDIDATES = ("tuiprof.toml", "examples/mixed_precision.toml")


@dataclass(frozen=True)
class StartRequest:
    spec: ExperimentSpec
    parallel: int = 1  # runs at once (`tuiprof run --parallel`); the dialog leaves it at 1


def default_spec_path(base: Path) -> str:
    """The spec next to the open path, else in the working directory (relative where it can be)."""
    for root in (base if base.is_dir() else base.parent, Path.cwd()):
        for name in SPEC_CANDIDATES:
            if (root / name).is_file():
                return _relative(root / name)
    return "tuiprof.toml"


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class StartDialog(FormDialog[StartRequest]):
    AUTO_FOCUS = "#spec"
    PRIMARY = "start"
    ERROR = "#start-error"

    def __init__(self, spec_path: str) -> None:
        super().__init__()
        self.spec_path = spec_path

    def compose(self) -> ComposeResult:
        with Vertical(id="start-dialog"):
            yield Label("Start a repeated experiment", id="start-title")
            yield Label("Spec (TOML)")
            yield Input(self.spec_path, id="spec")
            yield Label("Variants (comma-separated; empty: all)")
            yield Input(placeholder="e.g. float32,mixed", id="variants")
            yield Label("Repeats (empty: the spec's)")
            yield Input(placeholder="e.g. 5", id="repeats", type="integer")
            yield Static(id="start-error")
            with Horizontal(id="start-buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    def validated(self) -> StartRequest:
        spec = load_spec(self.query_one("#spec", Input).value.strip())
        raw = self.query_one("#variants", Input).value
        variants = [v.strip() for v in raw.split(",") if v.strip()] or None
        reps = self.query_one("#repeats", Input).value.strip()
        spec = select(spec, variants=variants, repeats=int(reps) if reps else None)
        check_executable(spec)
        return StartRequest(spec)
