"""Which files are PyTorch profiler (Kineto) traces, and which of them form one session.

Contract: cheap enough for listing a logdir (discovery of 1,000 sessions is benchmarked): names
decide for `<worker>[.<timestamp>].pt.trace.json[.gz]` (torch.profiler's
tensorboard_trace_handler; the pattern is torch-tb-profiler's WORKER_PATTERN, consts.py); any
other `*.json[.gz]` met in a directory walk is a trace when its head reads as one (a
`schemaVersion` and a trace key, or `traceEvents` with a Kineto category: Chrome traces of other
tools, such as JAX's Perfetto export, do not qualify). The head is SNIFF_BYTES, read on up to
SNIFF_LIMIT only while it is a JSON object that has not yet reached `traceEvents` (a large leading
`metadata` object): other files cost one small read. A file named on the command line is not
sniffed: its name decides (profiles/discover.py). Grouping follows the plugin's RunLoader (loader.py): in one
directory, the n-th timestamp of every worker is one session, its workers the session's ranks;
other names group when they differ only in one number and their heads name distinct ranks
(`rank-0.json.gz`, `rank-1.json.gz`). Nothing here parses a trace or imports msgspec.
"""

from __future__ import annotations

import os
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

PT_TRACE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$")
SNIFF_BYTES = 16 * 1024
SNIFF_LIMIT = 1024 * 1024  # how far a head may be read to reach traceEvents
_TAIL_NEEDED = 4096  # bytes after "traceEvents" that must be seen before a verdict
_HAS_TRACE_KEY = re.compile(rb'"(traceEvents|deviceProperties|distributedInfo)"')
_KINETO_CAT = re.compile(
    rb'"cat"\s*:\s*"(cpu_op|user_annotation|gpu_user_annotation|cuda_runtime|cuda_driver|kernel'
    rb'|gpu_memcpy|gpu_memset|python_function|Operator|Runtime|Kernel|Memcpy|Memset|DataLoader)"'
)
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
_LAST_NUMBER = re.compile(r"\d+(?=\D*$)")


@dataclass(frozen=True)
class TraceFile:
    """A Kineto trace found in a directory listing."""

    path: Path
    worker: str  # the host/rank name shown for it
    span: int | None  # tensorboard_trace_handler's timestamp, if the name has one
    rank: int | None  # from the head's distributedInfo (plain names only)
    size: int
    mtime: float


@dataclass(frozen=True)
class Group:
    """The files of one session and its name."""

    name: str
    files: tuple[TraceFile, ...]


JSON_SUFFIXES = (".json", ".json.gz")


def is_json_name(name: str) -> bool:
    return name.endswith(JSON_SUFFIXES)


def strip_json(name: str) -> str:
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_head(path: Path, size: int = SNIFF_BYTES) -> bytes:
    """The first `size` unpacked bytes of a file, gzip or not; b"" when it cannot be read."""
    try:
        with open(path, "rb") as raw:
            data = raw.read(size)
            if not data.startswith(b"\x1f\x8b"):
                return data
            # A gzip head: inflate only what the first bytes hold (no gzip module import).
            d = zlib.decompressobj(wbits=31)
            out = d.decompress(data, size)
            while len(out) < size and not d.eof:
                more = raw.read(size)
                if not more:
                    break
                out += d.decompress(d.unconsumed_tail + more, size - len(out))
            return out
    except (OSError, zlib.error):
        return b""


def looks_like_kineto(head: bytes) -> bool:
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not body.startswith(b"{"):
        return False
    if b'"schemaVersion"' in body and _HAS_TRACE_KEY.search(body):
        return True
    return b'"traceEvents"' in body and _KINETO_CAT.search(body) is not None


def head_rank(head: bytes) -> int | None:
    m = _RANK.search(head)
    return int(m.group(1)) if m else None


def _undecided(head: bytes, size: int) -> bool:
    """A JSON object head that ends before its traceEvents (and their categories) show."""
    if len(head) < size or looks_like_kineto(head):
        return False  # the whole file was read, or it is a trace
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return False
    at = head.find(b'"traceEvents"')
    return at < 0 or len(head) - at < _TAIL_NEEDED


def sniff_head(path: Path) -> bytes:
    """The head sniffing decides on: SNIFF_BYTES, or more (up to SNIFF_LIMIT) while undecided."""
    size = SNIFF_BYTES
    head = read_head(path, size)
    while size < SNIFF_LIMIT and _undecided(head, size):
        size = min(size * 4, SNIFF_LIMIT)
        head = read_head(path, size)
    return head


def sniff(path: Path) -> tuple[bool, int | None]:
    """(is a Kineto trace, its rank if the head says) from its head (see sniff_head)."""
    head = sniff_head(path)
    return (True, head_rank(head)) if looks_like_kineto(head) else (False, None)


def span_label(span: int) -> str:
    """tensorboard_trace_handler's timestamp (ms, or ns in newer torch) as a session name."""
    seconds = span / 1e9 if span >= 10**15 else span / 1e3 if span >= 10**11 else float(span)
    try:
        return time.strftime("%Y_%m_%d_%H_%M_%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):
        return str(span)


def trace_file(entry: os.DirEntry[str], *, sniff_plain: bool = True) -> TraceFile | None:
    """The TraceFile an entry is, or None (not a Kineto name, or a JSON whose head is not)."""
    name = entry.name
    m = PT_TRACE.match(name)
    rank = None
    if m is None and not (sniff_plain and is_json_name(name)):
        return None
    st = entry.stat()
    if m is None:
        if st.st_size == 0:
            return None
        ok, rank = sniff(Path(entry.path))
        if not ok:
            return None
    worker = m.group(1) if m else strip_json(name)
    span = int(m.group(2)[1:]) if m and m.group(2) else None
    return TraceFile(Path(entry.path), worker, span, rank, st.st_size, st.st_mtime)


def group(files: list[TraceFile]) -> list[Group]:
    """Sessions of one directory's traces (see the module's contract)."""
    groups: list[Group] = []
    named = [f for f in files if PT_TRACE.match(f.path.name)]
    plain = [f for f in files if not PT_TRACE.match(f.path.name)]
    by_worker: dict[str, list[TraceFile]] = {}
    for f in named:
        by_worker.setdefault(f.worker, []).append(f)
    by_index: dict[int, list[TraceFile]] = {}
    for worker_files in by_worker.values():
        worker_files.sort(key=lambda f: (f.span is not None, f.span or 0))
        for i, f in enumerate(worker_files):
            by_index.setdefault(i, []).append(f)
    for i in sorted(by_index):
        members = sorted(by_index[i], key=lambda f: f.worker)
        spans = [f.span for f in members if f.span is not None]
        name = span_label(min(spans)) if spans else "pt.trace"
        groups.append(Group(name, tuple(members)))
    by_pattern: dict[str, list[TraceFile]] = {}
    for f in plain:
        by_pattern.setdefault(_LAST_NUMBER.sub("*", f.worker, count=1), []).append(f)
    for pattern, members in sorted(by_pattern.items()):
        ranks = [f.rank for f in members]
        if len(members) > 1 and None not in ranks and len(set(ranks)) == len(ranks):
            members.sort(key=lambda f: f.rank or 0)
            groups.append(Group(pattern, tuple(members)))
        else:
            groups.extend(Group(f.worker, (f,)) for f in sorted(members, key=lambda f: f.worker))
    return groups
