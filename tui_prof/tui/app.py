"""The Textual app: a thin face over the core; screens do the work, this wires them."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from tui_prof.tui.commands import TuiprofCommands
from tui_prof.tui.screens.browse import BrowseScreen
from tui_prof.tui.screens.help import HelpScreen


class TuiprofApp(App[int]):
    TITLE = "tuiprof"
    CSS_PATH = "tuiprof.tcss"
    COMMANDS = App.COMMANDS | {TuiprofCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help", key_display="?"),
    ]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.sub_title = str(path)

    def on_mount(self) -> None:
        self.push_screen(BrowseScreen(self.path))

    def on_resize(self) -> None:
        self.screen.set_class(self.size.width < 100, "narrow")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
