"""Names drawn in table cells: fitted to the width Rich gives the cell when it draws it.

The rules for shortening live in `names`; these renderables only ask them at draw time, so a
table whose column widths Rich decides still keeps what tells two names apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from tui_prof.render.names import cut_left, fit_kernels, fit_paths


class TailCut:
    """A path or scope drawn on one line, losing its head when the line is too short."""

    def __init__(self, text: str, style: str = "", sep: str = "/") -> None:
        self.text, self.style, self.sep = text, style, sep

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(len(self.text), 8), len(self.text))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(cut_left(self.text, options.max_width, self.sep), style=self.style)


class _SiblingCut:
    """One of several names fitted together (`_fit`) to the width Rich gives its cell when it
    draws it, so that names that differ still read apart; `_least` is the narrowest cell."""

    _least = 8

    def __init__(self, names: Sequence[str], index: int) -> None:
        self.names, self.index = names, index

    @staticmethod
    def _fit(names: Sequence[str], width: int, /) -> list[str]:
        raise NotImplementedError

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        n = len(self.names[self.index])
        return Measurement(min(n, self._least), n)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self._fit(self.names, options.max_width)[self.index])


class KernelCut(_SiblingCut):
    """One of several short kernel names (`fit_kernels`)."""

    _least = 12
    _fit = staticmethod(fit_kernels)


class PathsCut(_SiblingCut):
    """One of several scoped names (ops, `fit_paths`): each keeps its op and, where two would read
    the same, the scopes that tell them apart (`replica_4/…`)."""

    _fit = staticmethod(fit_paths)
