"""One session → ProfileSummary, whatever its format: the reader seam, behind the summary cache.

Contract: `load_summary(session)` is what the CLI and the TUI call. It picks the reader for the
session's `format` (see READERS), caches the result by (path, size, mtime) and raises
ProfileError with a one-line reason, or Cancelled when the cancel event is set. A new format is
a discover rule plus one module exposing `summarize(session, *, force_fallback, full, cancel,
progress) -> ProfileSummary`; readers are imported only when a session of theirs is read. A
reader that can take its steps from the runs of a named XLA program also accepts `step_program`
(only passed where the user names one).
"""

from __future__ import annotations

import importlib
import inspect
import threading
from pathlib import Path

from tui_prof.model import ProfileError, ProfileSummary, Progress, UnreadableProfile
from tui_prof.profiles import cache
from tui_prof.profiles.discover import Session, discover

# Session format (as discover names it) → the module that reads it.
READERS: dict[str, str] = {
    "xplane": "tui_prof.profiles.xplane.reader",
    "legacy": "tui_prof.profiles.legacy.reader",
    "kineto": "tui_prof.profiles.kineto.reader",
}


def session_of(path: str | Path) -> Session:
    """The one session a path names (a session directory or one profile file)."""
    found = discover(path).sessions
    if not found:
        raise ProfileError(f"{path}: no profile sessions here")
    if len(found) > 1:
        raise ProfileError(f"{path}: holds {len(found)} sessions; name one of them")
    return found[0]


def summarize_session(
    session: Session | str | Path,
    *,
    force_fallback: bool = False,
    full: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    step_program: str | None = None,
) -> ProfileSummary:
    """Analyse one session with its format's reader, without the cache."""
    if not isinstance(session, Session):
        session = session_of(session)
    module = READERS.get(session.format)
    if module is None:
        raise ProfileError(f"{session.path}: no reader for {session.format} profiles")
    reader = importlib.import_module(module)
    extra: dict[str, str] = {}
    if step_program:
        if "step_program" not in inspect.signature(reader.summarize).parameters:
            raise ProfileError(
                f"--step-program applies to XLA profiles (*.xplane.pb), not {session.format} ones"
            )
        extra["step_program"] = step_program
    try:
        summary: ProfileSummary = reader.summarize(
            session,
            force_fallback=force_fallback,
            full=full,
            cancel=cancel,
            progress=progress,
            **extra,
        )
    except RecursionError:  # a value nested deeper than any parser's stack (200,000 `[`)
        raise UnreadableProfile(
            f"{session.file_names}: nested too deeply to read (not a profile)"
        ) from None
    except (OverflowError, ValueError) as exc:  # a number no profile holds (1e400, NaN as an int)
        raise UnreadableProfile(
            f"{session.file_names}: damaged numbers ({type(exc).__name__}: {exc})"
        ) from None
    return summary


def load_summary(
    session: Session | str | Path,
    *,
    use_cache: bool = True,
    force_fallback: bool = False,
    full: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    step_program: str | None = None,
) -> ProfileSummary:
    """summarize_session through the on-disk cache."""
    sess = session if isinstance(session, Session) else session_of(session)

    def compute() -> ProfileSummary:
        return summarize_session(
            sess,
            force_fallback=force_fallback,
            full=full,
            cancel=cancel,
            progress=progress,
            step_program=step_program,
        )

    if not use_cache:
        return compute()
    variant = ("fallback" if force_fallback else "") + ("full" if full else "")
    if step_program:
        variant += f"|program={step_program}"
    return cache.cached_summary(sess, compute, variant=variant)
