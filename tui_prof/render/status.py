"""How a run's status looks, in `tuiprof run`'s live table and the TUI's run table alike.

Contract: one colour and one glyph per `RunStatus`; the glyph and the word carry the meaning, so
a terminal without colour loses nothing.
"""

from __future__ import annotations

from rich.text import Text

from tui_prof.model import RunStatus

RUN_STATUS_LOOK: dict[RunStatus, tuple[str, str]] = {
    RunStatus.PENDING: ("dim", "·"),
    RunStatus.QUEUED: ("cyan", "…"),  # on a cluster: submitted, waiting for a node
    RunStatus.RUNNING: ("bold cyan", "▶"),
    RunStatus.FINISHED: ("green", "✓"),
    RunStatus.FAILED: ("bold red", "✗"),
    RunStatus.TIMEOUT: ("bold red", "✗"),
    RunStatus.INTERRUPTED: ("yellow", "!"),
    RunStatus.STOPPED: ("yellow", "■"),
}


def status_text(status: str) -> Text:
    """`✓ finished` in green, `▶ running` in cyan, …; an unknown status plainly."""
    try:
        style, glyph = RUN_STATUS_LOOK[RunStatus(status)]
    except ValueError:
        return Text(status)
    return Text(f"{glyph} {status}", style=style)
