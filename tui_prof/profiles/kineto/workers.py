"""Decode and collect a large trace's parts in worker processes, so a read is not one core's work.

Contract: `read(stream, collector, extras)` consumes a TraceStream and leaves `collector` and
`extras` exactly as `add(batch)` on every batch in this process would (the test reads every
sample and shared trace both ways). The first PARALLEL_FROM bytes of JSON are decoded here;
a longer trace starts `workers` child processes (`python -m tui_prof.profiles.kineto.workers`,
one end of a socket pair as stdin) and hands them its 4 MB parts undecoded, round robin, each
in a file in memory (see _Pool); each decodes its part (msgspec), collects it (Collector.add)
and picks the events the efficiency pass uses (Extras.pick), and, given a `rows` sink, the
Collector's loop also makes the timeline's rows (timeline/kineto_rows.py); the parts are merged here in file order
(Collector.merge maps names and threads to this collector's ids; the sink maps the rows' own).
Why: msgspec's decode holds the GIL and is ≈ 1.5× `zcat`'s CPU alone, so one process cannot
come within 2× of `zcat` (benchmarks/README.md, section 9).
A cut that is not between two events (`},{` inside a name) fails to decode in its worker; the
read then starts over in this process alone, where stream.py tries earlier cuts, as it does
when a worker cannot start or ends before its part is done. The workers are killed when the
read ends, fails or is cancelled (they also exit when their stdin closes).
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import os
import pickle
import select
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.columns import Part
from tui_prof.profiles.kineto.events import Event
from tui_prof.profiles.kineto.extras import Extras
from tui_prof.profiles.kineto.stream import RawPart, TraceStream, decode_events
from tui_prof.profiles.timeline.kineto_rows import PartRows

PARALLEL_FROM = 64 * 2**20  # JSON bytes decoded in this process before workers take over
START_FROM = PARALLEL_FROM // 2  # when the workers are started (they take ≈ 0.3 s to import)
# Four keep up with the parts the main process hands out (their 12-15 s of CPU on the 2 GiB
# trace, a quarter each, against its own 3-4 s) and hold 60-85 MB each: more would add memory
# rather than speed.
MAX_WORKERS = 4
IN_FLIGHT = 2  # parts per worker: one it decodes, one waiting in its pipe
ENV = "TUIPROF_READ_WORKERS"  # how many; 0 reads in this process alone
_HEADER = struct.Struct("<Q")
_POLL = 0.05  # seconds between looks at the cancel flag while a worker decodes


ROWS_FLAG = "--rows"  # a worker started with it also makes each part's timeline rows


class RowSink(Protocol):
    """Where the timeline's rows of each part go, in file order (timeline/kineto.RankRows)."""

    def add(self, part: PartRows) -> None: ...
    def reset(self) -> None: ...


class BadCut(Exception):
    """A part handed to a worker was not a list of events, or a worker could not start or
    ended: read again, in this process."""


@dataclass
class Folded:
    """One part, folded in a worker."""

    part: Part
    picked: list[Event]  # what Extras.pick chose
    skipped: int  # events dropped for fields of the wrong type
    rows: PartRows | None = None  # the timeline's rows, where asked for


def worker_count() -> int:
    """TUIPROF_READ_WORKERS, else one per core up to MAX_WORKERS."""
    try:
        return max(0, int(os.environ[ENV]))
    except (KeyError, ValueError):
        return min(MAX_WORKERS, os.cpu_count() or 1)


def read(
    stream: TraceStream,
    c: Collector,
    extras: Extras,
    *,
    workers: int | None = None,
    parallel_from: int = PARALLEL_FROM,
    rows: RowSink | None = None,
) -> tuple[Collector, Extras]:
    """Read the whole stream into `c` and `extras` (or, after a bad cut, into new ones: use
    what is returned); `rows`, where given, gets every part's timeline rows."""
    n = worker_count() if workers is None else workers
    pool: _Pool | None = None
    if rows is not None:  # the Collector's loop makes the rows
        c.index = True
    try:
        for part in stream.read_parts():
            if isinstance(part, list):
                if pool is not None:  # the last part: after every part before it
                    pool.drain()
                c.add(part)
                extras.add(part)
                if rows is not None:
                    rows.add(c.take_rows())
                if n and pool is None and stream.unpacked >= min(START_FROM, parallel_from):
                    pool = _Pool(n, c, extras, stream, rows)
                if pool is not None and stream.unpacked >= parallel_from:
                    stream.defer = True
            else:
                assert pool is not None
                pool.submit(part)
        if pool is not None:
            pool.drain()
    except BadCut:
        if pool is not None:
            pool.close()
            pool = None
        again = TraceStream(
            stream.path,
            cancel=stream.cancel,
            progress=stream.progress,
            chunk_bytes=stream.chunk_bytes,
            max_unpacked=stream.max_unpacked,
        )
        c, extras = Collector(index=rows is not None), Extras()
        if rows is not None:
            rows.reset()
        for batch in again.batches():
            c.add(batch)
            extras.add(batch)
            if rows is not None:
                rows.add(c.take_rows())
        stream.meta, stream.skipped, stream.parts = again.meta, again.skipped, again.parts
    finally:
        if pool is not None:
            pool.close()
    return c, extras


class _Pool:
    """Worker processes fed round robin; results merged in the order the parts were sent.

    Each part and each result travels as a file in memory (memfd) whose descriptor goes over a
    socket pair (the worker's stdin) with its size: the worker decodes the part where
    it lies (mapped), and no message ever waits for the other side to read it. Through pipes
    (64 kB a read) the worker's reading thread had to win the GIL back from its decoding
    thread (≈ 5 ms) for each 64 kB: parts crawled in, this process stalled writing them and
    the other worker stalled with its result unread, and two workers used one core between
    them (benchmarks/README.md, section 9).
    """

    def __init__(
        self, n: int, c: Collector, extras: Extras, stream: TraceStream, rows: RowSink | None
    ) -> None:
        self.c, self.extras, self.stream, self.rows = c, extras, stream, rows
        flags = [ROWS_FLAG] if rows is not None else []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.socks: list[socket.socket] = []
        self.sent = 0
        self.waiting: collections.deque[socket.socket] = collections.deque()
        try:
            for _ in range(n):
                mine, theirs = socket.socketpair()
                self.socks.append(mine)
                with theirs:
                    self.procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "tui_prof.profiles.kineto.workers", *flags],
                            stdin=theirs.fileno(),
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
        except OSError as exc:  # no interpreter to start (a frozen app), no processes left
            self.close()
            raise BadCut() from exc

    def submit(self, part: RawPart) -> None:
        sock = self.socks[self.sent % len(self.socks)]
        while len(self.waiting) >= IN_FLIGHT * len(self.socks):
            self._merge_oldest()
        try:
            _send(sock, part)
        except OSError as exc:  # it ended (could not import, killed): read in this process
            raise BadCut() from exc
        self.sent += 1
        self.waiting.append(sock)

    def _wait(self, sock: socket.socket) -> None:
        """Until `sock` can be read, noticing a cancelled read within a poll (a worker may be
        in the middle of a part for a second on a busy machine)."""
        while not select.select([sock], [], [], _POLL)[0]:
            self.stream._check()

    def drain(self) -> None:
        while self.waiting:
            self._merge_oldest()

    def _merge_oldest(self) -> None:
        self.stream._check()
        sock = self.waiting.popleft()
        self._wait(sock)
        try:
            blob = _receive(sock)
        except (OSError, ValueError) as exc:
            raise BadCut() from exc
        if blob is None:
            raise BadCut()
        with blob:
            folded = pickle.loads(blob)
        if folded is None:
            raise BadCut()
        assert isinstance(folded, Folded)
        self.c.merge(folded.part)
        self.extras.take(folded.picked)
        self.stream.skipped += folded.skipped
        if self.rows is not None and folded.rows is not None:
            self.rows.add(folded.rows)

    def close(self) -> None:
        """Kill the workers now (by their process ids) and reap them."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for s in self.socks:
            s.close()
        for p in self.procs:
            p.wait()
        self.procs.clear()
        self.socks.clear()
        self.waiting.clear()


def _scratch() -> int:
    """A new file in memory (memfd on Linux; elsewhere an unlinked temporary file)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("tuiprof-part", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


def _send(sock: socket.socket, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
    """`buffers`, one after another, as one message: written to a new file in memory, whose
    descriptor goes over `sock` with its size."""
    fd = _scratch()
    try:
        size = 0
        for b in buffers:
            with memoryview(b) as view:
                while view.nbytes:  # a file in memory takes a write whole; a signal may cut it
                    k = os.write(fd, view)
                    size += k
                    view = view[k:]
        socket.send_fds(sock, [_HEADER.pack(size)], [fd])
    finally:
        os.close(fd)


def _receive(sock: socket.socket) -> mmap.mmap | None:
    """The next message sent by _send, mapped (read-only); None where the other side ended."""
    data, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, 1, socket.MSG_WAITALL)
    try:
        if len(data) < _HEADER.size or not fds:
            return None
        (size,) = _HEADER.unpack(data)
        return mmap.mmap(fds[0], size, prot=mmap.PROT_READ)
    finally:
        for fd in fds:
            os.close(fd)


# -- the worker process --------------------------------------------------------------------


def fold(data: bytes | bytearray | memoryview, extras: Extras, rows: bool = False) -> Folded | None:
    """One part decoded and collected (and its timeline rows made, where `rows`); None where
    it is not a list of events (a bad cut)."""
    try:
        events, skipped = decode_events(data)
    except msgspec.DecodeError:
        return None
    c = Collector(index=rows)
    c.add(events)
    made = c.take_rows() if rows else None
    return Folded(c.export(), extras.pick(events), skipped, made)


def _serve(sock: socket.socket, rows: bool = False) -> None:
    """Fold the parts that come over `sock` until it closes, one at a time: a part is already
    here (mapped) when the last is done, and a result never waits to be read (_Pool)."""
    extras = Extras()  # its caches only: the events it picks go back
    while (data := _receive(sock)) is not None:
        # decoded where it lies: Raw args keep the mapping alive as long as they live
        folded: Any = fold(memoryview(data), extras, rows)
        del data
        _send(sock, [pickle.dumps(folded, protocol=pickle.HIGHEST_PROTOCOL)])
        del folded


def main() -> None:
    sock = socket.socket(fileno=os.dup(0))  # parts in, results out (_Pool)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # anything printed goes to stderr
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        _serve(sock, ROWS_FLAG in sys.argv[1:])


if __name__ == "__main__":  # run as imported, so what it pickles names this module, not __main__
    from tui_prof.profiles.kineto.workers import main as _main

    _main()
