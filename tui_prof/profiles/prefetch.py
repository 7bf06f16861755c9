"""The first listing and the first session's summary, computed while the TUI loads.

Importing Textual and drawing the first frame take about as long as analysing a session, so the
launcher starts this before importing Textual and the browse screen picks the results up instead
of starting the same work after its first frame. The analysis itself (importing the converter
and running it, ~0.3 s of mostly GIL-holding work) runs in a child process (forked by
`profiles.forked` before Textual starts a thread, else `python -m tui_prof.profiles.prefetch
PATH`), which leaves its result in the summary cache: in a thread it took the GIL from Textual's
import and first frame and made both slower. The child's stdout is its progress, one
"fraction<TAB>text" line at a time (the step time among them, as soon as the converter's
overview has it), then `CACHED` once the summary is stored. `start` lists the path and starts
the child only where the cache does not hold the first session's summary; the thread here
follows the child, then reads the cache (or analyses itself when the child could not, so errors
are reported as always). UI-free: a process, a thread and events.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tui_prof.profiles import forked

if TYPE_CHECKING:  # imported where used: the child starts the converter's process before them
    from tui_prof.model import ProfileSummary
    from tui_prof.profiles.discover import Discovery, Session


CACHED = b"cached\n"  # the child's last line: its summary is in the cache
# The niceness of the analysis once the step time is out: the first screen shows that line, and
# the rest (op and kernel tables, memory profile) yields the cores to the TUI's own start.
REST_NICE = 10


class Prefetch:
    """Discovery of the path and the summary of its first session, computed meanwhile."""

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
        # the child's latest progress line (fraction, what it does): a large trace takes minutes
        self.progress: tuple[float, str] | None = None
        self.news = threading.Event()  # set at each new progress line and when analysed
        self._stopped = False
        self._child: forked.Child | None = None

    def start(self, *, child: bool = True) -> Prefetch:
        """List the path, then start the analysis of its first session; with `child`, an
        analysis the cache does not hold runs in a process of its own (see the module)."""
        # The listing and the cache's answer first (a few ms: neither imports the model nor
        # msgspec): a summary the cache holds needs no child, nor its converter's process, whose
        # ~0.1 s of CPU took the cores from Textual's import; a child that is needed is handed
        # the listing (it lists nothing and imports no listing code) and starts the converter.
        from tui_prof.profiles.discover import discover

        try:
            self.discovery = discover(self.path)
        except OSError:
            self.discovery = None  # the screen lists again and reports it
        if self.discovery is not None and self.discovery.sessions:
            self.session = self.discovery.sessions[0]
        self.listed.set()
        if child and self.session is not None and not cached(self.session):
            self._child = _spawn(self.path, self.discovery)
        threading.Thread(target=self._run, name="tuiprof-prefetch", daemon=True).start()
        return self

    def close(self) -> None:
        """Stop the child if it is still at work (not needed, or the app is closing)."""
        child = self._child
        if child is not None and child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGKILL)  # it only ever writes the cache atomically
            except (ProcessLookupError, PermissionError):
                # Just forked, its group not made yet (it has started nothing): itself alone.
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=2)

    def stop(self) -> None:
        """The session was left before its analysis ended: stop the child and analyse nothing
        here either."""
        self._stopped = True
        self.close()

    def _follow(self, child: forked.Child) -> None:
        """Read the child's progress lines until its summary is in the cache (it says so: its
        exit, and its converter's, take tens of ms more), or it ends."""
        if child.stdout is not None:
            for line in child.stdout:
                if line == CACHED:
                    return  # `close` ends it if it has not ended by then
                fraction, _, text = line.decode(errors="replace").rstrip("\n").partition("\t")
                with contextlib.suppress(ValueError):
                    self.progress = (float(fraction), text)
                    self.news.set()
        child.wait()

    def _run(self) -> None:
        from tui_prof.model import ProfileError

        try:
            if self.session is not None:
                from tui_prof.profiles.load import load_summary

                if self._child is not None:
                    self._follow(self._child)  # its summary is in the cache now (or it failed)
                if self._stopped:
                    return
                try:
                    self.summary = load_summary(self.session)
                except ProfileError as exc:
                    self.error = str(exc)
                except Exception as exc:  # shown like a bad file; never kills the app
                    self.error = f"unexpected error: {type(exc).__name__}: {exc}"
        finally:
            self.close()  # a child not waited for above is not needed (nor read: its pipe fills)
            self.analysed.set()
            self.news.set()


def cached(session: Session) -> bool:
    """Whether the cache holds this session's summary (then reading it is the quick way)."""
    from tui_prof.profiles.cache_keys import cache_key, cache_path

    try:
        return cache_path(cache_key(session)).is_file()
    except OSError:
        return False


def _spawn(path: Path, discovery: Discovery | None) -> forked.Child | None:
    """The child, forked where that is safe (the launcher runs one thread until Textual): then
    it has the listing already."""
    try:
        return forked.start(
            lambda: _child_main(str(path), discovery),
            ["-m", "tui_prof.profiles.prefetch", str(path)],
            stdin=False,
            stdout=True,  # progress lines: "fraction<TAB>what it does"; errors: the parent's
            new_session=True,  # its own process group: close() ends it and its children
        )
    except OSError:
        return None


STEP_TIME = "per step"  # in the progress line that carries the step time (step_time_words)


def _yield_to_the_screen() -> None:
    """The step time is out: this process and its converter's (its process group) yield the
    cores to the TUI's start, which they share (on 2 cores the first frame came after the step
    time). Only where this process leads its own group (the launcher's child), so a `python -m`
    run from a shell or a harness never changes its caller's priority."""
    if not sys.platform.startswith("linux") or os.getpgrp() != os.getpid():
        return
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) < REST_NICE:
            os.setpriority(os.PRIO_PGRP, 0, REST_NICE)


def _holds_xspace(path: Path) -> bool:
    """Whether `path` is or holds an `*.xplane.pb` file: a listing, no tuiprof imports."""
    if path.name.endswith(".xplane.pb"):
        return True
    try:
        return path.is_dir() and next(path.rglob("*.xplane.pb"), None) is not None
    except OSError:
        return False


def _child_main(path: str, discovery: Discovery | None = None) -> int:
    """Analyse the first session under `path` into the summary cache (listed by the parent, or
    here); print only its progress (each whole per mille once)."""
    from tui_prof.profiles.xplane import convert_worker

    convert_worker.MEMORY_BESIDE = False  # the step time first: see there
    # The converter's process starts first, before this one imports and lists anything
    # (~50 ms), where the path holds an XSpace file at all: it is the longest part of the work.
    if discovery is not None:
        xspace = bool(discovery.sessions) and discovery.sessions[0].format == "xplane"
    else:
        xspace = _holds_xspace(Path(path))
    worker = convert_worker.process() if xspace else None
    if worker is not None:
        worker.start()
    from tui_prof.model import ProfileError

    if discovery is None:
        from tui_prof.profiles.discover import discover

        discovery = discover(Path(path))
    found = discovery.sessions
    done = not found or cached(found[0])
    if worker is not None and (done or found[0].format != "xplane"):
        worker.abandon()  # not needed: the first session is not XSpace, or is read already
    if done:
        return 0
    if worker is not None and found[0].size < convert_worker.large_profile_bytes():
        worker.ask_ahead([h.path for h in found[0].hosts])  # while the readers are imported
    from tui_prof.profiles.load import load_summary

    last: list[tuple[int, str]] = []

    def progress(fraction: float, text: str) -> None:
        step = (int(fraction * 1000), text)
        if not last or step != last[0]:
            last[:] = [step]
            with contextlib.suppress(OSError):  # the parent stopped reading: no matter
                sys.stdout.write(f"{fraction:.4f}\t{' '.join(text.split())}\n")
                sys.stdout.flush()
            if STEP_TIME in text:
                _yield_to_the_screen()

    try:
        load_summary(found[0], progress=progress)
    except ProfileError:
        return 1
    with contextlib.suppress(OSError):
        sys.stdout.write(CACHED.decode())
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main(sys.argv[1]))
