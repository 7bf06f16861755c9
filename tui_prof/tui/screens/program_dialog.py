"""`P`: which XLA program's runs are the steps (the TUI's `tuiprof summary --step-program`)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from tui_prof.model import ProgramStat
from tui_prof.render.summary import fmt_ms

AUTOMATIC = ""  # the dismissed value that hands the choice back to tuiprof


class ProgramDialog(ModalScreen[str | None]):
    """Lists the programs the selected profile ran; dismisses with a name, AUTOMATIC or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, programs: tuple[ProgramStat, ...], current: str | None, note: str | None = None
    ) -> None:
        super().__init__()
        self.programs = programs
        self.current = current
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="program-dialog"):
            yield Label("Steps from the runs of which XLA program?", id="program-title")
            options = [Option(Text("Automatic: markers, else the program with the most time"))]
            for p in self.programs:
                label = Text(p.name)
                runs = f"{p.runs} run{'s' if p.runs != 1 else ''}"
                label.append(f"  {runs}, {fmt_ms(p.time_ms)} ms", style="dim")
                options.append(Option(label, id=f"p{len(options)}"))
            yield OptionList(*options, id="program-list")
            if not self.programs:
                yield Label(
                    Text("This profile shows no XLA program runs (not a JAX/XLA job?).", "yellow"),
                    id="program-none",
                )
            if self.note:
                yield Label(Text(self.note, "yellow"), id="program-note")

    def on_mount(self) -> None:
        names = [p.name for p in self.programs]
        ol = self.query_one(OptionList)
        ol.highlighted = names.index(self.current) + 1 if self.current in names else 0
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        k = event.option_index
        self.dismiss(AUTOMATIC if k == 0 else self.programs[k - 1].name)

    def action_cancel(self) -> None:
        self.dismiss(None)
