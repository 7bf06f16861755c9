"""One session → its Timeline, whatever its format; legacy tool files have no events.

Contract: `load_timeline(session)` raises NoEvents (a ProfileError) for sessions without
events, ProfileError with one line for files that cannot be read, Cancelled when cancelled.
A session read once is stored (timeline.store) and later opened from the store, mapped; a
Kineto session's store is written by its summary's read (timeline/kineto.py), as is a large
XSpace session's (xplane/reader.py), so their first timeline opens from there too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from tui_prof.model import ProfileError
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
    if not session.has_events:
        raise NoEvents(NO_EVENTS)
    from tui_prof.profiles.timeline import store

    kept = store.load(session)
    if kept is not None:
        return kept
    if session.format == "kineto":  # both written to the store as they are read
        from tui_prof.profiles.timeline.kineto import read_session
    else:
        from tui_prof.profiles.timeline.xspace import read_session
    unstored = read_session(session, cancel, progress)
    if unstored is not None:
        return unstored
    stored = store.load(session)
    if stored is None:
        raise ProfileError(f"{session.path}: the timeline's store could not be read back")
    return stored
