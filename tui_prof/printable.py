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


def printable_fields(obj: T) -> T:
    """A frozen dataclass with `printable` applied to every string in it (nested dataclasses,
    tuples, dict keys and values included); `obj` itself where nothing needed it."""
    return cast(T, _walk(obj))


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, tuple):
        items = tuple(_walk(v) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        d = {_walk(k): _walk(v) for k, v in value.items()}
        same = all(a is b for a, b in zip(d, value, strict=False)) and len(d) == len(value)
        return value if same and all(d[k] is v for k, v in value.items()) else d
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = _walk(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


# Indenting makes json use its pure-Python encoder (~1 µs a value): a document of more values than
# this (a job's 10,000 metrics) is written compact by the C encoder instead, 10× faster.
MAX_INDENTED_BYTES = 4 * 2**20


def strict_json(doc: Any, indent: int | None = 2) -> str:
    """`doc` as standard JSON: NaN and infinities (which strict parsers reject) become null;
    control and non-ASCII characters are escaped (`ensure_ascii`), so none reach a terminal.
    Indented where it is small enough (MAX_INDENTED_BYTES compact), else compact."""
    clean = _finite(doc)
    compact = json.dumps(clean, allow_nan=False, ensure_ascii=True)
    if indent is None or len(compact) > MAX_INDENTED_BYTES:
        return compact
    return json.dumps(clean, indent=indent, allow_nan=False, ensure_ascii=True)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
