"""The Rich console the CLI prints through: every text segment made printable on the way out.

Why: names are made printable where they enter (tui_prof.printable), but a table of an older
store's metrics or an error naming a file could still carry a raw escape sequence; this is the
last gate before the terminal. Rich's own control segments (colours, cursor moves) pass untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from tui_prof.printable import printable


class SafeConsole(Console):
    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable():
                yield segment
            else:
                text = printable(segment.text, multiline=True)
                yield Segment(text, segment.style, segment.control)
