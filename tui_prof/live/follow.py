"""Follow a logdir while a job writes into it: new runs, sessions, profiles and metrics, live.

Contract: `iter_changes(root, stop=...)` yields lists of `FollowEvent` as files appear or change
under `root`, about a second after they do, through OS file watching (watchfiles: inotify,
FSEvents, ReadDirectoryChanges), not busy polling. A profile (`*.xplane.pb`, PyTorch's
`*.pt.trace.json[.gz]`) is reported only once it is complete: its size and mtime held still for
`settle_s` and its protobuf framing reaches the end of the file (a JSON trace: it ends with `}`),
so a half-written copy is never handed to a parser. Metrics (`*.jsonl`) and
TensorBoard event files (`*tfevents*`) are reported on every change (they only ever grow; a
reader must ignore a trailing partial line). Nothing here raises for a vanished, unreadable or
not-yet-created directory: the follower waits for it and carries on. Stop it with `stop`.

For a Textual thread worker, `LogdirFollower(root, on_change).run(stop)` blocks in the worker
and calls `on_change(events)` from it (post a message from there; never touch widgets), or
`LogdirFollower(...).start()` runs it on its own daemon thread until `.stop()`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import watchfiles

XPLANE_SUFFIX = ".xplane.pb"
# How long a new directory is re-walked on each tick (inotify watches it only once it exists).
FRESH_DIR_S = 3.0

# Kinds of FollowEvent, in the order a batch lists them for one new profile.
RUN, SESSION, PROFILE, METRICS, TFEVENTS, REMOVED = (
    "run",
    "session",
    "profile",
    "metrics",
    "tfevents",
    "removed",
)


@dataclass(frozen=True)
class FollowEvent:
    """Something new under the followed root.

    kind: "run" (a run directory seen for the first time; path is the run dir), "session" (a
    session directory got its first complete profile; path is the session dir), "profile" (a
    complete `*.xplane.pb`, new or rewritten), "metrics" (`*.jsonl` created or grown),
    "tfevents" (a TensorBoard event file created or grown), "removed" (a file we reported is
    gone). `run_dir` is the run the path belongs to (TensorBoard's RUN/plugins/profile/SESSION).
    """

    kind: str
    path: Path
    run_dir: Path


KINETO_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")  # PyTorch's profiler (Kineto)


def _kind_of(path: Path) -> str | None:
    name = path.name
    if name.endswith(XPLANE_SUFFIX) or name.endswith(KINETO_SUFFIXES):
        return PROFILE
    if name.endswith(".jsonl"):
        return METRICS
    if "tfevents" in name:
        return TFEVENTS
    return None


def run_dir_of(path: Path) -> Path:
    """The run a file belongs to: RUN for RUN/plugins/profile/SESSION/x.xplane.pb, else its dir."""
    parent = path.parent
    if path.name.endswith(XPLANE_SUFFIX):
        profile = parent.parent
        if profile.name == "profile" and profile.parent.name == "plugins":
            return profile.parent.parent
        return profile
    return parent


def profile_complete(path: Path) -> bool:
    """Whether a profile file that held still looks whole: an XSpace's framing, a Kineto JSON's
    closing brace (a gzip's size holding still is all there is to go by without reading it)."""
    if path.name.endswith(".json"):
        try:
            with open(path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 64))
                return f.read().rstrip().endswith(b"}")
        except OSError:
            return False
    if path.name.endswith(".gz"):
        return True
    return xplane_framing_complete(path)


def xplane_framing_complete(path: Path) -> bool:
    """True when the file's top-level protobuf fields end exactly at end of file.

    A truncated XSpace almost always cuts a length-delimited field (an XPlane) short, so this
    spots a half-written file by reading only the few top-level headers, never the payload.
    """
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return False
            pos = 0
            while pos < size:
                key, pos = _varint(fh, pos)
                wire = key & 7
                if key >> 3 == 0:
                    return False
                if wire == 0:
                    _, pos = _varint(fh, pos)
                elif wire == 1:
                    pos += 8
                elif wire == 2:
                    length, pos = _varint(fh, pos)
                    pos += length
                elif wire == 5:
                    pos += 4
                else:
                    return False
                fh.seek(pos)
            return pos == size
    except (OSError, ValueError):
        return False


def _varint(fh: object, pos: int) -> tuple[int, int]:
    """Read one protobuf varint at the current offset; ValueError at EOF or when too long."""
    result = shift = 0
    read = fh.read  # type: ignore[attr-defined]
    for _ in range(10):
        b = read(1)
        if not b:
            raise ValueError("truncated varint")
        pos += 1
        result |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return result, pos
        shift += 7
    raise ValueError("varint too long")


class _Tracker:
    """Turns raw file-change notices into FollowEvents, holding profiles until they settle."""

    def __init__(self, root: Path, settle_s: float) -> None:
        self.root = root
        self.settle_s = settle_s
        self.known_runs: set[Path] = set()
        self.known_sessions: set[Path] = set()
        self.reported: dict[Path, tuple[int, int]] = {}
        self.pending: dict[Path, tuple[tuple[int, int], float]] = {}
        self.fresh_dirs: dict[Path, float] = {}

    def baseline(self, since: float | None) -> list[FollowEvent]:
        """Remember what exists now, silently, except files changed at or after `since`.

        Recent profiles stay pending in case they are still being written.
        """
        now = time.time()
        later: set[Path] = set()
        for path in _walk(self.root):
            kind, st = _kind_of(path), _stat(path)
            if st is not None and since is not None and st[1] / 1e9 >= since:
                later.add(path)
            elif st is not None:
                self.known_runs.add(run_dir_of(path))
                if kind == PROFILE:
                    self.known_sessions.add(path.parent)
                    if now - st[1] / 1e9 < 5.0 or not profile_complete(path):
                        self.pending[path] = (st, time.monotonic())
                        continue
                self.reported[path] = st
        return self.notice(later)

    def notice(self, paths: set[Path]) -> list[FollowEvent]:
        """Handle paths the watcher says changed (added, modified or deleted).

        A new directory is walked now and for a few seconds after: files written into it
        before the OS watch on it was in place raise no event of their own.
        """
        events: list[FollowEvent] = []
        now = time.monotonic()
        for path in list(paths):
            if _kind_of(path) is None and _is_dir(path):
                self.fresh_dirs[path] = now
        self.fresh_dirs = {d: t for d, t in self.fresh_dirs.items() if now - t < FRESH_DIR_S}
        for d in self.fresh_dirs:
            paths |= _walk(d)
        for path in sorted(paths):
            kind = _kind_of(path)
            if kind is None:
                continue
            st = _stat(path)
            if st is None:
                self.pending.pop(path, None)
                if self.reported.pop(path, None) is not None:
                    events.append(FollowEvent(REMOVED, path, run_dir_of(path)))
                if kind == PROFILE and not _is_dir(path.parent):
                    self.known_sessions.discard(path.parent)  # recreated: announce it again
                continue
            if kind == PROFILE:
                if self.reported.get(path) != st and self.pending.get(path, (None,))[0] != st:
                    self.pending[path] = (st, now)
            elif self.reported.get(path) != st:
                self.reported[path] = st
                events.extend(self._new(path, kind))
        return events

    def settle(self) -> list[FollowEvent]:
        """Report pending profiles whose size and mtime held still for settle_s."""
        events: list[FollowEvent] = []
        now = time.monotonic()
        for path, (seen, since) in list(self.pending.items()):
            st = _stat(path)
            if st is None:
                del self.pending[path]
                continue
            if st != seen:
                self.pending[path] = (st, now)
                continue
            if now - since < self.settle_s or not profile_complete(path):
                continue
            del self.pending[path]
            if self.reported.get(path) != st:
                self.reported[path] = st
                events.extend(self._new(path, PROFILE))
        return events

    def _new(self, path: Path, kind: str) -> list[FollowEvent]:
        run = run_dir_of(path)
        events = []
        if run not in self.known_runs:
            self.known_runs.add(run)
            events.append(FollowEvent(RUN, run, run))
        if kind == PROFILE and path.parent not in self.known_sessions:
            self.known_sessions.add(path.parent)
            events.append(FollowEvent(SESSION, path.parent, run))
        events.append(FollowEvent(kind, path, run))
        return events


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if os.path.isfile(path) else None


def _is_dir(path: Path) -> bool:
    """Path.is_dir() without the PermissionError it raises for an unreadable parent."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _walk(root: Path) -> set[Path]:
    found: set[Path] = set()
    for dirpath, _dirs, files in os.walk(root, onerror=lambda _e: None):
        found.update(Path(dirpath) / n for n in files if _kind_of(Path(n)) is not None)
    return found


def _watch_filter(change: watchfiles.Change, path: str) -> bool:
    if _kind_of(Path(path)) is not None:
        return True
    return change == watchfiles.Change.added and os.path.isdir(path)


def iter_changes(
    root: str | os.PathLike[str],
    *,
    stop: threading.Event | None = None,
    settle_s: float = 0.5,
    tick_s: float = 0.2,
    since: float | None = None,
    on_error: Callable[[str], None] | None = None,
) -> Iterator[list[FollowEvent]]:
    """Yield non-empty batches of FollowEvents under `root` until `stop` is set.

    Reports what changes once iteration begins, plus files modified at or after `since` (a
    `time.time()`, e.g. when the caller listed the logdir, so nothing falls in between);
    everything older is the caller's to discover.
    `tick_s` is how often pending profiles are re-checked; `on_error` hears why watching
    paused (root missing or unreadable), once per distinct reason.
    """
    stop = stop or threading.Event()
    base = Path(root).expanduser().absolute()
    tracker = _Tracker(base, settle_s)
    last_error = ""

    def problem(text: str) -> None:
        nonlocal last_error
        if text != last_error and on_error is not None:
            on_error(text)
        last_error = text

    baselined = False
    while not stop.is_set():
        if not _is_dir(base):
            problem(f"{base}: not there (yet) or not readable; waiting for it")
            stop.wait(1.0)  # only a missing root is polled: there is nothing to watch yet
            continue
        if not baselined:
            events = tracker.baseline(since)
            baselined = True
            if events:
                yield events
        else:  # back after a pause: what appeared meanwhile raised no file events
            events = tracker.notice(_walk(base)) + tracker.settle()
            if events:
                yield events
        try:
            watching = False
            for changes in watchfiles.watch(
                base,
                watch_filter=_watch_filter,
                debounce=400,
                step=50,
                stop_event=stop,
                rust_timeout=int(tick_s * 1000),
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                last_error = ""
                paths = {Path(p) for _c, p in changes}
                if not watching:  # the OS watch is in place only now: what was written since
                    watching = True  # the walk above raised no event, so walk once more
                    paths |= _walk(base)
                events = tracker.notice(paths)
                events += tracker.settle()
                if events:
                    yield events
                if not _is_dir(base):
                    break
        except (OSError, RuntimeError) as exc:  # watchfiles raises these for a vanished root
            problem(f"{base}: watching paused ({exc})")
            stop.wait(1.0)


class LogdirFollower:
    """Calls `on_change(events)` for each batch under `root`, on a worker or its own thread."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        on_change: Callable[[list[FollowEvent]], object],
        *,
        settle_s: float = 0.5,
        since: float | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.since = since
        self.on_change = on_change
        self.settle_s = settle_s
        self.on_error = on_error
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, stop: threading.Event | None = None) -> None:
        """Block until `stop` (or `.stop()`) is set; for `@work(thread=True)` workers."""
        if stop is not None:
            self._stop = stop
        for events in iter_changes(
            self.root,
            stop=self._stop,
            settle_s=self.settle_s,
            since=self.since,
            on_error=self.on_error,
        ):
            self.on_change(events)

    def start(self) -> LogdirFollower:
        """Run on a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.run, name="tuiprof-follow", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to end and wait for the thread, if `start()` made one."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
