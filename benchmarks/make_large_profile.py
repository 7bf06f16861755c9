"""Make a large synthetic `.xplane.pb` by replicating a real profile's events, whole, N times in a row.

Each copy of every line's events is shifted by the profile's full span (plus a 1 ms gap), so
copies never overlap and every step the original holds appears once per copy. Stats that link
events to each other are moved out of each other's way per copy, so every copy stays its own
set of steps: `group_id` (and the device "Steps" line's `step_name`), `correlation_id`
(host launch ↔ device kernel), `_p`/`_c` (producer/consumer), `element_id`/`parent_id` (tf.data).
Metadata tables are kept as they are (they are shared by all copies), so the file grows by the
events. Written in one pass, one plane in memory at a time, never the whole file.

Decoding uses tuiprof's own XPlane classes when present, else TensorFlow's xplane_pb2
(this script may import TensorFlow; the package never does).

    python benchmarks/make_large_profile.py [SOURCE.xplane.pb] [--size-mb 300] [--out DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, default_profile, preflight

SHIFTED_STATS = ("group_id", "correlation_id", "_p", "_c", "element_id", "parent_id")
GOLDEN = 0x9E3779B97F4A7C15  # odd, so k*GOLDEN mod 2**64 differs for every k < 2**64
GAP_PS = 1_000_000_000  # 1 ms between copies


def classes() -> tuple[Any, Any, Any]:
    try:
        from tui_prof.profiles.xplane.proto import XLine, XPlane, XSpace
    except ImportError:
        import os

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        from tensorflow.tsl.profiler.protobuf.xplane_pb2 import XLine, XPlane, XSpace  # type: ignore
    return XSpace, XPlane, XLine


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: how repeated messages sit in their parent, one after another."""
    return varint((number << 3) | 2) + varint(len(payload)) + payload


def span_ps(space: Any) -> tuple[int, int]:
    lo, hi = math.inf, -math.inf
    for plane in space.planes:
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for ev in line.events:
                if ev.WhichOneof("data") == "offset_ps":
                    lo = min(lo, base + ev.offset_ps)
                    hi = max(hi, base + ev.offset_ps + ev.duration_ps)
    return int(lo), int(hi)


def stat_deltas(space: Any) -> dict[str, int]:
    """Per shifted stat: how far copy k moves it (k * delta): past the largest value, or a hash step."""
    largest: dict[str, int] = {}
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for ev in line.events:
                for st in ev.stats:
                    name = names.get(st.metadata_id)
                    if name in SHIFTED_STATS:
                        kind = st.WhichOneof("value")
                        if kind in ("int64_value", "uint64_value"):
                            largest[name] = max(largest.get(name, 0), abs(getattr(st, kind)))
    return {n: (v + 1 if v < 2**40 else GOLDEN) for n, v in largest.items()}


def shifted(value: int, k: int, delta: int, kind: str) -> int:
    v = (value + k * delta) % 2**64
    if kind == "int64_value" and v >= 2**63:
        v -= 2**64
    return v


def copies_for(space: Any, source_bytes: int, target_bytes: float) -> int:
    """Events are nearly the whole file and metadata is written once: size = meta + copies * events."""
    per_copy = sum(
        len(field(4, ev.SerializeToString()))
        for plane in space.planes
        for line in plane.lines
        for ev in line.events
    )
    return max(1, round((target_bytes - (source_bytes - per_copy)) / per_copy))


def replicate(src: Path, out_dir: Path, copies: int | None, target_bytes: float) -> dict[str, Any]:
    XSpace, XPlane, XLine = classes()
    space = XSpace.FromString(src.read_bytes())
    copies = copies or copies_for(space, src.stat().st_size, target_bytes)
    session = out_dir / "plugins" / "profile" / f"replicated_x{copies}"
    session.mkdir(parents=True, exist_ok=True)
    dst = session / src.name
    lo, hi = span_ps(space)
    shift = (hi - lo) + GAP_PS
    deltas = stat_deltas(space)
    events = 0
    tmp = dst.with_suffix(".partial")
    with open(tmp, "wb") as out:
        head = XSpace()
        head.CopyFrom(space)
        head.ClearField("planes")
        out.write(head.SerializeToString())
        for plane in space.planes:
            names = {k: v.name for k, v in plane.stat_metadata.items()}
            step_name_ids = {k for k, n in names.items() if n == "step_name"}
            p_head = XPlane()
            p_head.CopyFrom(plane)
            p_head.ClearField("lines")
            parts = [p_head.SerializeToString()]
            for line in plane.lines:
                l_head = XLine()
                l_head.CopyFrom(line)
                l_head.ClearField("events")
                if line.events:
                    l_head.duration_ps = line.duration_ps + (copies - 1) * shift
                # Per event: its offset and the stats to move, with their original values.
                plan = []
                for ev in line.events:
                    moves = []
                    group = None
                    for st in ev.stats:
                        name = names.get(st.metadata_id)
                        kind = st.WhichOneof("value")
                        if name in deltas and kind in ("int64_value", "uint64_value"):
                            moves.append((st, kind, getattr(st, kind), deltas[name]))
                            if name == "group_id":
                                group = getattr(st, kind)
                    step_names = [
                        st
                        for st in ev.stats
                        if st.metadata_id in step_name_ids
                        and st.WhichOneof("value") == "str_value"
                        and st.str_value.isdigit()
                    ]
                    timed = ev.WhichOneof("data") == "offset_ps"
                    plan.append((ev, ev.offset_ps if timed else None, moves, step_names, group))
                chunks = [l_head.SerializeToString()]
                for k in range(copies):
                    for ev, offset, moves, step_names, group in plan:
                        if offset is not None:
                            ev.offset_ps = offset + k * shift
                        for st, kind, value, delta in moves:
                            setattr(st, kind, shifted(value, k, delta, kind))
                        if group is not None:
                            for st in step_names:  # the Steps line names each step by its group
                                st.str_value = str(group + k * deltas["group_id"])
                        chunks.append(field(4, ev.SerializeToString()))
                events += len(plan) * copies
                parts.append(field(3, b"".join(chunks)))
                del chunks
            out.write(field(1, b"".join(parts)))
            del parts
    tmp.replace(dst)
    return {
        "path": dst,
        "copies": copies,
        "events": events,
        "shift_ms": shift / 1e9,
        "bytes": dst.stat().st_size,
        "shifted_stats": sorted(deltas),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", type=Path, default=None)
    ap.add_argument("--size-mb", type=float, default=300.0, help="approximate size of the result")
    ap.add_argument(
        "--copies", type=int, default=None, help="number of copies (overrides --size-mb)"
    )
    ap.add_argument(
        "--out", type=Path, default=OUT / "large", help="directory; the file goes in a session dir"
    )
    args = ap.parse_args()
    preflight()
    src = (args.source or default_profile()).resolve()
    t = time.perf_counter()
    info = replicate(src, args.out, args.copies, args.size_mb * 1e6)
    print(
        f"{info['path']}: {info['bytes'] / 1e6:.0f} MB, {info['copies']} copies of {src.name}, "
        f"{info['events']:,} events, copies {info['shift_ms']:.1f} ms apart, "
        f"moved stats {info['shifted_stats']} ({time.perf_counter() - t:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
