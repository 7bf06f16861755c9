"""TensorBoard's own converter (the `xprof` package), called quietly and without side effects.

Contract: `convert(paths, tools)` returns each tool's JSON exactly as TensorBoard's profile plugin
would show it. Three things make the raw converter unfit to call directly, and this module is the
one place that deals with them:
- its native code logs dozens of lines to stderr per call, which would tear a TUI's screen, so
  `TF_CPP_MIN_LOG_LEVEL=3` is forced before the library loads;
- it writes a cache (`ALL_HOSTS.op_stats_v2.pb`) next to the files it reads, so it reads symlinks
  from a private temporary directory instead, and a user's logdir is never written to;
- it is native code of unknown thread-safety, so calls are serialised.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui_prof.model import ProfileError

OVERVIEW = "overview_page"
OP_STATS = "framework_op_stats"
KERNEL_STATS = "kernel_stats"
HLO_STATS = "hlo_stats"  # device HLO ops with their text (types), for XLA programs
DEFAULT_TOOLS = (OVERVIEW, OP_STATS, KERNEL_STATS)
OPTIONAL_TOOLS = (HLO_STATS,)  # asked for too; left out of the result where they fail

_lock = threading.Lock()


def _converter() -> Any:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from xprof.convert import raw_to_tool_data

    return raw_to_tool_data


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
    optional: Sequence[str] = OPTIONAL_TOOLS,
) -> dict[str, Any]:
    """Run TensorBoard's converter tools on one session's host files; raise ProfileError if one
    of `tools` fails (an `optional` tool that fails is only missing from the result)."""
    if not paths:
        raise ProfileError("no .xplane.pb files to read")
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise ProfileError("two host files share a name; convert them as separate sessions")
    r2t = _converter()
    out: dict[str, Any] = {}
    with _lock, tempfile.TemporaryDirectory(prefix="tuiprof-") as tmp:
        links = []
        for i, p in enumerate(paths):
            link = Path(tmp) / _link_name(p.name, i)
            os.symlink(os.path.abspath(p), link)
            links.append(str(link))
        for tool in (*tools, *(t for t in optional if t not in tools)):
            try:
                data, _ = r2t.xspace_to_tool_data(links, tool, {"use_saved_result": True})
            except Exception as exc:  # native errors surface as assorted exception types
                if tool not in tools:
                    continue
                raise ProfileError(f"TensorBoard's converter failed on {tool}: {exc}") from exc
            if data is None and tool not in tools:
                continue
            if data is None:
                raise ProfileError(
                    "TensorBoard's converter could not read it (not an XSpace profile, "
                    "or truncated)"
                )
            try:
                out[tool] = json.loads(data)
            except ValueError as exc:
                if tool not in tools:
                    continue
                raise ProfileError(f"TensorBoard's converter returned bad {tool} data") from exc
    return out
