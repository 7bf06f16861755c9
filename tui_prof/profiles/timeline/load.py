"""One session → its Timeline, whatever its format; legacy tool files have no events.

Contract: `load_timeline(session)` raises NoEvents (a ProfileError) for sessions without
events, ProfileError with one line for files that cannot be read, Cancelled when cancelled.
A session read once is stored (timeline.store) and later opened from the store, mapped.
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
    if session.format not in ("kineto", "xplane"):
        raise NoEvents(NO_EVENTS)
    from tui_prof.profiles.timeline import store

    kept = store.load(session)
    if kept is not None:
        return kept
    if session.format == "kineto":
        from tui_prof.profiles.timeline import kineto

        tl = kineto.read_session(session, cancel, progress)
    else:
        from tui_prof.profiles.timeline import xspace

        tl = xspace.read_session(session, cancel, progress)
    store.save(session, tl)
    return store.load(session) or tl  # mapped: the read's arrays are let go
