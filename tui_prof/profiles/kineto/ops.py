"""Ops and kernels of one rank: self times, which op launched which kernel, 16-bit and Tensor Cores.

Contract: `analyse_ops(collector)` nests each thread's ops and runtime calls by time (the op tree
torch-tb-profiler builds in op_tree.py), and returns per op name its host self time (its span
minus its child ops' and runtime calls', as the plugin and PyTorch's own table count it) and
device self time (the kernels, copies and sets its own runtime calls launched, linked by
correlation id), and per (kernel, launching op) the kernel's calls and time. Spans that overlap
without nesting (real traces have them: the plugin warns "ranges on the same thread should not
intersect") count only their overlap against the enclosing op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_prof.profiles.kineto import names
from tui_prof.profiles.kineto.collect import HAS_16BIT_INPUT, IS_RUNTIME, Collector

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


# What a runtime call inherits from the op around it: (op name id or -1 outside any op, in a
# Tensor-Core-eligible op, the op's inputs are 16-bit). Tuples: one is made per op.
_Launcher = tuple[int, bool, bool]
_OUTSIDE: _Launcher = (-1, False, False)


def _nest(c: Collector, host_self: list[float], op_of_node: list[int]) -> dict[int, _Launcher]:
    """Walk each thread's ops and runtime calls by time; fill self times, map launches to ops."""
    launchers: dict[int, _Launcher] = {}
    eligible_name: dict[int, bool] = {}
    outside = _OUTSIDE
    for events in c.threads.values():
        events.sort()  # (ts, -end, …): an enclosing span before what it encloses
        # stack entries: (end, node index, its launcher record)
        stack: list[tuple[float, int, _Launcher]] = []
        for ts, negend, nid, flags, corr in events:
            end = -negend
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack:
                top = stack[-1]
                host_self[top[1]] -= (end if end < top[0] else top[0]) - ts
                parent = top[2]
            else:
                parent = outside
            if flags & IS_RUNTIME:
                if corr >= 0:
                    launchers[corr] = parent
                continue
            node = len(host_self)
            host_self.append(end - ts)
            op_of_node.append(nid)
            el = eligible_name.get(nid)
            if el is None:
                el = eligible_name[nid] = names.tc_eligible_op(c.names[nid])
            stack.append((end, node, (nid, el or parent[1], bool(flags & HAS_16BIT_INPUT))))
    return launchers


def analyse_ops(c: Collector) -> OpsResult:
    host_self: list[float] = []
    op_of_node: list[int] = []
    launchers = _nest(c, host_self, op_of_node)
    res = OpsResult()
    ops = res.ops
    listed = {nid: not c.names[nid].startswith(NOT_OPS) for nid in set(op_of_node)}
    for node, nid in enumerate(op_of_node):
        if not listed[nid]:
            continue
        t = ops.get(c.names[nid])
        if t is None:
            t = ops[c.names[nid]] = OpTotals()
        t.calls += 1
        t.host_self_us += max(0.0, host_self[node])
    none = _OUTSIDE
    collective: dict[int, bool] = {}
    tc: dict[int, bool] = {}
    for ts, end, nid, corr, _ext, _dev, occ, _blocks in c.kernels:
        dur = end - ts
        la = launchers.get(corr, none) if corr >= 0 else none
        op = c.names[la[0]] if la[0] >= 0 else ""
        if op in ops:
            ops[op].device_self_us += dur
        name = c.names[nid]
        k = res.kernels.get((name, op))
        if k is None:
            k = res.kernels[(name, op)] = KernelTotals(eligible=la[1])
        k.calls += 1
        k.total_us += dur
        if occ >= 0:
            k.occupancy_weighted += occ * dur
            k.occupancy_weight += dur
        is_coll = collective.get(nid)
        if is_coll is None:
            is_coll = collective[nid] = names.is_collective(name)
        if not is_coll:
            res.compute_us += dur
            sixteen = tc.get(nid)
            if sixteen is None:
                sixteen = tc[nid] = names.is_16bit_kernel(name)
            if sixteen or la[2]:
                res.compute_16bit_us += dur
    for ts, end, corr, _dev in c.memcpy + c.memset:
        launcher = launchers.get(corr) if corr >= 0 else None
        if launcher is not None and launcher[0] >= 0 and c.names[launcher[0]] in ops:
            ops[c.names[launcher[0]]].device_self_us += end - ts
    return res
