"""The GPU planes of XSpace files as parsed messages, without numpy or the raw decoder.

Contract: `gpu_planes(paths)` yields every plane named `/device:GPU:N`, file by file in order,
as a (lenient: names are bytes) XPlane message; `compute_capability(paths)` reads the first
NVIDIA plane's compute capability from it. On the converter's path tuiprof reads only these
few figures from the planes (the compute capability; kernels' ops where the converter names
none, device_ops): parsing the GPU planes with upb costs ~10 ms on a 3 MB 8-GPU profile, where
importing numpy for the vectorised decoder (xspace) cost ~65 ms of CPU and its scan ~20 ms.
Only the top level and each plane's first fields are walked in Python, to find the planes and
their names. A damaged file raises UnreadableProfile.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tui_prof.model import UnreadableProfile, os_reason
from tui_prof.profiles.xplane.proto import RAW_CLASSES

_PlaneMsg = RAW_CLASSES["XPlane"]
_GPU_RE = re.compile(r"^/device:GPU:\d")  # as xspace.PlaneRef.device reads a plane's name
# tsl's derived lines ("Steps", "TensorFlow Ops", ...) use thread ids from 0xdeadbeef (as int32) up.
_DERIVED_MIN = -559038737
DERIVED_LINE_IDS = range(_DERIVED_MIN, _DERIVED_MIN + 64)


def text(raw: bytes) -> str:
    """Decode a name from a profile; never fails."""
    return raw.decode("utf-8", "replace")


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            break
    raise ValueError("bad varint")


def _fields(buf: Any, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field; a varint's value as its start."""
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value, pos
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise ValueError("a field runs past the end")
            yield number, wire, pos, pos + length
            pos += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield number, wire, pos, pos + size
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _name(buf: Any, start: int, end: int) -> str:
    """A plane's name: its field 2, which serializers write before its lines."""
    for number, wire, a, b in _fields(buf, start, end):
        if number == 2 and wire == 2:
            return text(bytes(buf[a:b]))
    return ""


def gpu_planes(paths: Sequence[Path | str]) -> Iterator[Any]:
    """Every GPU plane of these files, parsed (see the module's contract)."""
    for path in paths:
        p = Path(path)
        try:
            with open(p, "rb") as fh:
                if fh.seek(0, 2) == 0:
                    raise UnreadableProfile(f"{p.name}: empty file, not a profile")
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise UnreadableProfile(f"{p.name}: cannot read ({os_reason(exc)})") from exc
        with mm:
            try:
                spans = [
                    (a, b)
                    for number, wire, a, b in _fields(mm, 0, len(mm))
                    if number == 1 and wire == 2
                ]
                for a, b in spans:
                    if not _GPU_RE.match(_name(mm, a, b)):
                        continue
                    yield _PlaneMsg.FromString(mm[a:b])
            except (ValueError, IndexError) as exc:
                raise UnreadableProfile(f"{p.name}: not a readable XSpace profile ({exc})") from exc
            except Exception as exc:  # upb's DecodeError
                if isinstance(exc, UnreadableProfile):
                    raise
                raise UnreadableProfile(f"{p.name}: damaged GPU plane ({exc})") from exc


def stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    """An XStat's value; ref_value (a string interned as stat metadata) resolves to that name."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ref_value":
        return stat_names.get(stat.ref_value, "")
    value = getattr(stat, kind)
    return text(value) if kind == "str_value" else value


def plane_stats(plane: Any) -> tuple[dict[int, str], dict[str, Any]]:
    """A plane's stat names by metadata id, and its own stats by name."""
    names = {k: text(v.name) for k, v in plane.stat_metadata.items()}
    stats = {
        names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, names) for s in plane.stats
    }
    return names, stats


def compute_capability(paths: Sequence[Path | str]) -> str:
    """The first NVIDIA GPU plane's compute capability ("7.0"), from its plane stats
    (`compute_cap_major`/`_minor`); "" where there is none. AMD planes carry ROCm's own
    major.minor (gfx942 as 9.4), which is not CUDA's and is left out."""
    for plane in gpu_planes(paths):
        found = plane_capability(plane)
        if found is not None:
            return found
    return ""


def plane_capability(plane: Any) -> str | None:
    """`compute_capability`'s answer where this plane (the next in order) gives it, else None."""
    _names, stats = plane_stats(plane)
    if str(stats.get("device_vendor") or "Nvidia").lower() != "nvidia":
        return ""
    major, minor = stats.get("compute_cap_major"), stats.get("compute_cap_minor")
    if isinstance(major, int) and isinstance(minor, int):
        return f"{major}.{minor}"
    return None
