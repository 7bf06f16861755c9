"""The one sanitizer for text tuiprof did not write: trace, file, device and metric names, a job's output.

Why: such text reaches a terminal (the TUI, Rich tables) and files a terminal may show (Markdown,
CSV). An escape sequence in an op name could set the terminal's title or write its clipboard
(OSC 52), so every control character is shown as a visible stand-in instead: C0 as its Unicode
Control Picture (ESC as `␛`), DEL as `␡`, C1 (0x80-0x9f, which some terminals obey as ESC
sequences) as `�`. Each stand-in is one cell wide, so columns stay aligned. `multiline` keeps
newlines and tabs (a carriage return becomes a newline), for logs. JSON output needs none of this (`strict_json` escapes them).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, TypeVar, cast

T = TypeVar("T")

_NAME: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20)}
_NAME[0x7F] = "\u2421"
_NAME.update({c: "\ufffd" for c in range(0x80, 0xA0)})
_LOG = {c: s for c, s in _NAME.items() if c not in (0x09, 0x0A)}
_LOG[0x0D] = "\n"  # a progress bar's carriage return: its redraws become lines


def printable(text: str, *, multiline: bool = False) -> str:
    """`text` with every control character (but newline and tab when `multiline`) made visible."""
    if text.isprintable() or (multiline and _clean_multiline(text)):
        return text
    return text.translate(_LOG if multiline else _NAME)


def _clean_multiline(text: str) -> bool:
    return text.replace("\n", "").replace("\t", "").isprintable()


# What msgspec's JSON makes of the characters `printable` replaces: C0 escaped (`\n`, `\u001b`),
# DEL and C1 (U+0080-U+009F) as they are, in UTF-8. Its other escapes are `\"` and `\\`.
_C0_ESCAPES = (b"\\b", b"\\f", b"\\n", b"\\r", b"\\t", b"\\u")
_C1_IN_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


def _has_control(data: bytes) -> bool:
    """Whether msgspec's JSON holds a character `printable` replaces."""
    if b"\x7f" in data or (b"\xc2" in data and _C1_IN_UTF8.search(data) is not None):
        return True
    if b"\\" not in data:
        return False
    bare = data.replace(b"\\\\", b"")  # escaped backslashes out: each escape left is one
    return any(e in bare for e in _C0_ESCAPES)


def printable_fields(obj: T) -> T:
    """A frozen dataclass with `printable` applied to every string in it (nested dataclasses,
    tuples, dict keys and values included); `obj` itself where nothing needed it.

    Nearly always nothing does: msgspec's JSON of the whole (C, a few ms for 3,000 ops, where
    walking it in Python took 25) says so without a walk."""
    import msgspec

    try:
        data = msgspec.json.encode(obj)
    except (TypeError, ValueError, msgspec.EncodeError):
        pass  # a value JSON cannot hold: walk it
    else:
        if not _has_control(data):
            return obj
    return cast(T, _walk(obj))


_PLAIN = frozenset((int, float, bool, type(None)))
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, looked up once per class


def _walk(value: Any) -> Any:
    kind = type(value)  # exact types first: a summary holds ~100,000 values, most plain
    if kind is str:
        return printable(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, str):  # a StrEnum member, say
        return printable(value)
    if isinstance(value, tuple):
        items = tuple(_walk(v) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        d = {_walk(k): _walk(v) for k, v in value.items()}
        same = all(a is b for a, b in zip(d, value, strict=False)) and len(d) == len(value)
        return value if same and all(d[k] is v for k, v in value.items()) else d
    names = _FIELDS.get(kind)
    if names is None:
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return value
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
    changes = {}
    for name in names:
        old = getattr(value, name)
        new = _walk(old)
        if new is not old:
            changes[name] = new
    return dataclasses.replace(value, **changes) if changes else value


# Indented JSON is the compact text re-spaced by msgspec's formatter (C): json's own indenting
# runs its pure-Python encoder (~1 µs a value; half a second for an 8-GPU profile's summary).
# A document of more than this, compact, stays compact (a job's 10,000 metrics).
MAX_INDENTED_BYTES = 4 * 2**20


def strict_json(doc: Any, indent: int | None = 2) -> str:
    """`doc` as standard JSON: NaN and infinities (which strict parsers reject) become null;
    control and non-ASCII characters are escaped (`ensure_ascii`), so none reach a terminal.
    Indented where it is small enough (MAX_INDENTED_BYTES compact), else compact; the same text
    as `json.dumps(doc, indent=indent)` with those rules."""
    compact = json.dumps(doc, ensure_ascii=True)  # the C encoder
    if "NaN" in compact or "Infinity" in compact:  # a value to make null (or a name saying so)
        compact = json.dumps(_finite(doc), allow_nan=False, ensure_ascii=True)
    if indent is None or len(compact) > MAX_INDENTED_BYTES:
        return compact
    if indent < 1:  # json's own layout for these (msgspec's differs)
        return json.dumps(_finite(doc), indent=indent, allow_nan=False, ensure_ascii=True)
    import msgspec  # only re-spaces: strings and numbers are copied as json wrote them

    return msgspec.json.format(compact.encode(), indent=indent).decode()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
