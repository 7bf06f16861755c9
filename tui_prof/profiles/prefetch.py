"""The first listing and the first session's summary, computed in a thread while the TUI loads.

Importing Textual and drawing the first frame take about as long as analysing a session, so the
launcher starts this before importing Textual and the browse screen picks the results up instead
of starting the same work after its first frame. UI-free: plain threads and events.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tui_prof.model import ProfileError, ProfileSummary
from tui_prof.profiles.discover import Discovery, Session, discover


class Prefetch:
    """Discovery of the path and the summary of its first session, computed in a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started_at = time.time()  # the follower reports anything written after this
        self.listed = threading.Event()
        self.analysed = threading.Event()
        self.discovery: Discovery | None = None
        self.session: Session | None = None
        self.summary: ProfileSummary | None = None
        self.error: str | None = None
        self.listing_used = False  # the browse screen took the discovery
        self.used = False  # the browse screen took (or waited for) the summary

    def start(self) -> Prefetch:
        threading.Thread(target=self._run, name="tuiprof-prefetch", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            self.discovery = discover(self.path)
        except OSError:
            self.discovery = None  # the screen lists again and reports it
        self.listed.set()
        try:
            if self.discovery is not None and self.discovery.sessions:
                from tui_prof.profiles.load import load_summary

                self.session = self.discovery.sessions[0]
                try:
                    self.summary = load_summary(self.session)
                except ProfileError as exc:
                    self.error = str(exc)
                except Exception as exc:  # shown like a bad file; never kills the app
                    self.error = f"unexpected error: {type(exc).__name__}: {exc}"
        finally:
            self.analysed.set()
