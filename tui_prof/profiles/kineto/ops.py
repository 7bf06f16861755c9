"""Ops and kernels of one rank: self times, which op launched which kernel, 16-bit and Tensor Cores.

Contract: `analyse_ops(collector, device)` nests each thread's ops and runtime calls by time (the op tree
torch-tb-profiler builds in op_tree.py), and returns per op name its host self time (its span
minus its child ops' and runtime calls', as the plugin and PyTorch's own table count it) and
device self time (the kernels, copies and sets its own runtime calls launched, linked by
correlation id), and per (kernel, launching op) the kernel's calls and time. Spans that overlap
without nesting (real traces have them: the plugin warns "ranges on the same thread should not
intersect") count only their overlap against the enclosing op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tui_prof.profiles import heap
from tui_prof.profiles.kineto import names
from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.columns import HAS_16BIT_INPUT, IS_RUNTIME, Array, Device, Host, Ints

SLICE_ROWS = 1 << 20  # host rows whose overlaps come off their parents' self time at a time
# Wrappers the plugin leaves out of its op table (node.py: ExcludeOpName, is_operator_node).
NOT_OPS = ("DataParallel.forward", "DistributedDataParallel.forward", "Optimizer.")


@dataclass
class OpTotals:
    calls: int = 0
    host_self_us: float = 0.0
    device_self_us: float = 0.0


@dataclass
class KernelTotals:
    calls: int = 0
    total_us: float = 0.0
    occupancy_weighted: float = 0.0  # Σ occupancy × duration over kernels that record it
    occupancy_weight: float = 0.0
    eligible: bool = False  # launched inside a Tensor-Core-eligible op


@dataclass
class OpsResult:
    ops: dict[str, OpTotals] = field(default_factory=dict)
    kernels: dict[tuple[str, str], KernelTotals] = field(default_factory=dict)
    compute_us: float = 0.0  # non-collective kernel time
    compute_16bit_us: float = 0.0


def _by_name(names: list[str], rule: Callable[[str], bool]) -> npt.NDArray[np.bool_]:
    return np.fromiter(map(rule, names), bool, len(names))


def _nest(c: Collector, launched: Array) -> _Tree:
    """Each thread's ops and runtime calls nested by time, as torch-tb-profiler's op tree.

    Rows sorted by (thread, ts, -end, name, flags): an enclosing span before what it encloses.
    The plugin walks them with a stack that pops what ended by the next start; the stack's top
    is then the nearest earlier op on the thread still open, which is what is computed here
    for all rows at once (numpy, no loop per event). Only ops open spans. Each child's overlap
    with its parent comes off the parent's self time, in row order. `launched`: the device
    events' correlation ids, sorted: only the runtime calls with one of them are kept for the
    launch table (a trace's runtime calls are mostly polls and syncs that launch nothing)."""
    h = c.host
    assert h is not None, "device() first"
    order = _tree_order(h)
    for col in ("thread", "ts", "end", "nid", "flags", "corr"):  # sorted in place: no 2nd copy
        setattr(h, col, getattr(h, col)[order])
    del order
    heap.release()  # the sort's temporaries, before the nesting's
    thread, ts, end, flags, nid = h.thread, h.ts, h.end, h.flags, h.nid
    # row indices as int32, and every column dropped once used: this stage held the most
    # memory of a large trace's read (benchmarks/README.md, section 9)
    is_op = (flags & IS_RUNTIME) == 0
    op_rows = np.flatnonzero(is_op).astype(np.int32)
    rt_rows = np.flatnonzero(~is_op).astype(np.int32)
    launch_rows, launch_corr = _launches(h.corr[rt_rows], launched)
    h.corr = np.zeros(0)  # its last reader (a view [:0] would keep it): the ids are in the tree
    op_ts, op_end, op_thread = ts[op_rows], end[op_rows], thread[op_rows]
    # An op's parent is the nearest op before it on its thread still open at its start (the
    # stack's top once what ended is popped): start from the op just before, jump to that
    # op's parent until one is open. Done for all ops at once; each round moves every
    # candidate up, and a candidate's own candidate is already past what it skipped.
    op_parent = np.arange(len(op_rows), dtype=np.int32) - 1
    if len(op_rows):
        op_parent[0] = -1
        op_parent[1:][op_thread[1:] != op_thread[:-1]] = -1
    _roots(op_parent, op_end, op_ts)
    _climb(op_parent, op_parent, op_end, op_ts)
    host_self = op_end - op_ts
    del op_ts
    # a runtime call's parent: the same climb from the last op before it on its thread
    cur = np.cumsum(is_op, dtype=np.int32)[rt_rows]
    cur -= 1
    del is_op
    for lo in range(0, len(rt_rows), SLICE_ROWS):  # each call climbs alone: a slice at a time
        part, at = cur[lo : lo + SLICE_ROWS], rt_rows[lo : lo + SLICE_ROWS]
        ok = part >= 0
        ok[ok] = op_thread[part[ok]] == thread[at[ok]]
        part[~ok] = -1
        _climb(part, op_parent, op_end, ts[at])
    del op_thread
    heap.release()  # the climbs' shrinking temporaries
    row_parent = np.full(len(ts), -1, dtype=np.int32)
    row_parent[op_rows] = op_parent
    row_parent[rt_rows] = cur
    del rt_rows
    # self times: each op's span minus its children's overlap, subtracted in row order (in
    # slices of rows: the same order, a slice's temporaries at a time)
    for lo in range(0, len(ts), SLICE_ROWS):
        child = np.flatnonzero(row_parent[lo : lo + SLICE_ROWS] >= 0) + lo
        p = row_parent[child]
        np.subtract.at(host_self, p, np.minimum(end[child], op_end[p]) - ts[child])
    del row_parent, op_end
    # what each op passes to the runtime calls under it: Tensor-Core eligibility (its own or
    # any enclosing op's, by doubling up the parent chain) and 16-bit inputs (its own)
    op_nid = nid[op_rows]
    sixteen = (flags[op_rows] & HAS_16BIT_INPUT) != 0
    del op_rows
    eligible = _by_name(c.names, names.tc_eligible_op)[op_nid]
    up = op_parent
    while True:
        has = up >= 0
        if not has.any():
            break
        eligible[has] |= eligible[up[has]]
        up[has] = up[up[has]]
    ids, ops = _launch_table(launch_corr, cur[launch_rows])
    return _Tree(
        op_nid=op_nid,
        host_self=host_self,
        eligible=eligible,
        sixteen=sixteen,
        launch_ids=ids,
        launch_ops=ops,
    )


def _tree_order(h: Host) -> Ints:
    """The host rows' order by (thread, ts, -end, name id × 16 + flags), ties in row order:
    `np.lexsort` of those four keys, in half its time. A trace is written nearly in time order
    per thread, so two stable sorts (timsort: runs), by start then by thread, order most rows;
    only the rows that share their thread and start with another are sorted again, by the
    last two keys (a sixth of the rows of the A100 trace)."""
    order = np.argsort(h.ts, kind="stable")
    key = h.thread[order]  # thread ids as int16 where they fit: numpy radix-sorts those
    order = order[
        np.argsort(key.astype(np.int16) if len(key) and key.max() < 2**15 else key, kind="stable")
    ]
    del key
    ts, thread = h.ts[order], h.thread[order]
    same = (ts[1:] == ts[:-1]) & (thread[1:] == thread[:-1])
    del ts, thread
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] = same
    tied[:-1] |= same
    rows = np.flatnonzero(tied)
    del tied
    if len(rows):
        group = np.cumsum(~same, dtype=np.int64)  # per row after the first: its tie group
        group = np.concatenate((np.zeros(1, dtype=np.int64), group))[rows]
        sub = order[rows]
        order[rows] = sub[np.lexsort((h.nid[sub] * 16 + h.flags[sub], -h.end[sub], group))]
    return order


def _roots(cand: Ints, op_end: Array, op_ts: Array) -> None:
    """Before the climb: the ops that no earlier op on their thread is open at (every earlier
    end at or before their start) get no parent (-1), which is what the climb finds for them
    (an op open at an op's start is on the chain of the op before it), without climbing the
    chain of a thread's top-level ops one halving per round (26 rounds over ≈ 1 M ops on the
    2 GiB trace: 0.32 s, now 0.08). `cand`: each op's candidate, -1 at each thread's first."""
    if not len(cand):
        return
    first = np.flatnonzero(cand < 0)
    reach = np.empty_like(op_end)  # the latest end so far on the thread
    for a, b in zip(first, [*first[1:], len(op_end)], strict=True):
        np.maximum.accumulate(op_end[a:b], out=reach[a:b])
    top = np.zeros(len(op_end), dtype=bool)
    top[1:] = reach[:-1] <= op_ts[1:]
    del reach
    cand[top] = -1


def _climb(cand: Ints, parent: Ints, op_end: Array, at: Array) -> None:
    """Move each candidate op up its parent chain, in place, until it is open at `at` (its end
    is later) or none is left (-1)."""
    live = np.flatnonzero(cand >= 0)
    while len(live):
        closed = op_end[cand[live]] <= at[live]
        live = live[closed]
        cand[live] = parent[cand[live]]
        live = live[cand[live] >= 0]


@dataclass
class _Tree:
    op_nid: Ints  # per op node, in row order
    host_self: Array
    eligible: npt.NDArray[np.bool_]
    sixteen: npt.NDArray[np.bool_]
    launch_ids: Array  # the correlation ids of runtime calls that launched device work, sorted
    launch_ops: Ints  # and the op node the (last) call with each ran in, -1 outside any op


def _launches(corr: Array, launched: Array) -> tuple[Ints, Array]:
    """Which runtime calls carry one of the `launched` ids (sorted), and their ids, in order:
    looked up a slice at a time, so only the calls that launched something are held."""
    rows: list[Ints] = []
    for lo in range(0, len(corr), SLICE_ROWS):
        part = corr[lo : lo + SLICE_ROWS]
        if len(launched):
            at = np.minimum(np.searchsorted(launched, part), len(launched) - 1)
            rows.append(np.flatnonzero(launched[at] == part) + lo)
    keep = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    return keep, corr[keep]


def _launch_table(corr: Array, op: Ints) -> tuple[Array, Ints]:
    """Correlation ids, sorted, and the op node whose runtime call carried each (the last call
    with an id wins, as a dict would): a stable sort keeps a group's calls in row order, so
    its last row is the last call (np.unique's return_index held two more copies of them)."""
    order = np.argsort(corr, kind="stable")
    ids = corr[order]
    last = np.ones(len(ids), dtype=bool)
    last[:-1] = ids[1:] != ids[:-1]
    return ids[last], op[order[last]]


def _launchers(table: tuple[Array, Ints], corr: Array) -> Ints:
    """The op node that launched each device event (by correlation id), -1 when none."""
    ids, op = table
    out = np.full(len(corr), -1, dtype=np.int64)
    if not len(ids):
        return out
    at = np.minimum(np.searchsorted(ids, corr), len(ids) - 1)
    hit = (ids[at] == corr) & (corr >= 0)
    out[hit] = op[at[hit]]
    return out


def analyse_ops(c: Collector, dev: Device) -> OpsResult:
    k, copies = dev.kernels, dev.copies
    ids = np.concatenate([k[:, 3], copies[:, 2]])
    tree = _nest(c, np.unique(ids[ids >= 0]))
    del ids
    res = OpsResult()
    n_names = len(c.names)
    listed = ~_by_name(c.names, lambda n: n.startswith(NOT_OPS))
    op_nid = tree.op_nid
    calls = np.bincount(op_nid, minlength=n_names)
    host = np.bincount(op_nid, weights=np.maximum(tree.host_self, 0.0), minlength=n_names)
    table = tree.launch_ids, tree.launch_ops
    k_dur = k[:, 1] - k[:, 0]
    k_node = _launchers(table, k[:, 3])
    c_node = _launchers(table, copies[:, 2])
    # device self time: what an op's own runtime calls launched (kernels, then copies)
    nodes = np.concatenate([k_node, c_node])
    durs = np.concatenate([k_dur, copies[:, 1] - copies[:, 0]])
    launched = nodes >= 0
    dev_op = op_nid[nodes[launched]]
    device = np.bincount(dev_op, weights=durs[launched], minlength=n_names)
    # each name's first op node (np.unique's return_index sorted all 2 M ops to find them)
    first_node = np.full(n_names, len(op_nid), dtype=np.int64)
    np.minimum.at(first_node, op_nid, np.arange(len(op_nid), dtype=np.int64))
    seen = np.flatnonzero(first_node < len(op_nid))
    for i in seen[np.argsort(first_node[seen], kind="stable")].tolist():  # first-seen order
        if listed[i]:
            res.ops[c.names[i]] = OpTotals(int(calls[i]), float(host[i]), float(device[i]))
    # kernels per (kernel name, launching op name or "")
    k_nid = k[:, 2].astype(np.int64)
    k_op = np.full(len(k), -1, dtype=np.int64)
    inside = k_node >= 0
    k_op[inside] = op_nid[k_node[inside]]
    k_el = np.zeros(len(k), dtype=bool)
    k_el[inside] = tree.eligible[k_node[inside]]
    k_16in = np.zeros(len(k), dtype=bool)
    k_16in[inside] = tree.sixteen[k_node[inside]]
    key = k_nid * (n_names + 1) + (k_op + 1)
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    g_calls = np.bincount(inverse, minlength=len(keys))
    g_total = np.bincount(inverse, weights=k_dur, minlength=len(keys))
    occ = k[:, 6]
    has_occ = occ >= 0
    g_occ_w = np.bincount(inverse[has_occ], weights=(occ * k_dur)[has_occ], minlength=len(keys))
    g_occ = np.bincount(inverse[has_occ], weights=k_dur[has_occ], minlength=len(keys))
    for g in np.argsort(first, kind="stable").tolist():  # first-seen order, as a dict's
        i = int(first[g])
        op = int(k_op[i])
        res.kernels[(c.names[int(k_nid[i])], c.names[op] if op >= 0 else "")] = KernelTotals(
            calls=int(g_calls[g]),
            total_us=float(g_total[g]),
            occupancy_weighted=float(g_occ_w[g]),
            occupancy_weight=float(g_occ[g]),
            eligible=bool(k_el[i]),
        )
    collective = _by_name(c.names, names.is_collective)[k_nid]
    sixteen = _by_name(c.names, names.is_16bit_kernel)[k_nid] | k_16in
    compute = k_dur[~collective]
    res.compute_us = sum(compute.tolist(), 0.0)
    res.compute_16bit_us = sum(k_dur[~collective & sixteen].tolist(), 0.0)
    return res
