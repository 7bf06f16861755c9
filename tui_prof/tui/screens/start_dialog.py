"""The `r` dialog: a new experiment from commands (one `NAME=COMMAND` per line, as
`tuiprof run --variant` takes them), or from a spec file; optionally saved as a spec.

"Run on" is `local` (this machine), `ray` or `ray HOST:PORT` (a Ray cluster's dashboard; the
runs go on if tuiprof exits); empty keeps what the spec says. "Matters" is the smallest
difference that matters, in percent (`5`, or `wall_time_s=5,accuracy=0.5`; empty: the spec's,
else 5% for times), kept with the experiment for its comparison.

Where the selected profile is a run of an experiment and its advice names a change the run's
command exposes (tui_prof.experiments.suggest), the dialog opens with that run's command as the
baseline and the change as a second variant, and says where it found the knob.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static, TextArea

from tui_prof.experiments.backend_spec import BackendSpec, with_options
from tui_prof.experiments.commands import command_text, save_spec, spec_from_commands
from tui_prof.experiments.spec import (
    ExperimentSpec,
    SpecError,
    check_executable,
    load_spec,
    parse_min_difference,
    select,
)
from tui_prof.experiments.suggest import CHANGE_LABELS, Proposal, RunContext
from tui_prof.tui.screens.form_dialog import FormDialog

SPEC_CANDIDATES = ("tuiprof.toml", "examples/mixed_precision.toml")


@dataclass(frozen=True)
class StartRequest:
    spec: ExperimentSpec
    parallel: int | None = None  # runs at once: one here, or as many as a cluster fits


@dataclass(frozen=True)
class Prefill:
    """What the dialog opens with: commands, a name, repeats, where to run, and why."""

    variants: str = ""
    name: str = ""
    repeats: str = ""
    workdir: str = ""
    hint: str = ""


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


def _workdir(recorded: str) -> tuple[str, str]:
    """The recorded working directory, or one like it here (an experiment made elsewhere)."""
    if Path(recorded).is_dir():
        return recorded, ""
    here = Path.cwd() / Path(recorded).name
    chosen = str(here) if here.is_dir() else str(Path.cwd())
    return chosen, f" The recorded working directory {recorded} is not here: using {chosen}."


def prefill_from(ctx: RunContext | None, proposals: list[Proposal], advised: bool) -> Prefill:
    """The dialog's start: the selected run's command and the first change it exposes."""
    if ctx is None:
        return Prefill()
    workdir, moved = _workdir(ctx.workdir)
    lines = [f"{ctx.variant}={command_text(ctx.argv, ctx.env)}"]
    if not proposals:
        why = (
            "its command exposes none of the changes the advice names"
            if advised
            else "the advice names no change to try"
        )
        hint = f"Run {ctx.run_id} of {ctx.experiment}: {why}; add a variant line."
        return Prefill(lines[0], f"{ctx.experiment}-again", str(ctx.repeats), workdir, hint + moved)
    first = proposals[0]
    lines.append(f"{first.name}={command_text(first.argv, first.env)}")
    hint = f"From the advice: {CHANGE_LABELS[first.change]}, by {first.how}."
    others = [f"{CHANGE_LABELS[p.change]} ({p.how})" for p in proposals[1:]]
    if others:
        hint += " Also exposed: " + "; ".join(others) + "."
    return Prefill(
        "\n".join(lines), f"{ctx.variant}-vs-{first.name}", str(ctx.repeats), workdir, hint + moved
    )


class StartDialog(FormDialog[StartRequest]):
    AUTO_FOCUS = "#variants"
    PRIMARY = "start"
    ERROR = "#start-error"

    def __init__(self, spec_path: str, prefill: Prefill | None = None) -> None:
        super().__init__()
        self.spec_path = spec_path
        self.prefill = prefill or Prefill()
        self._replace_ok: Path | None = None  # the "Save spec as" file the user chose to replace

    def compose(self) -> ComposeResult:
        p = self.prefill
        with Vertical(id="start-dialog"):
            yield Label("New experiment", id="start-title")
            yield Label("Variants, one per line: NAME=COMMAND (the first is the baseline)")
            yield TextArea(p.variants, id="variants", compact=True, soft_wrap=False)
            with Horizontal(classes="start-row"):
                yield Label("Name")
                yield Input(p.name, placeholder="from the variants", id="name", compact=True)
                yield Label("Repeats", classes="second")
                yield Input(p.repeats, placeholder="3", id="repeats", type="integer", compact=True)
            with Horizontal(classes="start-row"):
                yield Label("Run in")
                yield Input(p.workdir or str(Path.cwd()), id="workdir", compact=True)
                yield Label("on", classes="second")
                yield Input(placeholder="local, or ray HOST:PORT", id="backend", compact=True)
            with Horizontal(classes="start-row"):
                yield Label("Save spec as")
                yield Input(placeholder="e.g. amp.toml", id="save", compact=True)
                yield Label("Matters", classes="second")
                yield Input(placeholder="5% for times", id="matters", compact=True)
            with Horizontal(classes="start-row"):
                yield Label("Or a spec")
                yield Input(self.spec_path, id="spec", compact=True)
            yield Static(Text(p.hint, style="dim"), id="start-hint")
            yield Static(id="start-error")
            with Horizontal(id="start-buttons"):
                yield Button("Start", variant="primary", id="start", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def _value(self, selector: str) -> str:
        return self.query_one(selector, Input).value.strip()

    def validated(self) -> StartRequest:
        lines = [
            ln.strip()
            for ln in self.query_one("#variants", TextArea).text.splitlines()
            if ln.strip() and not ln.strip().startswith("#")
        ]
        reps = self._value("#repeats")
        repeats = int(reps) if reps else None
        if lines:
            spec = spec_from_commands(
                lines,
                name=self._value("#name") or None,
                repeats=3 if repeats is None else repeats,
                workdir=self._value("#workdir") or ".",
            )
        else:  # no commands: the spec file, as before
            spec = select(load_spec(self._value("#spec")), repeats=repeats)
        spec = replace(spec, backend=backend_from(self._value("#backend"), spec))
        matters = self._value("#matters")
        if matters:  # the smallest difference that matters: "5", or "wall_time_s=5,acc=0.5"
            try:
                given = parse_min_difference(matters)
            except ValueError as exc:
                raise SpecError(f"Matters: {exc}") from None
            spec = replace(spec, min_difference_pct={**spec.min_difference_pct, **given})
        check_executable(spec)
        save = self._value("#save")
        if save:
            path = Path(save).expanduser()
            if not path.is_absolute():
                path = Path(self._value("#workdir") or ".") / path
            if path.exists() and path != self._replace_ok:  # ask: a second Start replaces it
                self._replace_ok = path
                raise SpecError(f"Save spec as: {path} exists; Start again to replace it")
            save_spec(spec, path, replace=path == self._replace_ok)
            self.notify(f"Spec saved: {path}", markup=False)
        return StartRequest(spec)


def backend_from(text: str, spec: ExperimentSpec) -> BackendSpec:
    """The "Run on" field: `local`, `ray` or `ray HOST:PORT` over the spec's [backend]."""
    words = text.split()
    if not words:
        return spec.backend
    kind = words[0].lower()
    if kind not in ("local", "ray") or len(words) > 2 or (kind == "local" and len(words) > 1):
        raise SpecError(f"Run on: expected local, ray or ray HOST:PORT, got {text!r}")
    address = words[1] if len(words) == 2 else None
    return with_options(spec.backend, kind=kind, address=address, source="Run on")
