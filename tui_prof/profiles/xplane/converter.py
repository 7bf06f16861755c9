"""TensorBoard's own converter (the `xprof` package), called quietly and without side effects.

Contract: `convert(paths, tools)` returns each tool's JSON exactly as TensorBoard's profile plugin
would show it. Three things make the raw converter unfit to call directly, and this module is the
one place that deals with them:
- its native code logs dozens of lines to stderr per call, which would tear a TUI's screen, so
  `TF_CPP_MIN_LOG_LEVEL=3` is forced before the library loads;
- it writes a cache (`ALL_HOSTS.op_stats_v2.pb`) next to the files it reads, so it reads symlinks
  from a private temporary directory instead, and a user's logdir is never written to;
- it is native code of unknown thread-safety, so calls are serialised;
- a damaged file can crash it (a negated event offset: SIGSEGV), so it runs in a process of its
  own (convert_worker), whose death is the file's one-line error.
Tools that do not reuse the overview's op stats (the memory profile) run `beside` the others in
that process, in a thread of their own: on two cores they cost no wall time.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tui_prof.model import ProfileError, UnreadableProfile
from tui_prof.printable import printable
from tui_prof.profiles.xplane import convert_worker

OVERVIEW = "overview_page"
OP_STATS = "framework_op_stats"
KERNEL_STATS = "kernel_stats"
HLO_STATS = "hlo_stats"  # device HLO ops with their text (types), for XLA programs
MEMORY_PROFILE = "memory_profile"  # allocators' peaks and snapshots (XProf's Memory Profile)
DEFAULT_TOOLS = (OVERVIEW, OP_STATS, KERNEL_STATS)

_lock = threading.Lock()


def _link_name(name: str, index: int) -> str:
    """The converter takes UTF-8 paths only; a host file whose name is not gets a neutral one."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return f"host{index}.xplane.pb"
    return name


def convert(
    paths: Sequence[Path],
    tools: Sequence[str] = DEFAULT_TOOLS,
    then: Callable[[dict[str, Any]], Sequence[str]] | None = None,
    meanwhile: Callable[[dict[str, Any]], None] | None = None,
    beside: Sequence[str] = (),
    decoders: Mapping[str, Callable[[str], Any]] | None = None,
) -> dict[str, Any]:
    """Run TensorBoard's converter tools on one session's host files; raise ProfileError if one
    of `tools` fails. `then(results)` may name more tools to run on the same conversion (its
    saved op stats make them cheap); those are only missing from the result where they fail.
    `meanwhile(results)` runs here while the converter's process works on those (the two
    overlap on two cores); the results it sees are `tools`' alone. `beside` tools (not
    required either) run from the start beside all those (see the module). A tool's JSON is
    parsed by json, or by its entry in `decoders` (ValueError where it is not JSON)."""
    if not paths:
        raise ProfileError("no .xplane.pb files to read")
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise ProfileError("two host files share a name; convert them as separate sessions")
    r2t = convert_worker.process()
    out: dict[str, Any] = {}
    with _lock, tempfile.TemporaryDirectory(prefix="tuiprof-") as tmp:
        links = []
        for i, p in enumerate(paths):
            link = Path(tmp) / _link_name(p.name, i)
            os.symlink(os.path.abspath(p), link)
            links.append(str(link))
        # All asked at once: the process goes on while this one reads.
        side = [(tool, _ask(r2t, links, tool, names, beside=True)) for tool in beside]
        asked = [(tool, _ask(r2t, links, tool, names)) for tool in tools]
        try:
            for tool, request_id in asked:
                out[tool] = _answer(
                    r2t, tool, request_id, required=True, names=names, decoders=decoders
                )
            later = [t for t in (then(out) if then is not None else ()) if t not in out]
            asked = [(tool, _ask(r2t, links, tool, names)) for tool in later]
            if meanwhile is not None:
                meanwhile(dict(out))
            for tool, request_id in asked + side:
                data = _answer(
                    r2t, tool, request_id, required=False, names=names, decoders=decoders
                )
                if data is not None:
                    out[tool] = data
        finally:  # answers still owed (an error above) are dropped when they come
            r2t.forget()
    return out


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
        return r2t.send(links, tool, {"use_saved_result": True}, beside=beside)
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
        return (decoders or {}).get(tool, json.loads)(data)
    except ValueError as exc:
        if not required:
            return None
        raise ProfileError(f"TensorBoard's converter returned bad {tool} data") from exc
