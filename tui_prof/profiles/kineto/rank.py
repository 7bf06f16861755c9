"""One trace file (one rank): steps, both breakdowns per step, ops, kernels and its devices.

Contract: `analyse_file(path)` streams the file once (stream.TraceStream → collect.Collector) and
returns a RankResult; ProfileError for a file that cannot be read. Each step is split twice by
the same priority rule (ranges.partition), once per vocabulary:
  native (torch-tb-profiler):  kernel, memcpy, memset, communication, runtime, dataloader,
                               cpu_exec, other
  tuiprof:                     device_compute, device_to_device (memcpy + memset),
                               device_collectives, kernel_launch (runtime calls but waits),
                               input (DataLoader), other (runtime calls that wait for the
                               device: …Synchronize, memcpy), host_compute (CPU ops), other
Native `communication` is the plugin's (kernels launched by `nccl:all_reduce`-like ops, and those
ops); `device_collectives` also takes every NCCL/RCCL kernel by name, which the plugin counts as
Kernel when its op is not one of its five collectives.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tui_prof.model import StepBreakdown
from tui_prof.profiles.kineto import names
from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.ops import OpsResult, analyse_ops
from tui_prof.profiles.kineto.ranges import Ranges, as_ranges, partition
from tui_prof.profiles.kineto.steps import Steps, find_steps
from tui_prof.profiles.kineto.stream import TraceStream

NATIVE_ORDER = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
# tuiprof's roles in priority order and the category each one's time goes to. Runtime calls that
# wait for the device (…Synchronize, memcpy calls: a copy call blocks until its copy is done)
# are not launch overhead: their time the device does not cover is "other" (waiting).
OUR_ROLES = (
    "device_compute",
    "device_to_device",
    "device_collectives",
    "kernel_launch",
    "input",
    "other",
    "host_compute",
)
WAIT_CALL = re.compile(r"Synchroni[sz]e|Memcpy", re.IGNORECASE)


@dataclass
class RankResult:
    """What one trace file says."""

    name: str
    rank: int | None
    world_size: int | None
    steps: Steps | None
    breakdowns: list[StepBreakdown]
    ops: OpsResult
    device_names: list[str]  # of the devices that ran kernels or copies
    devices_used: int
    on_device: bool  # device events, runtime calls or listed devices: a GPU job
    runtime_ms_per_step: float  # runtime calls' share the plugin would show as 0 on today's traces
    runtime_2021: bool
    warnings: list[str] = field(default_factory=list)
    gpu_step_marks: int = 0  # see Collector
    dataloader_annotations: int = 0


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def _roles(c: Collector, base: float) -> tuple[list[Ranges], list[Ranges]]:
    """The role ranges of both vocabularies, in priority order."""
    comm_ext = c.comm_ext
    Kernel = tuple[float, float, int, int, int, int, float]
    kernel: list[Kernel] = []
    comm_by_ext: list[Kernel] = []
    compute: list[Kernel] = []
    coll_by_name: list[Kernel] = []
    coll_name: dict[int, bool] = {}
    for k in c.kernels:
        by_ext = k[4] in comm_ext
        (comm_by_ext if by_ext else kernel).append(k)
        by_name = coll_name.get(k[2])
        if by_name is None:
            by_name = coll_name[k[2]] = names.is_collective(c.names[k[2]])
        (coll_by_name if (by_ext or by_name) else compute).append(k)
    memcpy = as_ranges(c.memcpy, base)
    memset = as_ranges(c.memset, base)
    host_comm = as_ranges(c.comm_host, base)
    runtime = as_ranges(c.runtimes, base)
    waits: dict[int, bool] = {}
    launch: list[tuple[float, float, int, int]] = []
    wait: list[tuple[float, float, int, int]] = []
    for rt in c.runtimes:
        w = waits.get(rt[3])
        if w is None:
            w = waits[rt[3]] = WAIT_CALL.search(c.names[rt[3]]) is not None
        (wait if w else launch).append(rt)
    dataloader = as_ranges(c.dataloader, base)
    cpu = as_ranges(c.cpu_ops, base)
    native = [
        as_ranges(kernel, base),
        memcpy,
        memset,
        np.concatenate([as_ranges(comm_by_ext, base), host_comm]),
        runtime,
        dataloader,
        cpu,
    ]
    ours = [
        as_ranges(compute, base),
        np.concatenate([memcpy, memset]),
        np.concatenate([as_ranges(coll_by_name, base), host_comm]),
        as_ranges(launch, base),
        dataloader,
        as_ranges(wait, base),
        cpu,
    ]
    return native, ours


def _devices(c: Collector, props: list[dict[str, object]] | None) -> tuple[list[str], int]:
    used = sorted({k[5] for k in c.kernels} | {m[3] for m in c.memcpy + c.memset if m[3] >= 0})
    by_id: dict[int, str] = {}
    for i, p in enumerate(props or []):
        if isinstance(p, dict):
            did = _int(p.get("id"))
            by_id[did if did is not None else i] = str(p.get("name") or "")
    if not used:  # no device events (a counter trace, a CPU job): what the trace lists, if any
        return [n for n in by_id.values() if n], len(by_id)
    return [by_id[d] for d in used if by_id.get(d)], len(used)


def analyse_file(
    path: Path,
    name: str,
    *,
    ignore_markers: bool = False,
    cancel: threading.Event | None = None,
    progress: Callable[[float], object] | None = None,
) -> RankResult:
    stream = TraceStream(path, cancel=cancel, progress=progress)
    c = Collector()
    for batch in stream.batches():
        c.add(batch)
    meta = stream.meta
    info = meta.distributedInfo or {}
    warnings: list[str] = []
    if stream.skipped or c.untimed:
        warnings.append(
            f"{name}: skipped {stream.skipped + c.untimed:,} events with missing or malformed "
            "fields"
        )
    if c.negative:
        warnings.append(f"{name}: {c.negative:,} events with negative durations counted as 0")
    steps = find_steps(c, ignore_markers=ignore_markers)
    breakdowns: list[StepBreakdown] = []
    runtime_per_step = 0.0
    if steps is not None and steps.spans:
        base = steps.spans[0][0]
        native_roles, our_roles = _roles(c, base)
        spans = as_ranges(steps.spans, base)
        native = partition(native_roles, spans) / 1000.0
        ours = partition(our_roles, spans) / 1000.0
        for i, n in enumerate(steps.numbers):
            length = (steps.spans[i][1] - steps.spans[i][0]) / 1000.0
            mine: dict[str, float] = {}
            for k, v in zip((*OUR_ROLES, "other"), ours[i], strict=True):
                mine[k] = mine.get(k, 0.0) + float(v)
            breakdowns.append(
                StepBreakdown(
                    n,
                    length,
                    mine,
                    {k: float(v) for k, v in zip((*NATIVE_ORDER, "other"), native[i], strict=True)},
                )
            )
        runtime_per_step = float(native[:, NATIVE_ORDER.index("runtime")].mean())
    device_names, used = _devices(c, meta.deviceProperties)
    return RankResult(
        name=name,
        rank=_int(info.get("rank")),
        world_size=_int(info.get("world_size")),
        steps=steps,
        breakdowns=breakdowns,
        ops=analyse_ops(c),
        device_names=device_names,
        devices_used=used,
        on_device=bool(c.kernels or c.memcpy or c.memset or c.runtimes or used),
        runtime_ms_per_step=runtime_per_step,
        runtime_2021=c.runtime_2021 > 0,
        warnings=warnings,
        gpu_step_marks=c.gpu_step_marks,
        dataloader_annotations=c.dataloader_annotations,
    )
