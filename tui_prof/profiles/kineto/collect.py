"""One pass over a trace's events into compact numpy columns (columns.py): what steps, breakdown,
ops and kernels need, and, given an index, the timeline's rows.

Contract: `Collector.add(batch)` for every batch a TraceStream yields, then `device()` once and
read its fields; no event struct is kept, only columns of numbers (a few dozen bytes per kept
event) and interned names, so a trace's events can be dropped batch by batch. Each batch is
one tight loop that appends numbers to flat lists, made into one numpy chunk per kind at the
batch's end (a tuple per row, kept to the end, was most of the memory on large traces:
benchmarks/README.md, section 9). Event roles follow torch-tb-profiler's EventParser where it
is right (roles.py): ProfilerStep#N markers, DataLoader spans, the five `nccl:`/`gloo:`
collectives as Communication (and kernels whose external id is one of theirs).
Two deliberate differences: runtime calls of every vocabulary count (`cuda_runtime`,
`cuda_driver`, ROCm's `hip*`; the plugin reads only 2021's `Runtime`), and DataLoader
`user_annotation`s count (the plugin drops every user_annotation but steps and collectives).
Negative durations become 0 and events without a time are skipped; both are counted for a
warning. With an `index` (timeline/kineto_rows.RowMaker), the same loop also notes each event
the timeline draws; `take_rows()` hands them over after each batch.

Adding a column (an op's `Input Dims`, `flops`, an instant event's `Bytes`): name the field in
events.Args, take it in its kind's branch of `add` into that kind's flat list, and widen the
list's rows where `_keep` reshapes them. Host rows stay in file order until `device()`; sorting
them by thread and time is the op tree's (ops.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from tui_prof.profiles import heap
from tui_prof.profiles.kineto.columns import (
    COUNTS,
    HAS_16BIT_INPUT,
    IS_OP,
    IS_RUNTIME,
    KERNEL_COLUMNS,
    NOT_CPU_EXEC,
    SPANS,
    Array,
    Device,
    Host,
    Part,
    Span,
    table,
)
from tui_prof.profiles.kineto.events import Args, Event, Kind, kind_of
from tui_prof.profiles.kineto.roles import (
    ROLE_COMM,
    ROLE_DATALOADER,
    ROLE_OPTIMIZER,
    ROLE_STEP_NAME,
    SHOWN_ANNOTATION,
    STEP_PREFIX,
    roles,
    step_number,
)
from tui_prof.profiles.timeline.kineto_rows import CODE, UNSEEN, PartRows, RowMaker, take

# plain ints: the loop compares them once or more per event
IGNORED, OP, ANNOTATION = int(Kind.IGNORED), int(Kind.OP), int(Kind.ANNOTATION)
RUNTIME, RUNTIME_2021, KERNEL = int(Kind.RUNTIME), int(Kind.RUNTIME_2021), int(Kind.KERNEL)
MEMCPY, MEMSET, DATALOADER = int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.DATALOADER)

# A GPU-side copy of a host annotation (gpu_user_annotation): ignored, its steps counted.
_GPU_ANNOTATION = 100


def _has_16bit(types: Sequence[str] | None) -> bool:
    return bool(types) and any(("Half" in t or "BFloat16" in t) for t in types or ())


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
    # where set, each batch's loop also makes the timeline's rows (take_rows, after each add)
    index: bool = False
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
        self._rows: PartRows | None = None  # the timeline's rows of the last batch (index)

    # -- names ------------------------------------------------------------------------------

    @staticmethod
    def _kind_of(cat: str) -> int:
        if cat.lower() == "gpu_user_annotation":
            return _GPU_ANNOTATION
        return int(kind_of(cat))

    def _new_name(self, name: str) -> int:
        i = self.name_ids[name] = len(self.names)
        self.names.append(name)
        self._step_of.append(step_number(name))
        self._role_of.append(roles(name))
        return i

    def _new_thread(self, key: tuple[int | str, int | str]) -> int:
        self.thread_keys.append(key)
        return len(self.thread_keys) - 1

    # -- one batch ---------------------------------------------------------------------------

    def add(self, batch: Sequence[Event]) -> None:
        """Fold one batch of events in: one loop, names and categories classified once each,
        numbers into flat lists that become one numpy chunk per kind at the batch's end. With
        `index` set, the same loop notes what the timeline's rows need beyond these columns
        (timeline/kineto_rows.RowMaker: a second loop over the events cost as much again)."""
        kinds, nids, threads, sixteen = self._kind, self._nid, self._thread, self._sixteen
        step_of, role_of = self._step_of, self._role_of
        host: list[float] = []  # thread, ts, end, name id, flags, correlation per row
        kernels: list[float] = []  # ts, end, name, corr., external id, device, occ., blocks/SM
        copies: tuple[list[float], list[float]] = ([], [])  # memset, memcpy: ts, end, corr, dev
        last_pid: int | str | None = None
        last_tid: int | str | None = None
        th = -1
        rm = RowMaker() if self.index else None
        tl = rm if rm is not None else RowMaker()  # its tables, looked up only with `rm`
        op_info, kernel_at, side, info_ids = tl.op_info, tl.kernels, tl.side, tl.info_ids
        k_pid: Any = UNSEEN  # a kernel's stream: the last one's, and its track
        k_tid: Any = UNSEEN
        k_track = -1.0
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
                if rm is not None:
                    rm.skip_untimed(kind, e.name, len(host), len(kernels))
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
                    if rm is not None and role & SHOWN_ANNOTATION:
                        key = (False, e.pid, e.tid)
                        side += (ts, end, nid * CODE + kind, tl.info(args), tl.track(key))
                        side += (len(host), len(kernels))
                    continue
                if args is not None and args.input_type:
                    flags |= sixteen[args.input_type]
                if e.pid != last_pid or e.tid != last_tid:
                    last_pid, last_tid = e.pid, e.tid
                    th = threads[(last_pid, last_tid)]
                host += (th, ts, end, nid, flags, -1)
                if rm is not None:  # its input text (the timeline draws no ProfilerStep#)
                    if args is None or role & ROLE_STEP_NAME:
                        op_info.append(-1.0)
                    elif (dims := args.input_dims) or args.input_type:
                        got = info_ids.get((bytes(dims), args.input_type))
                        op_info.append(tl.info(args) if got is None else got)
                    else:
                        op_info.append(-1.0)
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
                if rm is not None:  # its stream, and how many host rows came before it
                    if e.tid != k_tid or e.pid != k_pid:
                        k_pid, k_tid = e.pid, e.tid
                        k_track = tl.track((True, k_pid, k_tid))
                    kernel_at += (k_track, len(host))
                kernels += (ts, end, nids[e.name], corr, ext, dev, occ, blocks)
            elif kind in (MEMCPY, MEMSET):
                corr = dev = -1
                if args is not None:
                    if args.correlation is not None:
                        corr = args.correlation
                    if args.device is not None:
                        dev = args.device
                copies[kind == MEMCPY].extend((ts, end, corr, dev))
                if rm is not None:
                    key = (True, e.pid, e.tid)
                    side += (ts, end, tl.name(e.name, kind), corr, tl.track(key))
                    side += (len(host), len(kernels))
            elif kind == DATALOADER:
                self.dataloader.append((ts, end))
                if rm is not None:
                    key = (False, e.pid, e.tid)
                    side += (ts, end, tl.name(e.name, kind), -1.0, tl.track(key))
                    side += (len(host), len(kernels))
        host_rows, kernel_rows = self._keep(host, kernels, copies)
        if rm is not None:
            self._rows = take(
                rm,
                host_rows,
                kernel_rows,
                self.names,
                self._role_of,
                self.thread_keys,
                self.comm_ext,
            )

    def take_rows(self) -> PartRows:
        """The timeline's rows of the batch added last (with `index` set)."""
        rows, self._rows = self._rows, None
        assert rows is not None, "take_rows() without an indexed add()"
        return rows

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
    ) -> tuple[tuple[npt.NDArray[Any], ...] | None, Array | None]:
        """One batch's rows as compact column chunks; its host and kernel chunks (or None)."""
        host_rows = kernel_rows = None
        if host:
            rows = np.array(host, dtype=np.float64).reshape(-1, 6)
            host_rows = (
                rows[:, 0].astype(np.int32),
                rows[:, 1].copy(),
                rows[:, 2].copy(),
                rows[:, 3].astype(np.int32),
                rows[:, 4].astype(np.int8),
                rows[:, 5].copy(),
            )
            self._host.append(host_rows)
        if kernels:
            kernel_rows = np.array(kernels, dtype=np.float64).reshape(-1, KERNEL_COLUMNS)
            self._kernels.append(kernel_rows)
            self.kernel_count += len(kernels) // KERNEL_COLUMNS
        memset, memcpy = copies
        if memcpy:
            self._memcpy.append(np.array(memcpy, dtype=np.float64).reshape(-1, 4))
            self.memcpy_count += len(memcpy) // 4
        if memset:
            self._memset.append(np.array(memset, dtype=np.float64).reshape(-1, 4))
            self.memset_count += len(memset) // 4
        return host_rows, kernel_rows

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
            {k: getattr(self, k) for k in SPANS},
            self.comm_ext,
            {k: getattr(self, k) for k in COUNTS},
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
        for key in SPANS:
            getattr(self, key).extend(part.spans[key])
        self.comm_ext |= part.comm_ext
        for key in COUNTS:
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
