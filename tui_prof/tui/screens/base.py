"""What every full screen of tuiprof shares: the typed app, and worker errors sent to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from textual.worker import Worker

if TYPE_CHECKING:
    from textual import getters

    from tui_prof.tui.app import TuiprofApp


NARROW_BELOW = 100  # columns: below this the views narrow, stack, shorten (an 80x24 terminal)


class KeysFooter(Footer):
    """The footer, compact on a narrow screen so an 80-column one still shows the keys. Keys that
    do not fit whole are left out (Textual's footer cuts the last one, which left a stray key
    letter or half a word beside the palette key), decided as it composes, from the widths
    Textual's footer styles give each key, so a snapshot never catches it half done."""

    def on_mount(self) -> None:
        self.compact = self.screen.has_class("narrow")

    def on_resize(self) -> None:
        self.refresh(recompose=True)

    def _width(self, key: FooterKey) -> int:
        """Cells a key takes with Footer's and FooterKey's default styles (padding, margins, the
        palette key's border and padding)."""
        k, d = cell_len(key.key_display), cell_len(key.description)
        if key.has_class("-command-palette"):
            return k + d + (2 if self.compact else 5)
        if not d:
            return k + (1 if self.compact else 2)
        return k + d + (2 if self.compact else 3)

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        if not self.size.width or not all(isinstance(w, FooterKey) for w in widgets):
            yield from widgets  # before the first layout, or key groups: Textual's own way
            return
        keys = [w for w in widgets if isinstance(w, FooterKey)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        room = self.size.width - sum(self._width(k) for k in palette)
        for key in keys:
            if key in palette:
                continue
            room -= self._width(key)
            if room < 0:
                break
            yield key
        yield from palette


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
        self.app.worker_changed(event)
