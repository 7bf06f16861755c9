"""One session → ProfileSummary, whatever its format: the reader seam, behind the summary cache.

Contract: `load_summary(session)` is what the CLI and the TUI call. It picks the reader for the
session's `format` (see READERS), caches the result by (path, size, mtime) and raises
ProfileError with a one-line reason, or Cancelled when the cancel event is set. A new format is
a discover rule plus one module that is a `Reader` (its `summarize`), named in READERS; readers
are imported only when a session of theirs is read. A reader that can take its steps from the
runs of a named XLA program is a `ProgramReader` and says so in READERS (`step_program` is only
passed where the user names one). mypy checks every reader module against its protocol.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from tui_prof.model import ProfileError, ProfileSummary, Progress, UnreadableProfile
from tui_prof.printable import printable_fields
from tui_prof.profiles import cache
from tui_prof.profiles.discover import Session, discover


class Reader(Protocol):
    """A profile format's reader: one session in, its summary out (ProfileError, Cancelled)."""

    def summarize(
        self,
        session: Session,
        *,
        force_fallback: bool = False,
        full: bool = False,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
    ) -> ProfileSummary: ...


class ProgramReader(Protocol):
    """A reader that can also take its steps from the runs of a named XLA program."""

    def summarize(
        self,
        session: Session,
        *,
        force_fallback: bool = False,
        full: bool = False,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
        step_program: str | None = None,
    ) -> ProfileSummary: ...


@dataclass(frozen=True)
class ReaderEntry:
    module: str  # imported when a session of this format is read
    step_programs: bool = False  # a ProgramReader


# Session format (as discover names it) → the module that reads it.
READERS: dict[str, ReaderEntry] = {
    "xplane": ReaderEntry("tui_prof.profiles.xplane.reader", step_programs=True),
    "legacy": ReaderEntry("tui_prof.profiles.legacy.reader"),
    "kineto": ReaderEntry("tui_prof.profiles.kineto.reader"),
}

if TYPE_CHECKING:  # each reader module is checked against its protocol, never imported here
    from tui_prof.profiles.kineto import reader as _kineto
    from tui_prof.profiles.legacy import reader as _legacy
    from tui_prof.profiles.xplane import reader as _xplane

    _xplane_reader: ProgramReader = _xplane
    _legacy_reader: Reader = _legacy
    _kineto_reader: Reader = _kineto


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
    entry = READERS.get(session.format)
    if entry is None:
        raise ProfileError(f"{session.path}: no reader for {session.format} profiles")
    module = importlib.import_module(entry.module)
    if step_program and not entry.step_programs:
        raise ProfileError(
            f"--step-program applies to XLA profiles (*.xplane.pb), not {session.format} ones"
        )
    try:
        if step_program:
            summary = cast(ProgramReader, module).summarize(
                session,
                force_fallback=force_fallback,
                full=full,
                cancel=cancel,
                progress=progress,
                step_program=step_program,
            )
        else:
            summary = cast(Reader, module).summarize(
                session, force_fallback=force_fallback, full=full, cancel=cancel, progress=progress
            )
    except RecursionError:  # a value nested deeper than any parser's stack (200,000 `[`)
        raise UnreadableProfile(
            f"{session.file_names}: nested too deeply to read (not a profile)"
        ) from None
    except (OverflowError, ValueError) as exc:  # a number no profile holds (1e400, NaN as an int)
        raise UnreadableProfile(
            f"{session.file_names}: damaged numbers ({type(exc).__name__}: {exc})"
        ) from None
    # Every name from the file printable, whatever a reader added after assemble (e.g. GPU names)
    return printable_fields(summary)


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
