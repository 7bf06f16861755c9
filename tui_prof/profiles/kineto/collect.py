"""One pass over a trace's events into compact numpy columns: what steps, breakdown, ops and kernels
need.

Contract: `Collector.add(batch)` for every batch a TraceStream yields, then `device()` once and
read its fields; no event struct is kept, only columns of numbers (a few dozen bytes per kept
event) and interned names, so a trace's events can be dropped batch by batch. Each batch is
one tight loop that appends numbers to flat lists, made into one numpy chunk per kind at the
batch's end (a tuple per row, kept to the end, was most of the memory on large traces:
benchmarks/README.md, section 9). Event roles follow torch-tb-profiler's
EventParser (event_parser.py, trace.py) where it is right: ProfilerStep#N markers,
`enumerate(DataLoader)#…__next__` and `enumerate(DataPipe)#…` spans as DataLoader, the five
`nccl:`/`gloo:` collectives as Communication (and kernels whose external id is one of theirs).
Two deliberate differences: runtime calls of every vocabulary count (`cuda_runtime`,
`cuda_driver`, ROCm's `hip*`; the plugin reads only 2021's `Runtime`), and DataLoader
`user_annotation`s count (the plugin drops every user_annotation but steps and collectives).
Negative durations become 0 and events without a time are skipped; both are counted for a
warning.

Adding a column (an op's `Input Dims`, `flops`, an instant event's `Bytes`): name the field in
events.Args, take it in the kind's `_take_*` method below as one more array, keep its chunks
beside the others. Host rows stay in file order until `device()`; sorting them by thread and
time (ops.py) is what a per-step index would reuse (steps are time ranges: `searchsorted`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from tui_prof.profiles import heap
from tui_prof.profiles.kineto.events import Args, Event, Kind, kind_of

# plain ints: the loop compares them once or more per event
IGNORED, OP, ANNOTATION = int(Kind.IGNORED), int(Kind.OP), int(Kind.ANNOTATION)
RUNTIME, RUNTIME_2021, KERNEL = int(Kind.RUNTIME), int(Kind.RUNTIME_2021), int(Kind.KERNEL)
MEMCPY, MEMSET, DATALOADER = int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.DATALOADER)

STEP_PREFIX = "ProfilerStep#"
OPTIMIZER_PREFIX = "Optimizer.step#"
# torch-tb-profiler's NcclOpNameSet and GlooOpNameSet (trace.py).
COMM_OPS = frozenset(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)

# Flags of the host rows.
IS_OP = 1
IS_RUNTIME = 2
HAS_16BIT_INPUT = 4
NOT_CPU_EXEC = 8  # an op the plugin counts as DataLoader or Communication, not CPU Exec

# Host names' roles, found once per distinct name.
ROLE_OPTIMIZER = 1
ROLE_DATALOADER = 2
ROLE_COMM = 4

# A GPU-side copy of a host annotation (gpu_user_annotation): ignored, its steps counted.
_GPU_ANNOTATION = 100

Span = tuple[float, float]
KERNEL_COLUMNS = 8  # ts, end, name id, correlation, external id, device, occupancy, blocks/SM
Array = npt.NDArray[np.float64]
Ints = npt.NDArray[np.signedinteger[Any]]


def is_dataloader(name: str) -> bool:
    """The plugin's DataLoader rule (event_parser.py, StepParser._parse_step)."""
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or (
        name.startswith("enumerate(DataPipe)#")
    )


def _has_16bit(types: Sequence[str] | None) -> bool:
    return bool(types) and any(("Half" in t or "BFloat16" in t) for t in types or ())


def table(rows: Sequence[tuple[float, ...]], width: int) -> Array:
    """Rows of numbers as an (n, width) float array (ids stay exact: they are < 2**53)."""
    if not rows:
        return np.zeros((0, width))
    return np.array(rows, dtype=np.float64)


K = TypeVar("K")
V = TypeVar("V")


class _Memo(dict[K, V], Generic[K, V]):
    """A dict that computes a missing value once: `map(memo.__getitem__, keys)` runs in C."""

    def __init__(self, make: Callable[[K], V]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: K) -> V:
        v = self[key] = self._make(key)
        return v


@dataclass
class Host:
    """Every thread's ops and runtime calls, one row each, in file order (µs, as in the file)."""

    thread: Ints  # int32: index into Collector.thread_keys
    ts: Array
    end: Array
    nid: Ints  # int32
    flags: Ints  # int8
    # runtime calls' correlation id, -1 for ops and calls without one; emptied by the op tree
    # (ops.py), its last reader
    corr: Array


@dataclass
class Device:
    """The device events as arrays, and which host rows are runtime calls and CPU Exec ops, for
    the vectorised stages. The runtime calls' columns are read from the host rows where a stage
    needs them, not copied here: a copy of them stayed beside the host rows through every stage
    (32 bytes a call, 90 MB on a 2 GiB trace)."""

    kernels: Array  # ts, end, name id, correlation, external id, device, occupancy, blocks/SM
    copies: Array  # memcpy then memset rows: ts, end, correlation, device
    memcpy_rows: int
    host: Host  # in file order (the op tree sorts it afterwards: the masks are then stale)
    runtime: npt.NDArray[np.bool_]  # which host rows are runtime calls
    cpu_exec: npt.NDArray[np.bool_]  # which are ops the plugin counts as CPU Exec

    @property
    def memcpy(self) -> Array:
        return self.copies[: self.memcpy_rows]

    @property
    def memset(self) -> Array:
        return self.copies[self.memcpy_rows :]

    def runtimes(self, where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.bool_]:
        """Which host rows are the runtime calls that `where` (a mask over the runtime calls,
        in file order) picks; all of them without it."""
        if where is None:
            return self.runtime
        rows = self.runtime.copy()
        rows[rows] = where
        return rows


_COUNTS = (
    "runtime_2021",
    "kernel_count",
    "memcpy_count",
    "memset_count",
    "negative",
    "untimed",
    "gpu_step_marks",
    "dataloader_annotations",
)
_SPANS = ("step_marks", "optimizer_marks", "dataloader", "comm_host")


@dataclass
class Part:
    """What a worker process collected from one part (workers.py), with its own name and thread
    ids, which Collector.merge maps to the session's: picklable, numbers and names only."""

    names: list[str]
    thread_keys: list[tuple[int | str, int | str]]
    host: list[tuple[npt.NDArray[np.generic], ...]]
    kernels: list[Array]
    memcpy: list[Array]
    memset: list[Array]
    spans: dict[str, list[Any]]
    comm_ext: set[int]
    counts: dict[str, int]


def _lo(x: Array, where: npt.NDArray[np.bool_]) -> float:
    return float(np.min(x, where=where, initial=math.inf))


def _hi(x: Array, where: npt.NDArray[np.bool_]) -> float:
    return float(np.max(x, where=where, initial=-math.inf))


def _cat(chunks: list[npt.NDArray[Any]], dtype: type) -> npt.NDArray[Any]:
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)


@dataclass
class Collector:
    """Everything later stages need from the events (times in µs, as in the file)."""

    names: list[str] = field(default_factory=list)
    name_ids: dict[str, int] = field(default_factory=dict)
    thread_keys: list[tuple[int | str, int | str]] = field(default_factory=list)
    step_marks: list[tuple[float, float, int]] = field(default_factory=list)
    optimizer_marks: list[Span] = field(default_factory=list)
    dataloader: list[Span] = field(default_factory=list)
    comm_host: list[Span] = field(default_factory=list)
    comm_ext: set[int] = field(default_factory=set)
    runtime_2021: int = 0  # how many runtime calls use the plugin's `Runtime` category
    kernel_count: int = 0
    memcpy_count: int = 0
    memset_count: int = 0
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
    host: Host | None = None  # set by device()
    # column chunks, one per batch
    _host: list[tuple[npt.NDArray[np.generic], ...]] = field(default_factory=list)
    _kernels: list[Array] = field(default_factory=list)
    _memcpy: list[Array] = field(default_factory=list)
    _memset: list[Array] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._kind: _Memo[str, int] = _Memo(self._kind_of)
        self._nid: _Memo[str, int] = _Memo(self._new_name)
        self._thread: _Memo[tuple[int | str, int | str], int] = _Memo(self._new_thread)
        self._sixteen: _Memo[tuple[str, ...] | None, int] = _Memo(
            lambda t: HAS_16BIT_INPUT if _has_16bit(t) else 0
        )
        self._step_of: list[int] = []  # per name id: ProfilerStep number or -1
        self._role_of: list[int] = []  # per name id: ROLE_* bits

    # -- names ------------------------------------------------------------------------------

    @staticmethod
    def _kind_of(cat: str) -> int:
        if cat.lower() == "gpu_user_annotation":
            return _GPU_ANNOTATION
        return int(kind_of(cat))

    def _new_name(self, name: str) -> int:
        i = self.name_ids[name] = len(self.names)
        self.names.append(name)
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
        self._step_of.append(step)
        self._role_of.append(role)
        return i

    def _new_thread(self, key: tuple[int | str, int | str]) -> int:
        self.thread_keys.append(key)
        return len(self.thread_keys) - 1

    # -- one batch ---------------------------------------------------------------------------

    def add(self, batch: Sequence[Event]) -> None:
        """Fold one batch of events in: one loop, names and categories classified once each,
        numbers into flat lists that become one numpy chunk per kind at the batch's end."""
        kinds, nids, threads, sixteen = self._kind, self._nid, self._thread, self._sixteen
        step_of, role_of = self._step_of, self._role_of
        host: list[float] = []  # thread, ts, end, name id, flags, correlation per row
        kernels: list[float] = []  # ts, end, name, corr., external id, device, occ., blocks/SM
        copies: tuple[list[float], list[float]] = ([], [])  # memset, memcpy: ts, end, corr, dev
        last_pid: int | str | None = None
        last_tid: int | str | None = None
        th = -1
        for e in batch:
            if e.ph != "X":
                continue
            kind = kinds[e.cat]
            if kind == IGNORED:
                continue
            if kind == _GPU_ANNOTATION:
                if e.name.startswith(STEP_PREFIX):
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
            args = e.args
            if kind in (OP, ANNOTATION):
                nid = nids[e.name]
                step = step_of[nid]
                if step >= 0:
                    self.step_marks.append((ts, end, step))
                    continue
                is_op = kind == OP
                flags = IS_OP
                role = role_of[nid]
                if role:
                    flags |= self._role(args, role, ts, end, is_op)
                if not is_op:
                    continue
                if args is not None and args.input_type:
                    flags |= sixteen[args.input_type]
                if e.pid != last_pid or e.tid != last_tid:
                    last_pid, last_tid = e.pid, e.tid
                    th = threads[(last_pid, last_tid)]
                host += (th, ts, end, nid, flags, -1)
            elif kind in (RUNTIME, RUNTIME_2021):
                if kind == RUNTIME_2021:
                    self.runtime_2021 += 1
                corr = -1
                if args is not None and args.correlation is not None:
                    corr = args.correlation
                if e.pid != last_pid or e.tid != last_tid:
                    last_pid, last_tid = e.pid, e.tid
                    th = threads[(last_pid, last_tid)]
                host += (th, ts, end, nids[e.name], IS_RUNTIME, corr)
            elif kind == KERNEL:
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
                kernels += (ts, end, nids[e.name], corr, ext, dev, occ, blocks)
            elif kind in (MEMCPY, MEMSET):
                corr = dev = -1
                if args is not None:
                    if args.correlation is not None:
                        corr = args.correlation
                    if args.device is not None:
                        dev = args.device
                copies[kind == MEMCPY].extend((ts, end, corr, dev))
            elif kind == DATALOADER:
                self.dataloader.append((ts, end))
        self._keep(host, kernels, copies)

    def _role(self, args: Args | None, role: int, ts: float, end: float, is_op: bool) -> int:
        """Record a host span's role; the flags it gives its row."""
        flags = 0
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
                    self.comm_ext.add(x)
        return flags

    def _keep(
        self, host: list[float], kernels: list[float], copies: tuple[list[float], list[float]]
    ) -> None:
        """One batch's rows as compact column chunks."""
        if host:
            rows = np.array(host, dtype=np.float64).reshape(-1, 6)
            self._host.append(
                (
                    rows[:, 0].astype(np.int32),
                    rows[:, 1].copy(),
                    rows[:, 2].copy(),
                    rows[:, 3].astype(np.int32),
                    rows[:, 4].astype(np.int8),
                    rows[:, 5].copy(),
                )
            )
        if kernels:
            self._kernels.append(np.array(kernels, dtype=np.float64).reshape(-1, KERNEL_COLUMNS))
            self.kernel_count += len(kernels) // KERNEL_COLUMNS
        memset, memcpy = copies
        if memcpy:
            self._memcpy.append(np.array(memcpy, dtype=np.float64).reshape(-1, 4))
            self.memcpy_count += len(memcpy) // 4
        if memset:
            self._memset.append(np.array(memset, dtype=np.float64).reshape(-1, 4))
            self.memset_count += len(memset) // 4

    # -- parts collected elsewhere ------------------------------------------------------------

    def export(self) -> Part:
        """This collector's rows, for a collector in another process to merge."""
        return Part(
            self.names,
            self.thread_keys,
            self._host,
            self._kernels,
            self._memcpy,
            self._memset,
            {k: getattr(self, k) for k in _SPANS},
            self.comm_ext,
            {k: getattr(self, k) for k in _COUNTS},
        )

    def merge(self, part: Part) -> None:
        """Fold in a part collected in another process, as if `add` had seen its events here:
        its names and threads get ids in its first-seen order, as they would have."""
        nid = np.fromiter(map(self._nid.__getitem__, part.names), np.int32, len(part.names))
        th = np.fromiter(
            map(self._thread.__getitem__, part.thread_keys), np.int32, len(part.thread_keys)
        )
        for thread, ts, end, names, flags, corr in part.host:
            self._host.append((th[thread], ts, end, nid[names], flags, corr))
        for k in part.kernels:
            k[:, 2] = nid[k[:, 2].astype(np.int64)]
            self._kernels.append(k)
        self._memcpy += part.memcpy
        self._memset += part.memset
        for key in _SPANS:
            getattr(self, key).extend(part.spans[key])
        self.comm_ext |= part.comm_ext
        for key in _COUNTS:
            setattr(self, key, getattr(self, key) + part.counts[key])

    # -- the whole trace ---------------------------------------------------------------------

    def device(self) -> Device:
        """The device events, runtime calls and CPU Exec spans as arrays; sets `host` and the
        spans above. The column chunks are released."""
        cols: list[list[npt.NDArray[Any]]] = [list(c) for c in zip(*self._host, strict=True)]
        self._host.clear()
        cols = cols or [[] for _ in range(6)]

        def column(i: int, dtype: type) -> npt.NDArray[Any]:  # frees its chunks as it goes
            out = _cat(cols[i], dtype)
            cols[i].clear()
            heap.release()  # their pages: else each column's chunks stay resident beside it
            return out

        h = self.host = Host(
            thread=column(0, np.int32),
            ts=column(1, np.float64),
            end=column(2, np.float64),
            nid=column(3, np.int32),
            flags=column(4, np.int8),
            corr=column(5, np.float64),
        )
        rt = (h.flags & IS_RUNTIME) != 0
        is_op = (h.flags & IS_OP) != 0
        cpu = is_op & ((h.flags & NOT_CPU_EXEC) == 0)

        def rows(chunks: list[Array], width: int) -> Array:
            out = np.concatenate(chunks) if chunks else np.zeros((0, width))
            chunks.clear()
            return out

        kernels = rows(self._kernels, KERNEL_COLUMNS)
        memcpy, memset = rows(self._memcpy, 4), rows(self._memset, 4)
        dev = Device(
            kernels=kernels,
            copies=np.concatenate([memcpy, memset]),
            memcpy_rows=len(memcpy),
            host=h,
            runtime=rt,
            cpu_exec=cpu,
        )
        del memcpy, memset, cpu
        self.runtime_calls = int(rt.sum())
        steps = table(self.step_marks, 3)[:, :2]
        ops = int(is_op.sum())
        lo = [steps[:, 0]]
        hi = [steps[:, 1]]
        if ops + len(steps):  # min and max where the rows are ops, without copying them
            self.cpu_lo = min([_lo(h.ts, is_op), *(float(x.min()) for x in lo if len(x))])
            self.cpu_hi = max([_hi(h.end, is_op), *(float(x.max()) for x in hi if len(x))])
        del is_op
        other = table(self.dataloader + self.comm_host + self.optimizer_marks, 2)
        lo += [h.ts, dev.kernels[:, 0], dev.copies[:, 0], other[:, 0]]
        hi += [h.end, dev.kernels[:, 1], dev.copies[:, 1], other[:, 1]]
        if sum(len(x) for x in lo):
            self.lo = float(min(x.min() for x in lo if len(x)))
            self.hi = float(max(x.max() for x in hi if len(x)))
        return dev
