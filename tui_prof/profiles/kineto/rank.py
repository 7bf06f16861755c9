"""One trace file (one rank): steps, both breakdowns per step, ops, kernels and its devices.

Contract: `analyse_file(path)` streams the file once (stream.TraceStream → collect.Collector, in
worker processes for a long trace: workers.py) and returns a RankResult; ProfileError for a file that cannot be read. Each step is split twice by
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

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tui_prof.device_use import GpuMetric
from tui_prof.model import Cancelled, StepBreakdown
from tui_prof.profiles import heap
from tui_prof.profiles.kineto import names
from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.columns import Array, Device, Ints
from tui_prof.profiles.kineto.extras import Extras, RankExtras
from tui_prof.profiles.kineto.gpu_metrics import gpu_metrics
from tui_prof.profiles.kineto.names import WAIT_CALL
from tui_prof.profiles.kineto.ops import OpsResult, analyse_ops
from tui_prof.profiles.kineto.ranges import Ranges, as_ranges, partition, spans_union, union
from tui_prof.profiles.kineto.steps import Steps, find_steps
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.kineto.workers import PARALLEL_FROM, RowSink, read

NATIVE_ORDER = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
# tuiprof's roles in priority order and the category each one's time goes to. Runtime calls that
# wait for the device (…Synchronize, memcpy calls: a copy call blocks until its copy is done)
# are not launch overhead: their time the device does not cover is "other" (waiting).
OUR_ROLES = (
    "device_compute",
    "device_to_device",
    "device_collectives",
    "startup",
    "kernel_launch",
    "input",
    "other",
    "host_compute",
)
# One-off start-up calls (names.is_startup_call) count as kernel launch in the breakdown, as
# runtime calls always have; their time is also kept apart so the verdict can leave it out.
STARTUP_ROLE = "startup"
# A launch or other non-waiting runtime call this long is not launch overhead (microseconds) but
# a one-off: lazy module loading or PTX JIT at a kernel's first launch.
LONG_CALL_US = 50_000.0


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
    compute_capability: str  # "8.0" from an NVIDIA GPU's deviceProperties, else ""
    devices_used: int
    on_device: bool  # device events, runtime calls or listed devices: a GPU job
    runtime_ms_per_step: float  # runtime calls' share the plugin would show as 0 on today's traces
    runtime_2021: bool
    warnings: list[str] = field(default_factory=list)
    startup_ms: list[float] = field(default_factory=list)  # per step, inside kernel launch
    startup_calls: dict[str, float] = field(default_factory=dict)  # name -> ms in the steps
    gpu_step_marks: int = 0  # see Collector
    dataloader_annotations: int = 0
    gpu_metrics: list[GpuMetric] = field(default_factory=list)  # the plugin's GPU figures
    extras: RankExtras | None = None  # FLOPs and memory (kineto/extras.py)
    amd_arch: str = ""  # "gfx90a" where an AMD GPU's deviceProperties say which, else ""


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def _named(c: Collector, ids: Ints, rule: Callable[[str], bool]) -> npt.NDArray[np.bool_]:
    """Which rows' names (name ids) satisfy `rule`: a table over the trace's names, looked up
    (np.isin sorted the 2.8 M runtime calls of a 2 GiB trace, four times)."""
    table = np.fromiter(map(rule, c.names), dtype=bool, count=len(c.names))
    return table[ids] if len(table) else np.zeros(len(ids), dtype=bool)


def _waits(name: str) -> bool:
    return WAIT_CALL.search(name) is not None


def _roles(c: Collector, dev: Device, base: float) -> Generator[list[Ranges]]:
    """The role ranges of both vocabularies, in priority order: the native ones, then
    tuiprof's, one list at a time (what both share is made once), so that only one
    vocabulary's are held while its steps are split."""
    k = dev.kernels
    by_ext = np.isin(k[:, 4], np.fromiter(c.comm_ext, dtype=np.float64, count=len(c.comm_ext)))
    by_name = _named(c, k[:, 2].astype(np.intp), names.is_collective)
    collective = by_ext | by_name
    h = dev.host
    rt_nid = h.nid[dev.runtime]
    waits = _named(c, rt_nid, _waits)
    startup = ~waits & _startup_rows(c, dev, rt_nid)
    del rt_nid

    def span(rows: Array, where: npt.NDArray[np.bool_] | None = None) -> Ranges:
        """The union of the rows' spans (of those `where` says)."""
        return spans_union(rows[:, 0], rows[:, 1], base, where)

    def host(rows: npt.NDArray[np.bool_]) -> Ranges:
        """The union of the spans of the host rows a mask picks."""
        return spans_union(h.ts, h.end, base, rows)

    memcpy, memset = span(dev.memcpy), span(dev.memset)
    host_comm = as_ranges(c.comm_host, base)
    dataloader = as_ranges(c.dataloader, base)
    cpu = host(dev.cpu_exec)
    yield [
        span(k, ~by_ext),
        memcpy,
        memset,
        union(np.concatenate([span(k, by_ext), host_comm])),
        host(dev.runtime),
        dataloader,
        cpu,
    ]
    yield [
        span(k, ~collective),
        union(np.concatenate([memcpy, memset])),
        union(np.concatenate([span(k, collective), host_comm])),
        host(dev.runtimes(startup)),
        host(dev.runtimes(~waits & ~startup)),
        dataloader,
        host(dev.runtimes(waits)),
        cpu,
    ]


def _startup_rows(c: Collector, dev: Device, rt_nid: Ints) -> npt.NDArray[np.bool_]:
    """Runtime calls that are start-up: by name, or a call too long to be launch overhead (a
    mask over the runtime calls, in file order; `rt_nid`: their name ids)."""
    h = dev.host
    by_name = _named(c, rt_nid, names.is_startup_call)
    dur = h.end[dev.runtime]
    dur -= h.ts[dev.runtime]
    return by_name | (dur >= LONG_CALL_US)


def _startup_calls(c: Collector, dev: Device, spans: list[tuple[float, float]]) -> dict[str, float]:
    """Each start-up call's time inside the steps (ms), by name."""
    h = dev.host
    rt_nid = h.nid[dev.runtime]
    rows = dev.runtimes(~_named(c, rt_nid, _waits) & _startup_rows(c, dev, rt_nid))
    del rt_nid
    lo, hi = spans[0][0], spans[-1][1]
    inside = np.clip(np.minimum(h.end[rows], hi) - np.maximum(h.ts[rows], lo), 0.0, None)
    out: dict[str, float] = {}
    for nid, us in zip(h.nid[rows].tolist(), inside.tolist(), strict=True):
        if us > 0:
            name = c.names[nid]
            out[name] = out.get(name, 0.0) + us / 1000.0
    return out


def _device_names(props: list[dict[str, object]] | None) -> dict[int, str]:
    """deviceProperties' names by device id."""
    by_id: dict[int, str] = {}
    for i, p in enumerate(props or []):
        if isinstance(p, dict):
            did = _int(p.get("id"))
            by_id[did if did is not None else i] = str(p.get("name") or "")
    return by_id


def _compute_capability(props: list[dict[str, object]] | None) -> str:
    """The first listed NVIDIA GPU's CUDA compute capability. ROCm writes its own major.minor
    (gfx90a as 9.0) and a warp of 64; those are not CUDA's and are left out."""
    for p in props or []:
        if not isinstance(p, dict) or p.get("warpSize") not in (32, None):
            continue
        if "AMD" in str(p.get("name") or "") or "Radeon" in str(p.get("name") or ""):
            continue
        major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
        if major is not None and minor is not None:
            return f"{major}.{minor}"
    return ""


# ROCm's computeMajor.computeMinor and compute units (numSms) → the gfx architecture. gfx908
# (MI100) and gfx90a (MI210, MI250/MI250X GCDs) both read 9.0; their CU counts tell them apart.
_AMD_ARCH: dict[tuple[int, int], str] = {(9, 4): "gfx942", (9, 5): "gfx950"}
_GFX90A_CUS = (104, 110)  # MI210 and an MI250 GCD; an MI250X GCD


def _amd_arch(props: list[dict[str, object]] | None) -> str:
    """The first AMD GPU's gfx architecture where its deviceProperties tell it, else ""."""
    for p in props or []:
        name = str(p.get("name") or "")
        if p.get("warpSize") != 64 and "AMD" not in name and "Radeon" not in name:
            continue
        major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
        if major is None or minor is None:
            return ""
        if (major, minor) == (9, 0):
            return "gfx90a" if _int(p.get("numSms")) in _GFX90A_CUS else ""
        return _AMD_ARCH.get((major, minor), "")
    return ""


def _devices(dev: Device, props: list[dict[str, object]] | None) -> tuple[list[str], int]:
    used = sorted(
        int(d) for d in np.unique(np.concatenate([dev.kernels[:, 5], dev.copies[:, 3]])) if d >= 0
    )
    by_id = _device_names(props)
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
    chunk_bytes: int | None = None,
    workers: int | None = None,
    parallel_from: int = PARALLEL_FROM,
    rows: RowSink | None = None,
) -> RankResult:
    """`chunk_bytes`: unpacked JSON decoded at a time (stream.CHUNK_BYTES by default);
    `workers`, `parallel_from`: processes that decode the parts of a trace longer than that
    (workers.read; by default one per core); `rows`: where the timeline's rows go, as read."""
    heap.bound(reading=True)
    stream = TraceStream(path, cancel=cancel, progress=progress, chunk_bytes=chunk_bytes)
    c, extras = read(
        stream, Collector(), Extras(), workers=workers, parallel_from=parallel_from, rows=rows
    )

    def check() -> None:  # the stages after the read take seconds on a large trace
        if cancel is not None and cancel.is_set():
            raise Cancelled()

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
    check()
    heap.bound(reading=False)
    dev = c.device()
    heap.release()  # the column chunks device() joined and dropped
    check()
    steps = find_steps(c, dev, ignore_markers=ignore_markers)
    heap.release()
    check()
    breakdowns: list[StepBreakdown] = []
    runtime_per_step = 0.0
    startup_ms: list[float] = []
    startup_calls: dict[str, float] = {}
    if steps is not None and steps.spans:
        base = steps.spans[0][0]
        roles = _roles(c, dev, base)
        spans = as_ranges(steps.spans, base)
        native = partition(next(roles), spans) / 1000.0
        heap.release()
        ours = partition(next(roles), spans) / 1000.0
        roles.close()  # before the op tree needs the memory
        heap.release()
        for i, n in enumerate(steps.numbers):
            length = (steps.spans[i][1] - steps.spans[i][0]) / 1000.0
            mine: dict[str, float] = {}
            for k, v in zip((*OUR_ROLES, "other"), ours[i], strict=True):
                if k == STARTUP_ROLE:
                    startup_ms.append(float(v))
                    k = "kernel_launch"
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
        if any(startup_ms):
            startup_calls = _startup_calls(c, dev, steps.spans)
    check()
    ops = analyse_ops(c, dev)
    heap.release()  # the op tree's temporaries, before the GPU figures'
    device_names, used = _devices(dev, meta.deviceProperties)
    metrics = []
    if steps is not None and steps.spans:
        names_by_id = _device_names(meta.deviceProperties)
        metrics = gpu_metrics(dev.kernels, steps.spans, steps.numbers, names_by_id, name)
    return RankResult(
        name=name,
        rank=_int(info.get("rank")),
        world_size=_int(info.get("world_size")),
        steps=steps,
        breakdowns=breakdowns,
        ops=ops,
        device_names=device_names,
        compute_capability=_compute_capability(meta.deviceProperties),
        amd_arch=_amd_arch(meta.deviceProperties),
        devices_used=used,
        on_device=bool(
            c.kernel_count or c.memcpy_count or c.memset_count or c.runtime_calls or used
        ),
        runtime_ms_per_step=runtime_per_step,
        runtime_2021=c.runtime_2021 > 0,
        warnings=warnings,
        gpu_step_marks=c.gpu_step_marks,
        startup_ms=startup_ms,
        startup_calls=startup_calls,
        dataloader_annotations=c.dataloader_annotations,
        gpu_metrics=metrics,
        extras=extras.result(c, steps),
    )
