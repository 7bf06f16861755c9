"""What every full screen of tuiprof shares: the typed app, and worker errors sent to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker

if TYPE_CHECKING:
    from textual import getters

    from tui_prof.tui.app import TuiprofApp


NARROW_BELOW = 100  # columns: below this the views stack and shorten (an 80x24 SSH terminal)


class KeysFooter(Footer):
    """The footer, compact on a narrow screen so an 80-column one still shows the keys."""

    def on_mount(self) -> None:
        self.compact = self.screen.has_class("narrow")


class TuiprofScreen(Screen[None]):
    """A screen of TuiprofApp: `self.app` is typed as it (the one place that says so), and the
    `narrow` class below NARROW_BELOW columns, from its first frame and on every resize."""

    HORIZONTAL_BREAKPOINTS = [(0, "narrow"), (NARROW_BELOW, "wide")]

    if TYPE_CHECKING:  # at run time Textual's own property returns the running app: ours
        app = getters.app(TuiprofApp)

    def __init__(self) -> None:
        # The class from the start: one changed after the first styling restyles every widget.
        super().__init__(classes=self._width_class())

    def _width_class(self) -> str:
        return "narrow" if self.app.size.width < NARROW_BELOW else "wide"

    def _fit_width(self) -> None:
        narrow = self._width_class() == "narrow"
        self.set_class(narrow, "narrow")
        self.set_class(not narrow, "wide")
        for footer in self.query(KeysFooter).results(KeysFooter):
            footer.compact = narrow

    def on_resize(self) -> None:
        for footer in self.query(KeysFooter).results(KeysFooter):
            footer.compact = self.app.size.width < NARROW_BELOW

    def on_screen_resume(self) -> None:
        """Shown again, maybe after the terminal changed size behind another screen."""
        self._fit_width()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker messages do not bubble: hand them to the app's one handler."""
        self.app.worker_changed(event.worker)
