"""Read a Kineto trace (`.json` or gzip) as batches of typed events, in bounded memory.

Contract: `TraceStream(path).batches()` yields lists of `Event` and, once exhausted, leaves the
trace's metadata in `.meta`; anything unreadable raises ProfileError with one line (truncated
gzip, not JSON, JSON that is not a trace, no event boundary where one must be). Memory stays
near two chunks (CHUNK_BYTES of unpacked JSON plus its decoded events) whatever the file's size:
the `traceEvents` array is cut between two events, in place (the byte after a cut becomes `]`,
the comma before the next part `[`), and each part decoded by msgspec into structs that keep
only the fields tuiprof reads. A cut that is not between two events cannot decode (it would end
inside a string or an object), so a wrong guess is detected and an earlier one tried.

Why msgspec and not orjson (both fast, well kept C libraries): on the plugin's 35 MB sample,
orjson builds a dict per event (0.54 s, 225 MB peak), msgspec's typed decode only the fields
named in events.py (0.17 s, 96 MB peak); neither streams, which the chunking above adds.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from tui_prof.model import Cancelled, ProfileError
from tui_prof.profiles.kineto.events import (
    PHASES,
    RAW_ARGS,
    AnyEvent,
    Event,
    Flow,
    Meta,
    Trace,
    events_of,
)
from tui_prof.profiles.kineto.inflate import Inflater

# An undecoded part (`defer`): its bytes are these buffers' one after another, valid until the
# next part is asked for.
RawPart = tuple[bytes | bytearray | memoryview, ...]
CHUNK_BYTES = 16 * 2**20  # unpacked JSON decoded at a time
# An undecoded part for a worker process (`defer`), at least: smaller, as each worker holds one
# decoded and one waiting (16 MB decodes to ≈ 100 MB of structs: eight such workers, 1.3 GB).
# The buffer is filled to this much and cut at its last boundary, so what is left to carry
# over (copied when the next piece is appended) is a part of one event.
DEFER_BYTES = 4 * 2**20
READ_BYTES = 4 * 2**20
HEAD_LIMIT = 64 * 2**20  # "traceEvents" must start within this many bytes
CUT_ATTEMPTS = 8
KEY = b'"traceEvents"'
_WS = b" \t\r\n"
_UNQUOTED_NA = re.compile(rb'(?<!")N/A(?!")')  # old Kineto wrote N/A bare (the plugin fixes it too)

# What reading costs: the compact rows of a trace's events peak at up to 3× its unpacked JSON
# (benchmarks/bench_kineto.py), so a trace may unpack to a third of the memory free when reading
# starts, and no less than MIN_UNPACK_LIMIT. Beyond it the reader stops and says so: a 12 MB gzip
# that unpacks to 4 GB of events would otherwise take the machine's memory before failing.
ROWS_PER_UNPACKED_BYTE = 3
MIN_UNPACK_LIMIT = 512 * 2**20


def unpack_limit() -> int:
    """The most unpacked JSON a trace may hold here and now (see ROWS_PER_UNPACKED_BYTE)."""
    free = _available_memory()
    return max(MIN_UNPACK_LIMIT, free // ROWS_PER_UNPACKED_BYTE) if free else 2**62


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


_events_decoder = msgspec.json.Decoder(list[AnyEvent])
_trace_decoder = msgspec.json.Decoder(Trace)
_meta_decoder = msgspec.json.Decoder(Meta)


_PHASE_TAGS = {*PHASES, "s", "t", "f"}
_RAW_KEYS = tuple(f'"{k}"'.encode() for k in RAW_ARGS)


def _has_raw(buf: bytearray, end: int) -> bool:
    return any(buf.find(k, 0, end) >= 0 for k in _RAW_KEYS)


def _unshared(part: memoryview, buf: bytearray, end: int) -> bytes | memoryview:
    """What to decode: a copy where the part has Raw args (they point into what they were
    decoded from, and the buffer is cut after), else the part itself (no 16 MB copy)."""
    return bytes(part) if _has_raw(buf, end) else part


def decode_events(part: bytes | bytearray | memoryview) -> tuple[list[Event], int]:
    """One part's events and how many were dropped for fields of the wrong type; DecodeError
    where the part is not JSON (a cut that is not between two events)."""
    try:
        return events_of(_events_decoder.decode(part)), 0
    except msgspec.ValidationError:
        return salvage(msgspec.json.decode(part))


def salvage(items: object) -> tuple[list[Event], int]:
    """Events one by one, dropping those whose fields have the wrong type (counted) and flow
    events; one without a phase, or with one no trace format has, has the phase ""."""
    out: list[Event] = []
    skipped = 0
    for item in items if isinstance(items, list) else []:
        ev = None
        if isinstance(item, dict):
            ph = item.get("ph", 0)
            if "ph" not in item or (isinstance(ph, str) and ph not in _PHASE_TAGS):
                item = {**item, "ph": ""}
            args = item.get("args")
            if isinstance(args, dict) and any(k in args for k in RAW_ARGS):
                item = dict(item)
                item["args"] = {
                    k: msgspec.Raw(msgspec.json.encode(v)) if k in RAW_ARGS else v
                    for k, v in args.items()
                }
            for candidate in (item, {k: v for k, v in item.items() if k != "args"}):
                try:
                    ev = msgspec.convert(candidate, AnyEvent, strict=False)
                    break
                except msgspec.ValidationError:
                    continue
        if ev is None:
            skipped += 1
        elif not isinstance(ev, Flow):
            out.append(ev)
    return out, skipped


def _cuts(buf: bytes | bytearray) -> Iterator[tuple[int, int]]:
    """(end of an event's `}`, its comma) from the end backwards: where a part may end."""
    hi = len(buf)
    while True:
        close = buf.rfind(b"}", 0, hi)
        if close <= 0:
            return
        hi = close
        i = close + 1
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i >= len(buf) or buf[i] != ord(","):
            continue
        comma = i
        i += 1
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i < len(buf) and buf[i] == ord("{"):
            yield close, comma


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


class TraceStream:
    """One trace file, read once; see the module's contract."""

    def __init__(
        self,
        path: Path,
        *,
        cancel: threading.Event | None = None,
        progress: Callable[[float], object] | None = None,
        chunk_bytes: int | None = None,
        max_unpacked: int | None = None,
    ) -> None:
        self.path = path
        self.name = path.name
        self.cancel = cancel
        self.progress = progress
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.read_bytes = min(READ_BYTES, self.chunk_bytes)
        self.max_unpacked = max_unpacked or unpack_limit()
        self.parts = 0  # how many parts the events were decoded in
        self.meta = Meta()
        self.skipped = 0  # events dropped: fields of the wrong type
        self.unpacked = 0  # bytes of JSON read so far
        # Set while reading: the middle parts are yielded undecoded (a RawPart, valid until
        # the next part is asked for) for worker processes to decode (workers.py); a cut that
        # is not between two events then shows as a DecodeError there.
        self.defer = False
        self._buf = bytearray()
        self._eof = False
        self._offset = 0  # unpacked offset of _buf[0] in the file

    # -- reading ---------------------------------------------------------------------------

    def _fill(self, source: Inflater, want: int) -> None:
        while len(self._buf) < want and not self._eof:
            data = self._take(source)
            if data is None:
                break
            self._buf += data

    def _take(self, source: Inflater) -> bytes | None:
        """The next unpacked piece, counted (None at the end: `_eof` set)."""
        data = next(source, None)
        if data is None:
            self._eof = True
            return None
        self.unpacked += len(data)
        if self.unpacked > self.max_unpacked:
            raise ProfileError(
                f"{self.name}: more than {_mb(self.max_unpacked)} of JSON (unpacked); "
                f"stopped there: its events would need about {ROWS_PER_UNPACKED_BYTE}× that "
                "in memory, more than this machine has free"
            )
        if self.progress is not None:
            self.progress(min(1.0, source.consumed / source.size))
        return data

    def batches(self) -> Iterator[list[Event]]:
        for part in self.read_parts():
            assert isinstance(part, list), "only read_parts()' callers set defer"
            yield part

    def read_parts(self) -> Iterator[list[Event] | RawPart]:
        """Decoded batches, or while `defer` is set, undecoded middle parts (see __init__)."""
        source = Inflater(self.path, self.read_bytes)
        try:
            yield from self._read(source)
        finally:
            source.close()

    def _read(self, source: Inflater) -> Iterator[list[Event] | RawPart]:
        buf = self._buf
        want = 256 * 1024
        while True:
            self._fill(source, want)
            at = buf.find(KEY)
            if at >= 0 or self._eof:
                break
            if len(buf) >= HEAD_LIMIT:
                raise ProfileError(
                    f"{self.name}: not a Kineto trace (no traceEvents in its first {_mb(HEAD_LIMIT)})"
                )
            want = len(buf) * 2
        if at < 0:  # the whole file is in memory and has no "traceEvents": say what it is
            yield self._whole(bytes(buf))
            return
        start = self._array_start(at)
        self.meta = self._decode_meta(bytes(buf[:at]) + b'"traceEvents":[]}', self.meta)
        del buf[:start]  # buf now starts with the array's "["
        self._offset = start
        while True:
            self._check()
            if self.defer and len(buf) < min(DEFER_BYTES, self.chunk_bytes):
                # a piece as it came from the inflater, cut at its last boundary, not copied
                # into the buffer first (that copy was a third of this process's reading)
                piece = self._take(source)
                if piece is None:
                    yield self._last()
                    return
                if (cut := next(_cuts(piece), None)) is not None:
                    yield from self._piece_part(piece, *cut)
                else:
                    buf += piece
                continue
            self._fill(
                source, min(DEFER_BYTES, self.chunk_bytes) if self.defer else self.chunk_bytes
            )
            if self._eof:
                yield self._last()
                return
            part: list[Event] | None = None
            if self.defer:
                if (cut := next(_cuts(self._buf), None)) is not None:
                    yield from self._raw_part(*cut)
                    continue
            else:
                part = self._next_part()
            if part is None:
                if len(buf) > 4 * self.chunk_bytes:
                    raise ProfileError(
                        f"{self.name}: not valid JSON: no boundary between two events in "
                        f"{_mb(len(buf))} after byte {self._offset:,}"
                    )
                self._fill(source, len(buf) + self.chunk_bytes)
                continue
            yield part

    def _check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()

    # -- cutting and decoding --------------------------------------------------------------

    def _array_start(self, at: int) -> int:
        buf = self._buf
        i = at + len(KEY)
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i < len(buf) and buf[i] == ord(":"):
            i += 1
            while i < len(buf) and buf[i] in _WS:
                i += 1
        if i >= len(buf) or buf[i] != ord("["):
            raise ProfileError(f"{self.name}: not a Kineto trace (traceEvents is not a list)")
        return i

    def _next_part(self) -> list[Event] | None:
        buf = self._buf
        for attempt, (close, comma) in enumerate(_cuts(self._buf)):
            if attempt >= CUT_ATTEMPTS:
                break
            saved = buf[close + 1]
            buf[close + 1] = ord("]")
            try:
                with memoryview(buf) as view, view[: close + 2] as part:
                    events = self._decode_events(_unshared(part, buf, close + 2))
            except msgspec.DecodeError:
                buf[close + 1] = saved
                continue
            del buf[:comma]
            buf[0] = ord("[")
            self._offset += comma
            self.parts += 1
            return events
        return None

    def _raw_part(self, close: int, comma: int) -> Iterator[RawPart]:
        """The part up to the event ending at `close`, undecoded, as `[...]`; then cut it off."""
        buf = self._buf
        buf[close + 1] = ord("]")
        with memoryview(buf) as view, view[: close + 2] as part:
            yield (part,)
        del buf[:comma]
        buf[0] = ord("[")
        self._offset += comma
        self.parts += 1

    def _piece_part(self, piece: bytes, close: int, comma: int) -> Iterator[RawPart]:
        """The buffer (`[` and what the last part left) and the piece up to the event ending at
        `close`, undecoded, closed by `]`; then the buffer holds `[` and the piece after the
        comma."""
        buf = self._buf
        with memoryview(piece) as view, view[: close + 1] as head:
            yield (buf, head, b"]")
        self._offset += len(buf) + comma
        del buf[1:]
        buf += memoryview(piece)[comma + 1 :]
        self.parts += 1

    def _decode_events(self, part: bytes | memoryview) -> list[Event]:
        events, skipped = decode_events(part)
        self.skipped += skipped
        return events

    def _salvage(self, items: object) -> list[Event]:
        events, skipped = salvage(items)
        self.skipped += skipped
        return events

    def _decode_meta(self, doc: bytes, fallback: Meta) -> Meta:
        try:
            return _meta_decoder.decode(doc)
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as exc:
            raise ProfileError(f"{self.name}: not JSON ({exc})") from exc
        head = msgspec.json.decode(doc)
        info = head.get("distributedInfo") if isinstance(head, dict) else None
        return Meta(distributedInfo=info if isinstance(info, dict) else fallback.distributedInfo)

    def _last(self) -> list[Event]:
        """The rest of the file: the last events and the metadata after them, one document
        (made in place: the buffer gets the key in front, no copy of it)."""
        self._buf[0:0] = b'{"traceEvents":'
        self.parts += 1
        try:
            buf = self._buf
            trace = self._decode_trace(bytes(buf) if _has_raw(buf, len(buf)) else buf)
        except msgspec.DecodeError as exc:
            raise ProfileError(f"{self.name}: {self._describe(exc)}") from exc
        finally:
            self._buf.clear()
        self._merge(trace)
        return events_of(trace.traceEvents)

    def _decode_trace(self, doc: bytes | bytearray) -> Trace:
        try:
            return _trace_decoder.decode(doc)
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError:
            if b"N/A" not in doc:
                raise
            doc = _UNQUOTED_NA.sub(b'"N/A"', doc)
            try:
                return _trace_decoder.decode(doc)
            except msgspec.ValidationError:
                pass
        obj = msgspec.json.decode(doc)
        if not isinstance(obj, dict):
            obj = {"traceEvents": obj}
        events = self._salvage(obj.get("traceEvents"))
        props = obj.get("deviceProperties")
        info = obj.get("distributedInfo")
        return Trace(
            traceEvents=events,
            deviceProperties=props if isinstance(props, list) else None,
            distributedInfo=info if isinstance(info, dict) else None,
        )

    def _whole(self, doc: bytes) -> list[Event]:
        """A small file without a "traceEvents" key: a bare event array, or not a trace."""
        try:
            obj = msgspec.json.decode(doc)
        except msgspec.DecodeError as exc:
            raise ProfileError(f"{self.name}: {self._describe(exc)}") from exc
        if isinstance(obj, list):  # Chrome's other trace format: a bare array of events
            events = self._salvage(obj)
            if events or not obj:
                return events
        raise ProfileError(f"{self.name}: JSON, but not a trace (no traceEvents)")

    def _merge(self, trace: Trace) -> None:
        m = self.meta
        self.meta = Meta(
            schemaVersion=m.schemaVersion if m.schemaVersion is not None else trace.schemaVersion,
            deviceProperties=m.deviceProperties or trace.deviceProperties,
            distributedInfo=m.distributedInfo or trace.distributedInfo,
        )

    def _describe(self, exc: msgspec.DecodeError) -> str:
        text = str(exc)
        if "truncated" in text:
            return (
                f"truncated: the JSON ends before the trace does ({_mb(self.unpacked)} read) — "
                "was it still being written?"
            )
        return f"not valid JSON ({text}; the last part starts at byte {self._offset:,})"
