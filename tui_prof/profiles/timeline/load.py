"""One session → its Timeline, whatever its format; legacy tool files have no events.

Contract: `load_timeline(session)` raises NoEvents (a ProfileError) for sessions without
events, ProfileError with one line for files that cannot be read, Cancelled when cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from tui_prof.profiles.discover import Session
from tui_prof.profiles.load import session_of
from tui_prof.profiles.timeline.model import NoEvents, Timeline

NO_EVENTS = (
    "this session keeps no events (older TensorBoard tool files: step totals only), "
    "so it has no timeline"
)


def load_timeline(
    session: Session | str | Path,
    *,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
) -> Timeline:
    if not isinstance(session, Session):
        session = session_of(session)
    if session.format == "kineto":
        from tui_prof.profiles.timeline import kineto

        return kineto.read_session(session, cancel, progress)
    if session.format == "xplane":
        from tui_prof.profiles.timeline import xspace

        return xspace.read_session(session, cancel, progress)
    raise NoEvents(NO_EVENTS)
