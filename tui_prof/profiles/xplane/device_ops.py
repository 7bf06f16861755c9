"""TensorFlow's device ops and the ops kernels ran for, from GPU kernel events' own annotations,
where the converter names none.

Contract: today's converter ties a GPU kernel to its TensorFlow op only through the kernel's
`tf_op` stat; TensorFlow's GPU profiles of some releases (a 2022 T4 profile among them) carry the
op only in the kernel's `level 0` annotation (`model/dense/MatMul:MatMul`, nested scopes joined
by `::`, arguments after `#`), so the converter lists no device op and names no kernel's op.
`device_ops(paths)` reads the GPU planes' kernel events and gives what the converter gives when
the stat is `tf_op` (its framework op stats without idle, and kernel stats): per op, its kernels'
count and total time; per kernel name, the ops it ran for. `fill_kernels` puts those op names
into the converter's kernel rows. Read only when the converter has no device op.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_prof.model import KernelStat, OpStat
from tui_prof.profiles.xplane.gpu_planes import DERIVED_LINE_IDS, gpu_planes, text

OP_STATS = ("tf_op", "level 0")  # the converter's stat first, then the annotation
_SHAPE = re.compile(r"grid:\s*([\d,]+)\s+block:\s*([\d,]+)")


_MEMCPY_TYPES = ("MemcpyHToD", "MemcpyDToH", "MemcpyDToD", "MemcpyHToH")


def parse_op(annotation: str) -> tuple[str, str]:
    """(name, type) of a TensorFlow op annotation, as tsl's ParseTfOpFullname reads
    `name:type` (the innermost of nested `outer::inner` scopes, `#arguments#` dropped); a name
    without a type is "Unknown" as the converter's op table shows it, but copies (`MemcpyHToD…`)."""
    inner = annotation.split("::")[-1].split("#")[0].strip()
    name, colon, op_type = inner.partition(":")
    if not colon:
        low = inner.lower()
        return inner, next((t for t in _MEMCPY_TYPES if low.startswith(t.lower())), "Unknown")
    return name, op_type


@dataclass
class DeviceOps:
    """Per op: (type, kernels, total µs); per kernel name: {op: (kernels, total µs)}."""

    ops: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    by_kernel: dict[str, dict[str, tuple[int, float]]] = field(default_factory=dict)
    # (kernel, grid, block) → {op: (kernels, total µs)}: the converter's rows are per shape
    by_shape: dict[tuple[str, str, str], dict[str, tuple[int, float]]] = field(default_factory=dict)

    def top_ops(self) -> list[OpStat]:
        total = sum(us for _, _, us in self.ops.values())
        out = [
            OpStat(name, op_type, "Device", n, us, 100.0 * us / total if total else 0.0)
            for name, (op_type, n, us) in self.ops.items()
        ]
        out.sort(key=lambda o: o.total_self_time_us, reverse=True)
        return out


def device_ops(paths: Sequence[Path]) -> DeviceOps:
    """Kernels by the op their annotation names, over every GPU plane of the session (parsed
    with upb, gpu_planes: no numpy on the converter's path)."""
    found = DeviceOps()
    for plane in gpu_planes(paths):
        add_plane(found, plane)
    return found


def names_ops(plane: Any) -> tuple[bool, bool]:
    """Whether a GPU plane's stats include the `level 0` annotation, and the `tf_op` stat the
    converter reads: annotations alone on every plane mean the converter will name no device
    op, and `device_ops` is worth reading before its tables say so."""
    names = {text(v.name) for v in plane.stat_metadata.values()}
    return OP_STATS[1] in names, OP_STATS[0] in names


def add_plane(found: DeviceOps, plane: Any) -> None:
    """One GPU plane's kernels into `found` (planes in file order)."""
    wanted_names = (*OP_STATS, "kernel_details")
    stat_names = {k: text(v.name) for k, v in plane.stat_metadata.items()}
    event_names = {k: text(v.name or v.display_name) for k, v in plane.event_metadata.items()}
    wanted = {k: v for k, v in stat_names.items() if v in wanted_names}
    for line in plane.lines:
        if line.id in DERIVED_LINE_IDS:
            continue
        for e in line.events:
            texts: dict[str, str] = {}
            for st in e.stats:
                name = wanted.get(st.metadata_id)
                kind = st.WhichOneof("value") if name is not None else None
                if name is None or kind is None:
                    continue
                value = getattr(st, kind)
                texts[name] = (  # as xspace reads a text stat (its upb path)
                    stat_names.get(value, "")
                    if kind == "ref_value"
                    else text(value)
                    if isinstance(value, bytes)
                    else str(value)
                )
            label = next((texts[s] for s in OP_STATS if texts.get(s)), "")
            if not label:
                continue
            us = e.duration_ps / 1e6
            name, op_type = parse_op(label)
            _, n, total = found.ops.get(name, (op_type, 0, 0.0))
            found.ops[name] = (op_type, n + 1, total + us)
            kernel = event_names.get(e.metadata_id, "")
            _count(found.by_kernel.setdefault(kernel, {}), name, us)
            if m := _SHAPE.search(texts.get("kernel_details", "")):
                shape = (kernel, m.group(1), m.group(2))
                _count(found.by_shape.setdefault(shape, {}), name, us)


def _count(per: dict[str, tuple[int, float]], op: str, us: float) -> None:
    n, total = per.get(op, (0, 0.0))
    per[op] = (n + 1, total + us)


def fill_kernels(kernels: Sequence[KernelStat], found: DeviceOps) -> list[KernelStat]:
    """The converter's kernel rows with the op each ran for: a kernel that ran for one op gets
    its name, one that ran for several is split into a row per op (its calls and time). A kernel
    launched in several shapes has a converter row per shape: each row takes the ops of its own
    grid and block (none where the events do not say their shape)."""
    rows_per_name: dict[str, int] = {}
    for k in kernels:
        rows_per_name[k.name] = rows_per_name.get(k.name, 0) + 1
    out: list[KernelStat] = []
    for k in kernels:
        ops = found.by_kernel.get(k.name, {})
        if rows_per_name[k.name] > 1:
            ops = found.by_shape.get((k.name, k.grid, k.block), {})
        if k.op_name or not ops:
            out.append(k)
        elif len(ops) == 1:
            out.append(dataclasses.replace(k, op_name=next(iter(ops))))
        else:
            out += [
                dataclasses.replace(k, op_name=op, occurrences=n, total_duration_us=us)
                for op, (n, us) in sorted(ops.items(), key=lambda kv: -kv[1][1])
            ]
    out.sort(key=lambda k: k.total_duration_us, reverse=True)
    return out


def needs_device_ops(ops: Sequence[OpStat], kernels: Sequence[KernelStat]) -> bool:
    """The converter has GPU kernels but no device op and no kernel's op."""
    return (
        bool(kernels)
        and not any(o.where == "Device" for o in ops)
        and not any(k.op_name for k in kernels)
    )


def with_device_ops(
    paths: Sequence[Path],
    ops: list[OpStat],
    kernels: list[KernelStat],
    read: DeviceOps | None = None,
) -> tuple[list[OpStat], list[KernelStat]]:
    """The converter's ops and kernels, completed from the annotations where it has GPU kernels
    but no device op and no kernel's op (see the module's contract); `read`: `device_ops(paths)`
    where it was read already."""
    if not needs_device_ops(ops, kernels):
        return ops, kernels
    found = read if read is not None else device_ops(paths)
    if not found.ops:
        return ops, kernels
    merged = ops + found.top_ops()
    merged.sort(key=lambda o: o.total_self_time_us, reverse=True)
    return merged, fill_kernels(kernels, found)
