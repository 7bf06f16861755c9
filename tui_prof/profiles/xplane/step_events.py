"""What happens inside a step: xprof's event types, tsl's grouping of host threads, and coverage.

Contract: the converter's own rules, reproduced from xprof (xplane_to_step_events.cc,
event_span.cc, op_stats_to_input_pipeline_analysis.cc) and tsl (group_events.cc):
`classify_device`/`classify_host` give an event xprof's EventType; `coverage` splits each step's
time among the types, the higher type owning time where events overlap; `host_groups` finds
which host events belong to which step. All work on numpy arrays, one call per profile.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tui_prof.profiles.kernel_names import is_xla_collective
from tui_prof.profiles.xplane.line_events import MISSING, LineEvents
from tui_prof.profiles.xplane.op_precision import KERNEL_16BIT

if TYPE_CHECKING:
    from tui_prof.profiles.xplane.step_sources import Window
    from tui_prof.profiles.xplane.xspace import PlaneEvents

# xprof's EventType values (event_span.h): where events overlap, the higher value owns the time.
HOST_COMPUTE, HOST_COMPILE, HOST_TO_HOST, HOST_TO_DEVICE, HOST_PREPARE = 10, 60, 70, 80, 90
DEVICE_COLLECTIVES, HOST_WAIT_INPUT, DEVICE_TO_DEVICE, DEVICE_TO_HOST = 100, 110, 120, 130
DEVICE_COMPUTE_32, DEVICE_COMPUTE_16 = 140, 150
# How the converter's input-pipeline analysis folds them into the overview's categories.
# HOST_TO_HOST belongs to none there; here it ends up in "other" with the uncovered time.
CATEGORY_OF = {
    HOST_COMPUTE: "host_compute",
    HOST_COMPILE: "compilation",
    HOST_TO_DEVICE: "input",
    HOST_PREPARE: "kernel_launch",
    DEVICE_COLLECTIVES: "device_collectives",
    HOST_WAIT_INPUT: "input",
    DEVICE_TO_DEVICE: "device_to_device",
    DEVICE_TO_HOST: "output",
    DEVICE_COMPUTE_32: "device_compute",
    DEVICE_COMPUTE_16: "device_compute",
}
_NOT_CPU_COMPUTE = ("EagerExecute", "EagerLocalExecute", "EagerKernelExecute", "FunctionRun")
_EXPLICIT_MARKER = re.compile(r"^(train|test|TraceContext)[^/]*$")
_GET_NEXT_OPS = ("IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute")


def _memcpy(name: str) -> str:
    """tsl's GetMemcpyOp: "htod"/"dtoh"/"dtod"/"htoh" for names like MemcpyHToD, else ""."""
    low = name.lower()
    if ":" in name or not low.startswith("memcpy"):
        return ""
    return low[6:10] if low[6:10] in ("htod", "dtoh", "dtod", "htoh") else ""


def classify_device(name: str, shapes: str = "") -> int:
    """xprof ClassifyGpuEvent: memcpy direction, NCCL, else compute at 16 or 32 bits."""
    kind = _memcpy(name)
    if kind == "htod":
        return HOST_TO_DEVICE
    if kind == "dtoh":
        return DEVICE_TO_HOST
    if kind == "dtod":
        return DEVICE_TO_DEVICE
    if name.lower().startswith("nccl"):
        return DEVICE_COLLECTIVES
    half = "half" in shapes if shapes else bool(KERNEL_16BIT.search(name))
    return DEVICE_COMPUTE_16 if half else DEVICE_COMPUTE_32


# The lines of a TPU core that hold its step's work, as the converter reads them (tsl
# IsOpLineName; xprof ConvertDeviceTraceXPlaneToStepEvents reads a core's op line alone, each
# op's self time its work, the rest of the step idle): not its programs' runs ("XLA Modules",
# which span the gaps between their ops) nor its other lines.
TPU_OP_LINES = frozenset({"XLA Ops", "TensorFlow Ops", "Sparse Core Ops"})


def classify_tpu(name: str) -> int:
    """A TPU op's event type: XLA's collectives by name, else as a GPU's (compute)."""
    return DEVICE_COLLECTIVES if is_xla_collective(name) else classify_device(name)


def classify_host(name: str) -> int:
    """xprof ClassifyCpuEvent for a CPU-only profile (no kernel launches); 0 = not CPU compute."""
    if name.startswith(_NOT_CPU_COMPUTE) or _EXPLICIT_MARKER.match(name):
        return 0
    kind = _memcpy(name)
    if kind == "htod" or name.partition(":")[2].startswith("InfeedEnqueue"):
        return HOST_TO_DEVICE
    if kind == "htoh":
        return HOST_TO_HOST
    if name.lower().startswith("iteratorgetnext"):
        return HOST_WAIT_INPUT
    return HOST_COMPUTE


def with_launches(types: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """xprof ClassifyCpuEvent on a host with devices: an event that launched device work (its
    correlation id) or an executor's `ExecutorState::Process` is kernel launch (HOST_PREPARE),
    where the CPU-only rule (classify_host) made it host compute or input; copies stay copies."""
    prepare = launches & ((types == HOST_COMPUTE) | (types == HOST_WAIT_INPUT))
    types[prepare] = HOST_PREPARE
    return types


def is_executor(name: str) -> bool:
    return name.lower().startswith("executorstate::process")


def types_of(
    metadata_id: np.ndarray, names: dict[int, str], fn: Callable[[str], int]
) -> np.ndarray:
    uniq, inverse = np.unique(metadata_id, return_inverse=True)
    return np.array([fn(names.get(int(u), "")) for u in uniq], dtype=np.int64)[inverse]


def coverage(
    step: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    etype: np.ndarray,
    span_begin: np.ndarray,
    span_end: np.ndarray,
) -> dict[int, np.ndarray]:
    """Per event type, picoseconds of each step it owns (xprof ToNonOverlappedEvents + clipping)."""
    n_steps = len(span_begin)
    b = np.maximum(start, span_begin[step])
    e = np.minimum(end, span_end[step])
    keep = e > b
    step, b, e, etype = step[keep], b[keep], e[keep], etype[keep]
    # Lay the steps end to end on one axis so a single sort and sweep serves them all.
    stride = int((span_end - span_begin).max(initial=0)) + 1
    shift = step * stride - span_begin[step]
    b, e = b + shift, e + shift
    owned: dict[int, np.ndarray] = {}
    above: np.ndarray = np.zeros(n_steps)
    for t in sorted(set(etype.tolist()), reverse=True):
        m = etype >= t
        vb, ve = b[m], e[m]
        order = np.argsort(vb, kind="stable")
        vb, ve = vb[order], np.maximum.accumulate(ve[order])
        new = np.ones(len(vb), dtype=np.bool_)
        new[1:] = vb[1:] > ve[:-1]
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, len(vb) - 1)
        union = np.bincount(vb[first] // stride, weights=ve[last] - vb[first], minlength=n_steps)
        owned[t] = union - above
        above = union
    return owned


def host_groups(
    lines: Sequence[LineEvents], roots: dict[tuple[int, int], int], names: dict[int, str]
) -> list[np.ndarray]:
    """Each host event's step (or -1): the roots' call trees on their own thread, then events
    linked to them as consumers of a producer (`_p`/`_pt` = `_c`/`_ct`, or an executor's step id
    and iteration for async IteratorGetNext ops), and so on: tsl's grouping, for host threads.
    Vectorised per thread; a CPU-only profile can hold millions of host events."""
    sizes = [len(le.start_ps) for le in lines]
    base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    group = np.full(int(base[-1]), -1, dtype=np.int64)
    for (li, i), k in roots.items():
        group[base[li] + i] = k
    prod_keys: list[np.ndarray] = []
    prod_ats: list[np.ndarray] = []
    cons_keys: list[np.ndarray] = []
    cons_ats: list[np.ndarray] = []
    executor = [k for k, v in names.items() if v == "ExecutorState::Process"]
    get_next = [k for k, v in names.items() if v in _GET_NEXT_OPS]
    for li, le in enumerate(lines):
        ints = le.ints
        for key_a, key_b, key_list, at_list in (
            ("_pt", "_p", prod_keys, prod_ats),
            ("_ct", "_c", cons_keys, cons_ats),
        ):
            at = np.flatnonzero(ints[key_b] != MISSING)
            key_list.append(_link_key(1, ints[key_a][at], ints[key_b][at]))
            at_list.append(base[li] + at)
        # tsl's legacy link: an executor step (id, iter_num) -> its async IteratorGetNext ops.
        both = (ints["iter_num"] != MISSING) & (ints["id"] != MISSING)
        for ids, key_list, at_list in (
            (executor, prod_keys, prod_ats),
            (get_next, cons_keys, cons_ats),
        ):
            at = np.flatnonzero(both & np.isin(le.metadata_id, ids))
            key_list.append(_link_key(2, ints["id"][at], ints["iter_num"][at]))
            at_list.append(base[li] + at)
    prod_key, prod_at = np.concatenate(prod_keys), np.concatenate(prod_ats)
    cons_key, cons_at = np.concatenate(cons_keys), np.concatenate(cons_ats)
    keys = np.unique(prod_key)  # each link key once; a consumer joins its key's first step
    prod_k = np.searchsorted(keys, prod_key)[::-1]  # reversed: the first producer writes last
    prod_at = prod_at[::-1]
    cons_k = np.minimum(np.searchsorted(keys, cons_key), max(len(keys) - 1, 0))
    linked = (keys[cons_k] == cons_key) if len(keys) else np.zeros(len(cons_key), dtype=bool)
    cons_k, cons_at = cons_k[linked], cons_at[linked]
    dirty = set(range(len(lines)))
    for _ in range(64):
        for li in sorted(dirty):
            _nest(group[base[li] : base[li + 1]], lines[li].start_ps, lines[li].end_ps)
        owner = np.full(len(keys), -1, dtype=np.int64)
        grouped = group[prod_at] >= 0
        owner[prod_k[grouped]] = group[prod_at[grouped]]
        joins = (group[cons_at] < 0) & (owner[cons_k] >= 0)
        if not joins.any():
            break
        group[cons_at[joins]] = owner[cons_k[joins]]
        dirty = set(np.searchsorted(base, cons_at[joins], side="right").tolist())
        dirty = {li - 1 for li in dirty}
    return [group[base[li] : base[li + 1]] for li in range(len(lines))]


def _link_key(kind: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int64 per (kind, a, b) link key (a hash; a collision would need 2^-64 luck)."""
    with np.errstate(over="ignore"):
        return (
            b.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            + a.astype(np.uint64) * np.uint64(1000003)
            + np.uint64(kind)
        ).view(np.int64)


def _nest(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
    """Give each ungrouped event the step of a grouped event on its thread that contains it."""
    has = np.flatnonzero(group >= 0)
    if not len(has) or len(has) == len(group):
        return
    order = has[np.lexsort((-end[has], start[has]))]
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    outer = np.ones(len(order), dtype=bool)
    outer[1:] = e[1:] > reach[:-1]  # not inside an earlier grouped event
    order, s, e = order[outer], s[outer], e[outer]
    free = np.flatnonzero(group < 0)
    k = np.searchsorted(s, start[free], side="right") - 1
    inside = (k >= 0) & (end[free] <= e[np.maximum(k, 0)])
    group[free[inside]] = group[order[k[inside]]]


def launched_in(
    ev: dict[str, np.ndarray], windows: Sequence[Window], host: PlaneEvents | None
) -> np.ndarray:
    """Each device event's step, by its launch (CUPTI correlation id): the step whose call tree
    holds the launch (tsl's grouping, as the converter does), else the step whose marker spans
    it; without launch records, the step whose marker began last before the event did."""
    begins = np.array([w.begin_ps for w in windows], dtype=np.int64)
    ends = np.array([w.end_ps for w in windows], dtype=np.int64)
    step = np.full(len(ev["start"]), -1, dtype=np.int64)
    lines = host.lines if host else []
    corr_l = [le.ints["correlation_id"] for le in lines]
    has = [c != MISSING for c in corr_l]
    if host is not None and lines and any(h.any() for h in has):
        groups = host_groups(
            lines, {(w.line, w.index): k for k, w in enumerate(windows)}, host.meta.event_names
        )
        corr = np.concatenate([c[h] for c, h in zip(corr_l, has, strict=True)])
        when = np.concatenate([le.start_ps[h] for le, h in zip(lines, has, strict=True)])
        owner = np.concatenate([g[h] for g, h in zip(groups, has, strict=True)])
        order = np.argsort(corr)
        corr, when, owner = corr[order], when[order], owner[order]
        pos = np.clip(np.searchsorted(corr, ev["corr"]), 0, len(corr) - 1)
        found = (corr[pos] == ev["corr"]) & (ev["corr"] >= 0)
        if (found & (owner[pos] >= 0)).any():
            take = found & (owner[pos] >= 0)
            step[take] = owner[pos][take]
            return step
        if found.any():
            t = when[pos]
            k = np.searchsorted(begins, t, side="right") - 1
            inside = found & (k >= 0) & (t <= ends[np.maximum(k, 0)])
            step[inside] = k[inside]
            return step
    k = np.searchsorted(begins, ev["start"], side="right") - 1
    last_end = ends[-1] + (ends[-1] - begins[-1])
    limit = np.append(begins[1:], last_end)
    inside = (k >= 0) & (ev["start"] < limit[np.maximum(k, 0)])
    step[inside] = k[inside]
    return step
