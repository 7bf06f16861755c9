"""What every full screen of tuiprof shares: the typed app, and worker errors sent to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen
from textual.worker import Worker

if TYPE_CHECKING:
    from textual import getters

    from tui_prof.tui.app import TuiprofApp


class TuiprofScreen(Screen[None]):
    """A screen of TuiprofApp: `self.app` is typed as it (the one place that says so)."""

    if TYPE_CHECKING:  # at run time Textual's own property returns the running app: ours
        app = getters.app(TuiprofApp)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker messages do not bubble: hand them to the app's one handler."""
        self.app.worker_changed(event.worker)
