"""TensorBoard's own converter (the `xprof` package), called quietly and without side effects.

Contract: `convert(paths, tools)` returns each tool's JSON exactly as TensorBoard's profile plugin
would show it. Three things make the raw converter unfit to call directly, and this module is the
one place that deals with them:
- its native code logs dozens of lines to stderr per call, which would tear a TUI's screen, so
  `TF_CPP_MIN_LOG_LEVEL=3` is forced before the library loads;
- it writes a cache (`ALL_HOSTS.op_stats_v2.pb`) next to the files it reads, so it reads symlinks
  from a private temporary directory instead, and a user's logdir is never written to;
- it is native code of unknown thread-safety, so calls are serialised (one `convert` at a
  time), but for a tool sent `beside` the others, which reads the files on its own (with the
  memory profile made beside them, the overview, op and kernel stats and the memory figures
  were those made one after another in 75 runs on 5 profiles, but for the memory series xprof
  varies run to run on JAX profiles anyway; tests/unit/test_converter_beside.py checks one);
- a damaged file can crash it (a negated event offset: SIGSEGV), so it runs in a process of its
  own (convert_worker), whose death is the file's one-line error.
Tools that do not reuse the overview's op stats (the memory profile) run `beside` the others in
that process, in a thread of their own: on two cores they cost no wall time.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tui_prof.model import ProfileError, UnreadableProfile
from tui_prof.printable import printable
from tui_prof.profiles.xplane import convert_worker
from tui_prof.profiles.xplane.convert_worker import (
    HLO_STATS,
    KERNEL_STATS,
    MEMORY_PROFILE,
    OP_STATS,
    OPTIONS,
    OVERVIEW,
)

__all__ = [
    "HLO_STATS",
    "KERNEL_STATS",
    "MEMORY_PROFILE",
    "OP_STATS",
    "OVERVIEW",
    "convert",
    "decode",
    "start",
]
DEFAULT_TOOLS = (OVERVIEW, OP_STATS, KERNEL_STATS)

_lock = threading.Lock()


def start() -> None:
    """Start the converter's process now (see convert_worker), if it is not running."""
    convert_worker.process().start()


def convert(
    paths: Sequence[Path],
    tools: Sequence[str] = DEFAULT_TOOLS,
    then: Callable[[dict[str, Any]], Sequence[str]] | None = None,
    meanwhile: Callable[[dict[str, Any]], None] | None = None,
    beside: Sequence[str] = (),
    decoders: Mapping[str, Callable[[str], Any]] | None = None,
) -> dict[str, Any]:
    """Run TensorBoard's converter tools on one session's host files; raise ProfileError if one
    of `tools` fails. `then(results)`, called once the first tool's result is in (the others'
    are still to come), may name more tools to run on the same conversion (its saved op stats
    make them cheap); those are only missing from the result where they fail.
    `meanwhile(results)` runs here while the converter's process works on those (the two
    overlap on two cores); the results it sees are `tools`' alone. `beside` tools (not
    required either) run from the start beside all those (see the module). A tool's JSON is
    parsed by `decode`, or by its entry in `decoders` (ValueError where it is not JSON)."""
    if not paths:
        raise ProfileError("no .xplane.pb files to read")
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise ProfileError("two host files share a name; convert them as separate sessions")
    r2t = convert_worker.process()
    out: dict[str, Any] = {}
    with _lock:
        ahead = r2t.claim(paths)  # asked already (`tuiprof summary`, the first screen's child)
        ahead_ids = dict(ahead.ids) if ahead is not None else {}
        with (
            ahead.tmp
            if ahead is not None
            else tempfile.TemporaryDirectory(prefix="tuiprof-") as tmp
        ):
            links = ahead.links if ahead is not None else convert_worker.make_links(tmp, paths)

            def ask(tool: str, beside: bool = False) -> int:
                if (tool, beside) in ahead_ids:
                    return ahead_ids.pop((tool, beside))
                return _ask(r2t, links, tool, names, beside=beside)

            # All asked at once: the process goes on while this one reads.
            side = [(tool, ask(tool, True)) for tool in beside]
            asked = [(tool, ask(tool)) for tool in tools]
            used = [i for _, i in side + asked]
            try:
                later: list[tuple[str, int]] = []
                for n, (tool, request_id) in enumerate(asked):
                    out[tool] = _answer(
                        r2t, tool, request_id, required=True, names=names, decoders=decoders
                    )
                    if n == 0 and then is not None:  # the first screen's step time: now
                        wanted = [t for t in then(dict(out)) if t not in tools]
                        later = [(t, ask(t)) for t in wanted]
                        used += [i for _, i in later]
                if meanwhile is not None:
                    meanwhile(dict(out))
                for tool, request_id in later + side:
                    data = _answer(
                        r2t, tool, request_id, required=False, names=names, decoders=decoders
                    )
                    if data is not None:
                        out[tool] = data
            finally:  # answers still owed (an error above, asked ahead but not here) are
                r2t.forget([*used, *ahead_ids.values()])  # dropped when they come
    return out


def decode(text: str) -> Any:
    """A tool's JSON as json reads it, by msgspec (twice as fast: 2 ms for the 8-GPU profile's
    op stats); what msgspec refuses and json reads (NaN, 1e400, a lone surrogate) by json."""
    import msgspec

    try:
        return msgspec.json.decode(text)
    except msgspec.MsgspecError:
        return json.loads(text)


def _died(names: list[str], exc: convert_worker.ConverterDied) -> UnreadableProfile:
    return UnreadableProfile(
        f"{printable(', '.join(names))}: TensorBoard's converter crashed reading it ({exc}); "
        "the file is damaged"
    )


def _ask(
    r2t: convert_worker.ConverterProcess,
    links: list[str],
    tool: str,
    names: list[str],
    *,
    beside: bool = False,
) -> int:
    try:
        return r2t.send(links, tool, OPTIONS, beside=beside)
    except convert_worker.ConverterDied as exc:
        raise _died(names, exc) from None


def _answer(
    r2t: convert_worker.ConverterProcess,
    tool: str,
    request_id: int,
    *,
    required: bool,
    names: list[str],
    decoders: Mapping[str, Callable[[str], Any]] | None = None,
) -> Any:
    """The answer to this request, parsed: ProfileError where a required tool fails, else None;
    the converter's death is the file's error either way (UnreadableProfile)."""
    try:
        data = r2t.receive(request_id)
    except convert_worker.ConverterDied as exc:
        raise _died(names, exc) from None
    except Exception as exc:  # native errors surface as assorted exception types
        if not required:
            return None
        raise ProfileError(f"TensorBoard's converter failed on {tool}: {exc}") from exc
    if data is None:
        if not required:
            return None
        raise ProfileError(
            "TensorBoard's converter could not read it (not an XSpace profile, or truncated)"
        )
    try:
        return (decoders or {}).get(tool, decode)(data)
    except ValueError as exc:
        if not required:
            return None
        raise ProfileError(f"TensorBoard's converter returned bad {tool} data") from exc
