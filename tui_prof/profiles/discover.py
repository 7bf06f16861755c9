"""Find profile sessions under a path without parsing any of them.

Contract: `discover(path)` accepts a TensorBoard logdir (runs nested at any depth), a run dir, a
session dir or one `*.xplane.pb` file, and returns runs → sessions → host files from directory
listings and `stat` alone. A session directory with no xplane but an older TensorBoard's tool
files (`<host>.overview_page.pb` and friends, or the TF1-era `*.overview_page.json`, see
LEGACY_SUFFIXES) is a "legacy" session.
PyTorch profiler traces (format "kineto") are found in the same walk: `*.pt.trace.json[.gz]` by
name, other `*.json[.gz]` by their head (profiles/kineto/detect.py: naming, sniffing and
grouping). A file given as the path is read as the format its name says, never sniffed: a
`*.xplane.pb`, a legacy tool file, or a `*.json[.gz]` as a PyTorch trace. Unreadable directories and symlink
loops become `problems`, never exceptions; only a path that does not exist (or holds no profile
at all) is an error for callers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tui_prof.printable import printable
from tui_prof.profiles.kineto import detect

XPLANE_SUFFIX = ".xplane.pb"
KINETO = "kineto"
# Tool files TensorFlow 2.2-2.3's profiler wrote itself, per host, in the order a host's primary
# file is chosen (the overview carries the steps); then the TF1-era Cloud TPU profiler's
# (capture_tpu_profile: Google Charts DataTable JSON, `<host>.overview_page.json` or a bare
# `overview_page.json`); the trace alone does not make a session.
LEGACY_SUFFIXES = (
    ".overview_page.pb",
    ".input_pipeline.pb",
    ".tensorflow_stats.pb",
    ".kernel_stats.pb",
    ".overview_page.json",
    ".input_pipeline.json",
)
LEGACY_TRACE_SUFFIX = ".trace.json.gz"
LEGACY_MEMORY_SUFFIX = ".memory_profile.json.gz"  # the memory profile tool's saved JSON
# Files that belong to a legacy host but do not make a session alone.
LEGACY_COMPANIONS = (LEGACY_TRACE_SUFFIX, LEGACY_MEMORY_SUFFIX)


@dataclass(frozen=True)
class HostFile:
    """One host's trace in a session: `<host>.xplane.pb` (or a legacy host's primary tool file,
    its other tool files in `extra`; size and mtime then cover them all)."""

    host: str
    path: Path
    size: int
    mtime: float
    extra: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Session:
    """One profile capture: a directory of per-host trace files (or per-rank traces), in one format."""

    name: str
    path: Path
    run: str
    hosts: tuple[HostFile, ...]
    format: str = "xplane"  # which reader reads it (profiles.load.READERS)

    @property
    def size(self) -> int:
        return sum(h.size for h in self.hosts)

    @property
    def has_events(self) -> bool:
        """Whether its files hold the events themselves (XSpace, Kineto), which the Timeline
        draws; the older TensorBoard tool files hold aggregates only."""
        return self.format in ("kineto", "xplane")

    @property
    def file_names(self) -> str:
        """Its files' names, printable, for a one-line error that names the file."""
        names = [h.path.name for h in self.hosts] or [self.path.name]
        return display_name(
            ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
        )


@dataclass(frozen=True)
class Run:
    """A TensorBoard run: the directory that holds `plugins/profile/<session>/`."""

    name: str
    path: Path
    sessions: tuple[Session, ...]


class Problem(str):
    """One line about a path that could not be listed or read ("PATH: cannot list (permission
    denied)"); a str, so it prints as is, that also keeps the path and the reason apart."""

    path: str
    reason: str
    unreadable: bool  # something that may hold profiles could not be read (not a skipped loop)

    def __new__(cls, path: Path, reason: str, unreadable: bool = True) -> Problem:
        shown = display_path(path)
        self = super().__new__(cls, f"{shown}: {reason}")
        self.path, self.reason, self.unreadable = shown, reason, unreadable
        return self


def _os_reason(exc: OSError) -> str:
    """As model.os_reason (this module imports nothing of tuiprof: it runs before anything)."""
    return (exc.strerror or str(exc)).lower()


@dataclass(frozen=True)
class Discovery:
    root: Path
    runs: tuple[Run, ...]
    problems: tuple[str, ...]

    @property
    def sessions(self) -> tuple[Session, ...]:
        return tuple(s for r in self.runs for s in r.sessions)


def display_name(name: str) -> str:
    """A file name as printable text: undecodable bytes (kept as surrogates by the OS layer) become
    U+FFFD, control characters their visible stand-ins (tui_prof.printable)."""
    return printable(name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def host_name(file_name: str) -> str:
    name = file_name[: -len(XPLANE_SUFFIX)] if file_name.endswith(XPLANE_SUFFIX) else file_name
    return display_name(name)


def _run_dir_of(session_dir: Path) -> Path:
    """TensorBoard's layout puts sessions at RUN/plugins/profile/SESSION."""
    parent = session_dir.parent
    if parent.name == "profile" and parent.parent.name == "plugins":
        return parent.parent.parent
    return parent


def _run_name(run_dir: Path, root: Path) -> str:
    try:
        rel = run_dir.relative_to(root)
    except ValueError:
        return display_name(run_dir.name or str(run_dir))
    if str(rel) == ".":  # sessions right under the opened directory: name the run after it
        return display_name(run_dir.resolve().name or str(run_dir))
    return display_name(rel.as_posix())


def display_path(path: Path) -> str:
    return display_name(os.fsdecode(path))


def _file_stat(e: os.DirEntry[str], problems: list[Problem]) -> os.stat_result | None:
    """A regular file's stat; None for anything else, and a problem where it cannot be read."""
    try:
        return e.stat() if e.is_file() else None
    except OSError as exc:
        problems.append(Problem(Path(e.path), f"cannot read ({_os_reason(exc)})"))
        return None


def _host_files(entries: list[os.DirEntry[str]], problems: list[Problem]) -> list[HostFile]:
    hosts = []
    for e in entries:
        if not e.name.endswith(XPLANE_SUFFIX):
            continue
        st = _file_stat(e, problems)
        if st is None:
            continue
        hosts.append(HostFile(host_name(e.name), Path(e.path), st.st_size, st.st_mtime))
    return sorted(hosts, key=lambda h: h.host)


def legacy_suffix(name: str) -> str | None:
    """The legacy tool suffix a file name ends with (a bare `overview_page.json` included)."""
    for suffix in (*LEGACY_SUFFIXES, *LEGACY_COMPANIONS):
        if name.endswith(suffix) or name == suffix[1:]:
            return suffix
    return None


def _legacy_hosts(
    entries: list[os.DirEntry[str]], d: Path, problems: list[Problem]
) -> list[HostFile]:
    """One HostFile per host of an older TensorBoard's tool files (no xplane in the directory)."""
    order = (*LEGACY_SUFFIXES, *LEGACY_COMPANIONS)
    files: dict[str, list[tuple[int, Path, os.stat_result]]] = {}
    for e in entries:
        suffix = legacy_suffix(e.name)
        if suffix is None:
            continue
        st = _file_stat(e, problems)
        if st is None:
            continue
        host = e.name[: -len(suffix)] if e.name.endswith(suffix) else ""
        files.setdefault(host, []).append((order.index(suffix), Path(e.path), st))
    hosts = []
    for host, found in files.items():
        found.sort(key=lambda f: f[0])
        if found[0][0] >= len(LEGACY_SUFFIXES):
            continue  # a trace or memory profile alone: not a session tuiprof can summarise
        hosts.append(
            HostFile(
                display_name(host or d.name),  # unprefixed TF1 files: the session's name
                found[0][1],
                sum(f[2].st_size for f in found),
                max(f[2].st_mtime for f in found),
                tuple(f[1] for f in found[1:]),
            )
        )
    return sorted(hosts, key=lambda h: h.host)


def _legacy_file(name: str) -> bool:
    return legacy_suffix(name) not in (None, *LEGACY_COMPANIONS)


def _kineto_sessions(
    entries: list[os.DirEntry[str]], d: Path, root: Path, problems: list[Problem], dir_taken: bool
) -> list[Session]:
    """The PyTorch trace sessions among one directory's entries."""
    candidates = [e for e in entries if e.name.endswith(detect.JSON_SUFFIXES)]
    if not candidates:  # the common case: nothing more to do for this directory
        return []
    files: list[detect.TraceFile] = []
    for e in candidates:
        try:
            if not e.is_file():
                continue
            # A TensorBoard session directory's JSON files are its trace viewer's, never
            # PyTorch's: only *.pt.trace.json names count there, nothing is opened.
            tf = detect.trace_file(e, sniff_plain=not dir_taken)
        except OSError as exc:
            problems.append(Problem(Path(e.path), f"cannot read ({_os_reason(exc)})"))
            continue
        if tf is not None:
            files.append(tf)
    if not files:
        return []
    groups = detect.group(files)
    run = _run_name(d, root)
    sessions = []
    for g in groups:
        hosts = tuple(HostFile(display_name(f.worker), f.path, f.size, f.mtime) for f in g.files)
        # One file is its own path; several (ranks) are the directory when nothing else there is
        # a session, else their first file (paths identify sessions in the TUI).
        alone = len(g.files) > 1 and len(groups) == 1 and not dir_taken
        path = d if alone else g.files[0].path
        sessions.append(Session(display_name(g.name), path, run, hosts, format=KINETO))
    return sessions


def _single_file(root: Path) -> Discovery:
    """`discover(FILE)`: one .xplane.pb, or one PyTorch trace whatever its name: the name decides
    (a `*.json[.gz]` is read as a trace, and its reader says so in one line where it is none)."""
    st = root.stat()
    session_dir = root.parent
    if root.name.endswith(XPLANE_SUFFIX):
        session = Session(
            display_name(session_dir.name),
            session_dir,
            display_name(_run_dir_of(session_dir).name),
            (HostFile(host_name(root.name), root, st.st_size, st.st_mtime),),
        )
        run_dir = _run_dir_of(session_dir)
        return Discovery(root, (Run(display_name(run_dir.name), run_dir, (session,)),), ())
    if not detect.is_json_name(root.name):
        raise FileNotFoundError(
            f"{display_path(root)}: not a profile (expected *{XPLANE_SUFFIX} or a PyTorch "
            "profiler trace, *.json[.gz])"
        )
    m = detect.PT_TRACE.match(root.name)
    span = int(m.group(2)[1:]) if m and m.group(2) else None
    worker = m.group(1) if m else detect.strip_json(root.name)
    tf = detect.TraceFile(root, worker, span, None, st.st_size, st.st_mtime)
    name = detect.group([tf])[0].name
    session = Session(
        display_name(name),
        root,
        display_name(session_dir.name),
        (HostFile(display_name(worker), root, st.st_size, st.st_mtime),),
        format=KINETO,
    )
    return Discovery(root, (Run(display_name(session_dir.name), session_dir, (session,)),), ())


def _loop_of(path: str) -> frozenset[str] | None:
    """The links of the symlink cycle `path` is in (absolute), or None if it is in none."""
    seen: list[str] = []
    p = os.path.abspath(path)
    for _ in range(64):
        if p in seen:
            return frozenset(seen[seen.index(p) :])
        seen.append(p)
        try:
            p = os.path.join(os.path.dirname(p), os.readlink(p))
            p = os.path.abspath(p)
        except OSError:
            return None
    return None


def _one_per_loop(problems: list[Problem]) -> list[Problem]:
    """A loop of two links (a -> b -> a) is one problem, not one per link."""
    out, loops = [], set()
    for p in problems:
        loop = _loop_of(p.path) if "symbolic links" in p.reason else None
        if loop is not None:
            if loop in loops:
                continue
            loops.add(loop)
        out.append(p)
    return out


def discover(path: str | os.PathLike[str]) -> Discovery:
    """List every session under `path`; raises FileNotFoundError if `path` does not exist."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{display_path(root)}: no such file or directory")
    problems: list[Problem] = []
    if root.is_file() and _legacy_file(root.name):
        found = discover(root.parent)
        session = next((s for s in found.sessions if s.path == root.parent), None)
        if session is None or session.format != "legacy":
            raise FileNotFoundError(f"{display_path(root)}: not a profile session")
        run_dir = _run_dir_of(root.parent)
        return Discovery(root, (Run(display_name(run_dir.name), run_dir, (session,)),), ())
    if root.is_file():
        return _single_file(root)

    by_run: dict[Path, list[Session]] = {}
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            st = d.stat()
        except OSError as exc:
            problems.append(Problem(d, f"cannot read ({_os_reason(exc)})"))
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            problems.append(
                Problem(d, "skipped, a symlink loop or a second link to a directory", False)
            )
            continue
        seen.add(key)
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError as exc:
            problems.append(Problem(d, f"cannot list ({_os_reason(exc)})"))
            continue
        hosts = _host_files(entries, problems)
        fmt = "xplane"
        if not hosts:
            hosts, fmt = _legacy_hosts(entries, d, problems), "legacy"
        if hosts:
            run_dir = _run_dir_of(d)
            by_run.setdefault(run_dir, []).append(
                Session(display_name(d.name), d, _run_name(run_dir, root), tuple(hosts), fmt)
            )
        torch_sessions = _kineto_sessions(entries, d, root, problems, bool(hosts))
        if torch_sessions:
            by_run.setdefault(d, []).extend(torch_sessions)
        for e in entries:
            try:
                if e.is_dir():
                    stack.append(Path(e.path))
            except OSError as exc:
                problems.append(Problem(Path(e.path), f"cannot read ({_os_reason(exc)})"))
    runs = tuple(
        Run(_run_name(run_dir, root), run_dir, tuple(sorted(sessions, key=lambda s: s.name)))
        for run_dir, sessions in sorted(by_run.items(), key=lambda kv: _run_name(kv[0], root))
    )
    return Discovery(root, runs, tuple(_one_per_loop(problems)))
