"""An XSpace session's timeline (not read yet)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tui_prof.model import ProfileError
from tui_prof.profiles.discover import Session
from tui_prof.profiles.timeline.model import Timeline


def read_session(
    session: Session,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
) -> Timeline:
    raise ProfileError("the timeline reads PyTorch (Kineto) traces so far; XSpace comes next")
