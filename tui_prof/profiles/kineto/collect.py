"""One pass over a trace's events into compact lists: what steps, breakdown, ops and kernels need.

Contract: `Collector.add(batch)` for every batch a TraceStream yields, then read its fields; no
event struct is kept, only tuples of numbers and interned names, so a trace's events can be
dropped batch by batch. Event roles follow torch-tb-profiler's EventParser (event_parser.py,
trace.py) where it is right: ProfilerStep#N markers, `enumerate(DataLoader)#…__next__` and
`enumerate(DataPipe)#…` spans as DataLoader, the five `nccl:`/`gloo:` collectives as
Communication (and kernels whose external id is one of theirs). Two deliberate differences: runtime
calls of every vocabulary count (`cuda_runtime`, `cuda_driver`, ROCm's `hip*`; the plugin reads
only 2021's `Runtime`), and DataLoader `user_annotation`s count (the plugin drops every
user_annotation but steps and collectives). Negative durations become 0 and events without a
time are skipped; both are counted for a warning.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt

from tui_prof.profiles.kineto.events import Event, Kind, kind_of

IGNORED, OP, ANNOTATION = Kind.IGNORED, Kind.OP, Kind.ANNOTATION
RUNTIME, RUNTIME_2021, KERNEL = Kind.RUNTIME, Kind.RUNTIME_2021, Kind.KERNEL
MEMCPY, MEMSET, DATALOADER = Kind.MEMCPY, Kind.MEMSET, Kind.DATALOADER

STEP_PREFIX = "ProfilerStep#"
OPTIMIZER_PREFIX = "Optimizer.step#"
# torch-tb-profiler's NcclOpNameSet and GlooOpNameSet (trace.py).
COMM_OPS = frozenset(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)

# Flags of the per-thread rows.
IS_OP = 1
IS_RUNTIME = 2
HAS_16BIT_INPUT = 4
NOT_CPU_EXEC = 8  # an op the plugin counts as DataLoader or Communication, not CPU Exec

Span = tuple[float, float]
# A kernel: (ts, end, name id, correlation, external id, device, occupancy or -1,
# blocks per SM or -1)
KernelRow = tuple[float, float, int, int, int, int, float, float]


def is_dataloader(name: str) -> bool:
    """The plugin's DataLoader rule (event_parser.py, StepParser._parse_step)."""
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or (
        name.startswith("enumerate(DataPipe)#")
    )


def _has_16bit(types: Sequence[str]) -> bool:
    return any(("Half" in t or "BFloat16" in t) for t in types)


Array = npt.NDArray[np.float64]


def table(rows: Sequence[tuple[float, ...]], width: int) -> Array:
    """Rows of numbers as an (n, width) float array (ids stay exact: they are < 2**53)."""
    if not rows:
        return np.zeros((0, width))
    return np.array(rows, dtype=np.float64)


@dataclass
class Device:
    """The device events and runtime calls as arrays, for the vectorised stages."""

    kernels: Array  # ts, end, name id, correlation, external id, device, occupancy, blocks/SM
    runtimes: Array  # ts, end, correlation, name id
    copies: Array  # memcpy then memset rows: ts, end, correlation, device
    memcpy_rows: int
    cpu_exec: Array  # ts, end of the ops the plugin counts as CPU Exec

    @property
    def memcpy(self) -> Array:
        return self.copies[: self.memcpy_rows]

    @property
    def memset(self) -> Array:
        return self.copies[self.memcpy_rows :]


# Host names' roles, found once per distinct name.
ROLE_OPTIMIZER = 1
ROLE_DATALOADER = 2
ROLE_COMM = 4


@dataclass
class Collector:
    """Everything later stages need from the events (times in µs, as in the file)."""

    names: list[str] = field(default_factory=list)
    name_ids: dict[str, int] = field(default_factory=dict)
    step_marks: list[tuple[float, float, int]] = field(default_factory=list)
    optimizer_marks: list[Span] = field(default_factory=list)
    dataloader: list[Span] = field(default_factory=list)
    comm_host: list[Span] = field(default_factory=list)
    comm_ext: set[int] = field(default_factory=set)
    runtime_2021: int = 0  # how many runtime calls use the plugin's `Runtime` category
    # per (pid, tid): (ts, -end, name id, flags, correlation) of ops and runtime calls, the one
    # list of either (no second copy); -end so that plain tuple order puts an enclosing span
    # before what it encloses
    threads: dict[tuple[int | str, int | str], list[tuple[float, float, int, int, int]]] = field(
        default_factory=dict
    )
    # (ts, end, name id, correlation, external id, device, occupancy or -1, blocks/SM or -1)
    kernels: list[KernelRow] = field(default_factory=list)
    memcpy: list[tuple[float, float, int, int]] = field(default_factory=list)  # ts, end, corr, dev
    memset: list[tuple[float, float, int, int]] = field(default_factory=list)
    # Set by device(): the span of host ops and steps (the plugin's one-step fallback), of
    # every timed event, and how many runtime calls there were.
    cpu_lo: float = math.inf
    cpu_hi: float = -math.inf
    lo: float = math.inf
    hi: float = -math.inf
    runtime_calls: int = 0
    negative: int = 0
    untimed: int = 0
    gpu_step_marks: int = 0  # ProfilerStep#N copies on the GPU timeline (the plugin counts them)
    dataloader_annotations: int = 0  # DataLoader spans the plugin drops (user_annotation)
    _kinds: dict[str, Kind] = field(default_factory=dict)
    _host: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # step no, role, id
    _sixteen: dict[tuple[str, ...], bool] = field(default_factory=dict)

    def device(self) -> Device:
        """The device events, runtime calls and CPU Exec spans as arrays; sets the spans above."""
        n = sum(len(rows) for rows in self.threads.values())
        rows = cast(
            Array,
            np.fromiter(
                itertools.chain.from_iterable(self.threads.values()),
                dtype=np.dtype((np.float64, 5)),
                count=n,
            ).reshape(n, 5),
        )
        flags = rows[:, 3].astype(np.int64)
        rt = rows[(flags & IS_RUNTIME) != 0]
        is_op = (flags & IS_OP) != 0
        cpu = rows[is_op & ((flags & NOT_CPU_EXEC) == 0)]
        dev = Device(
            kernels=table(self.kernels, 8),
            runtimes=np.column_stack([rt[:, 0], -rt[:, 1], rt[:, 4], rt[:, 2]]),
            copies=table(self.memcpy + self.memset, 4),
            memcpy_rows=len(self.memcpy),
            cpu_exec=np.column_stack([cpu[:, 0], -cpu[:, 1]]),
        )
        self.runtime_calls = len(rt)
        steps = table(self.step_marks, 3)[:, :2]
        host = np.concatenate([np.column_stack([rows[is_op, 0], -rows[is_op, 1]]), steps])
        if len(host):
            self.cpu_lo, self.cpu_hi = float(host[:, 0].min()), float(host[:, 1].max())
        spans = [
            np.column_stack([rows[:, 0], -rows[:, 1]]),
            steps,
            dev.kernels[:, :2],
            dev.copies[:, :2],
            table(self.dataloader + self.comm_host + self.optimizer_marks, 2),
        ]
        every = np.concatenate(spans)
        if len(every):
            self.lo, self.hi = float(every[:, 0].min()), float(every[:, 1].max())
        return dev

    def _id(self, name: str) -> int:
        i = self.name_ids.get(name)
        if i is None:
            i = self.name_ids[name] = len(self.names)
            self.names.append(name)
        return i

    def _classify(self, name: str) -> tuple[int, int, int]:
        step = -1
        if name.startswith(STEP_PREFIX):
            try:
                step = int(name[len(STEP_PREFIX) :])
            except ValueError:
                step = -1
        role = 0
        if name.startswith(OPTIMIZER_PREFIX):
            role |= ROLE_OPTIMIZER
        if is_dataloader(name):
            role |= ROLE_DATALOADER
        elif name in COMM_OPS:
            role |= ROLE_COMM
        info = self._host[name] = (step, role, self._id(name))
        return info

    def add(self, batch: Sequence[Event]) -> None:
        """Fold one batch of events in: one loop, names and categories classified once each."""
        kinds, host, ids, sixteen = self._kinds, self._host, self.name_ids, self._sixteen
        threads, kernels = self.threads, self.kernels
        step_marks, comm_ext = self.step_marks, self.comm_ext
        last_pid: int | str | None = None
        last_tid: int | str | None = None
        lst: list[tuple[float, float, int, int, int]] = []
        for e in batch:
            if e.ph != "X":
                continue
            cat = e.cat
            kind = kinds.get(cat)
            if kind is None:
                kind = kinds[cat] = kind_of(cat)
            if kind is IGNORED:
                if e.name.startswith(STEP_PREFIX) and cat.lower() == "gpu_user_annotation":
                    self.gpu_step_marks += 1
                continue
            ts = e.ts
            dur = e.dur
            if ts is None or dur is None or ts != ts or dur != dur:  # missing or NaN
                self.untimed += 1
                continue
            if dur < 0:
                self.negative += 1
                dur = 0.0
            end = ts + dur
            name = e.name
            args = e.args
            if kind is OP or kind is ANNOTATION:
                info = host.get(name)
                if info is None:
                    info = self._classify(name)
                step, role, nid = info
                if step >= 0:
                    step_marks.append((ts, end, step))
                    continue
                is_op = kind is OP
                flags = IS_OP
                if role:
                    if role & ROLE_OPTIMIZER:
                        self.optimizer_marks.append((ts, end))
                    if role & ROLE_DATALOADER:
                        self.dataloader.append((ts, end))
                        flags |= NOT_CPU_EXEC
                        if not is_op:
                            self.dataloader_annotations += 1
                    elif role & ROLE_COMM:
                        self.comm_host.append((ts, end))
                        flags |= NOT_CPU_EXEC
                        if args is not None:
                            x = args.external_id
                            if x is None:
                                x = args.external_id_2021
                            if x is not None:
                                comm_ext.add(x)
                if not is_op:
                    continue
                if args is not None and args.input_type:
                    key = tuple(args.input_type)
                    half = sixteen.get(key)
                    if half is None:
                        half = sixteen[key] = _has_16bit(key)
                    if half:
                        flags |= HAS_16BIT_INPUT
                if e.pid != last_pid or e.tid != last_tid:
                    last_pid, last_tid = e.pid, e.tid
                    lst = threads.setdefault((last_pid, last_tid), [])
                lst.append((ts, -end, nid, flags, -1))
            elif kind is RUNTIME or kind is RUNTIME_2021:
                if kind is RUNTIME_2021:
                    self.runtime_2021 += 1
                known = ids.get(name)
                nid = known if known is not None else self._id(name)
                corr = -1
                if args is not None and args.correlation is not None:
                    corr = args.correlation
                if e.pid != last_pid or e.tid != last_tid:
                    last_pid, last_tid = e.pid, e.tid
                    lst = threads.setdefault((last_pid, last_tid), [])
                lst.append((ts, -end, nid, IS_RUNTIME, corr))
            elif kind is KERNEL:
                known = ids.get(name)
                nid = known if known is not None else self._id(name)
                corr = ext = -1
                dev = e.pid if isinstance(e.pid, int) else 0
                occ = blocks = -1.0
                if args is not None:
                    if args.correlation is not None:
                        corr = args.correlation
                    x = args.external_id
                    if x is None:
                        x = args.external_id_2021
                    if x is not None:
                        ext = x
                    if args.device is not None:
                        dev = args.device
                    if args.occupancy is not None:
                        occ = args.occupancy
                    if args.blocks_per_sm is not None:
                        blocks = args.blocks_per_sm
                kernels.append((ts, end, nid, corr, ext, dev, occ, blocks))
            elif kind is MEMCPY or kind is MEMSET:
                corr = dev = -1
                if args is not None:
                    if args.correlation is not None:
                        corr = args.correlation
                    if args.device is not None:
                        dev = args.device
                (self.memcpy if kind is MEMCPY else self.memset).append((ts, end, corr, dev))
            elif kind is DATALOADER:
                self.dataloader.append((ts, end))
