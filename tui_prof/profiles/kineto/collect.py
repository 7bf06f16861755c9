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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tui_prof.profiles.kineto.events import Event, Kind, kind_of

STEP_PREFIX = "ProfilerStep#"
OPTIMIZER_PREFIX = "Optimizer.step#"
# torch-tb-profiler's NcclOpNameSet and GlooOpNameSet (trace.py).
COMM_OPS = frozenset(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)

# Op flags in the per-thread lists.
IS_OP = 1
IS_RUNTIME = 2
HAS_16BIT_INPUT = 4

Span = tuple[float, float]


def is_dataloader(name: str) -> bool:
    """The plugin's DataLoader rule (event_parser.py, StepParser._parse_step)."""
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or (
        name.startswith("enumerate(DataPipe)#")
    )


def _has_16bit(types: Sequence[str]) -> bool:
    return any(("Half" in t or "BFloat16" in t) for t in types)


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
    cpu_ops: list[Span] = field(default_factory=list)
    # (ts, end, correlation, name id) of every runtime call
    runtimes: list[tuple[float, float, int, int]] = field(default_factory=list)
    runtime_2021: int = 0  # how many runtime calls use the plugin's `Runtime` category
    # per (pid, tid): (ts, end, name id, flags, correlation) of ops and runtime calls
    threads: dict[tuple[int | str, int | str], list[tuple[float, float, int, int, int]]] = field(
        default_factory=dict
    )
    # (ts, end, name id, correlation, external id, device, occupancy or -1)
    kernels: list[tuple[float, float, int, int, int, int, float]] = field(default_factory=list)
    memcpy: list[tuple[float, float, int, int]] = field(default_factory=list)  # ts, end, corr, dev
    memset: list[tuple[float, float, int, int]] = field(default_factory=list)
    cpu_lo: float = math.inf  # span of host ops and steps (the plugin's one-step fallback)
    cpu_hi: float = -math.inf
    lo: float = math.inf  # span of every timed event
    hi: float = -math.inf
    negative: int = 0
    untimed: int = 0
    gpu_step_marks: int = 0  # ProfilerStep#N copies on the GPU timeline (the plugin counts them)
    dataloader_annotations: int = 0  # DataLoader spans the plugin drops (user_annotation)

    def _id(self, name: str) -> int:
        i = self.name_ids.get(name)
        if i is None:
            i = self.name_ids[name] = len(self.names)
            self.names.append(name)
        return i

    def add(self, batch: Sequence[Event]) -> None:
        """Fold one batch of events in (one loop, no per-event function calls on the hot path)."""
        threads = self.threads
        kernels = self.kernels
        runtimes = self.runtimes
        ids = self.name_ids
        for e in batch:
            if e.ph != "X":
                continue
            kind = kind_of(e.cat)
            if kind == Kind.IGNORED:
                if e.name.startswith(STEP_PREFIX) and e.cat.lower() == "gpu_user_annotation":
                    self.gpu_step_marks += 1
                continue
            ts = e.ts
            dur = e.dur
            if ts is None or dur is None or math.isnan(ts) or math.isnan(dur):
                self.untimed += 1
                continue
            if dur < 0:
                self.negative += 1
                dur = 0.0
            end = ts + dur
            if ts < self.lo:
                self.lo = ts
            if end > self.hi:
                self.hi = end
            name = e.name
            args = e.args
            if kind == Kind.KERNEL:
                nid = ids.get(name)
                if nid is None:
                    nid = self._id(name)
                corr = ext = -1
                dev = e.pid if isinstance(e.pid, int) else 0
                occ = -1.0
                if args is not None:
                    corr = args.correlation if args.correlation is not None else -1
                    x = args.external_id if args.external_id is not None else args.external_id_2021
                    ext = x if x is not None else -1
                    if args.device is not None:
                        dev = args.device
                    if args.occupancy is not None:
                        occ = args.occupancy
                kernels.append((ts, end, nid, corr, ext, dev, occ))
            elif kind == Kind.RUNTIME or kind == Kind.RUNTIME_2021:
                if kind == Kind.RUNTIME_2021:
                    self.runtime_2021 += 1
                nid = ids.get(name)
                if nid is None:
                    nid = self._id(name)
                corr = -1
                if args is not None and args.correlation is not None:
                    corr = args.correlation
                runtimes.append((ts, end, corr, nid))
                key = (e.pid, e.tid)
                lst = threads.get(key)
                if lst is None:
                    lst = threads[key] = []
                lst.append((ts, end, nid, IS_RUNTIME, corr))
            elif kind == Kind.OP or kind == Kind.ANNOTATION:
                self._host(e, kind, name, ts, end)
            elif kind == Kind.MEMCPY or kind == Kind.MEMSET:
                corr = dev = -1
                if args is not None:
                    corr = args.correlation if args.correlation is not None else -1
                    dev = args.device if args.device is not None else -1
                target = self.memcpy if kind == Kind.MEMCPY else self.memset
                target.append((ts, end, corr, dev))
            elif kind == Kind.DATALOADER:
                self.dataloader.append((ts, end))

    def _host(self, e: Event, kind: Kind, name: str, ts: float, end: float) -> None:
        """A host op or annotation: a step marker, DataLoader, collective, CPU op or nothing."""
        is_op = kind == Kind.OP
        if name.startswith(STEP_PREFIX):
            try:
                number = int(name[len(STEP_PREFIX) :])
            except ValueError:
                number = -1
            if number >= 0:
                self.step_marks.append((ts, end, number))
                self._cpu_span(ts, end)
            return
        if is_op:
            self._cpu_span(ts, end)
        if name.startswith(OPTIMIZER_PREFIX):
            self.optimizer_marks.append((ts, end))
        if is_dataloader(name):
            self.dataloader.append((ts, end))
            if not is_op:
                self.dataloader_annotations += 1
        elif name in COMM_OPS:
            self.comm_host.append((ts, end))
            args = e.args
            if args is not None:
                x = args.external_id if args.external_id is not None else args.external_id_2021
                if x is not None:
                    self.comm_ext.add(x)
        elif is_op:
            self.cpu_ops.append((ts, end))
        if not is_op:
            return
        flags = IS_OP
        args = e.args
        if args is not None and args.input_type and _has_16bit(args.input_type):
            flags |= HAS_16BIT_INPUT
        nid = self.name_ids.get(name)
        if nid is None:
            nid = self._id(name)
        key = (e.pid, e.tid)
        lst = self.threads.get(key)
        if lst is None:
            lst = self.threads[key] = []
        lst.append((ts, end, nid, flags, -1))

    def _cpu_span(self, ts: float, end: float) -> None:
        if ts < self.cpu_lo:
            self.cpu_lo = ts
        if end > self.cpu_hi:
            self.cpu_hi = end
