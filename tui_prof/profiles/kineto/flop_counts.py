"""FLOPs of a Kineto trace's ops: the profiler's `flops` where it wrote them, else their shapes.

Contract: `FlopCounter.add(event)` for each complete op event that carries `flops` or
`Input Dims` (kineto/extras.py feeds it), then `result(steps, ops)`. Each call's FLOPs come from
its `flops` arg (`with_flops=True`) or flop_models (recorded shapes); calls of ops that carry
matrix math but have neither are kept too, to name what has no model. No double counting: ops
nest by time on their thread (aten::linear → aten::addmm, aten::conv2d → … →
aten::cudnn_convolution), and only the innermost call with a count counts; an outer call's
count stands only where nothing inside it has one. The innermost op is the one that launches the
kernels, so its device self time (kineto/ops.py) is what its FLOPs ran in.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from tui_prof.profiles.kineto.events import Args, Event
from tui_prof.profiles.kineto.flop_models import MODELLED, flops, is_math_op, number_format

_lists = msgspec.json.Decoder(list[object])

# (ts, end, name, flops or -1.0 where unknown, input types, from the `flops` arg)
_Record = tuple[float, float, str, float, Sequence[str] | None, bool]


@dataclass
class FlopCounts:
    """One rank's counted FLOPs: per op name, per step, per number format."""

    per_op: dict[str, tuple[float, int]] = field(default_factory=dict)  # flops, counted calls
    step_flops: dict[int, float] = field(default_factory=dict)  # step number → FLOPs
    by_format: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    sources: set[str] = field(default_factory=set)  # "flops_arg", "shapes"
    uncovered: set[str] = field(default_factory=set)  # math ops with calls that got no count
    # math ops whose calls sit inside a counted call, or around one: their device time is the
    # counted FLOPs' (aten::cudnn_convolution_backward_input under …_backward)
    covered: set[str] = field(default_factory=set)


@dataclass
class FlopCounter:
    """The math ops' calls, per thread, until the steps are known."""

    threads: dict[tuple[int | str, int | str], list[_Record]] = field(default_factory=dict)
    _names: dict[str, tuple[bool, bool]] = field(default_factory=dict)  # modelled, math
    # a step repeats the same calls: FLOPs by (op, shapes, concrete inputs) as recorded
    _shapes: dict[tuple[str, bytes, bytes], float] = field(default_factory=dict)

    def wants(self, name: str) -> bool:
        """Whether calls of `name` without a `flops` arg matter: a model or matrix math."""
        modelled, math = self._info(name)
        return modelled or math

    def _info(self, name: str) -> tuple[bool, bool]:
        info = self._names.get(name)
        if info is None:
            info = self._names[name] = (name in MODELLED, is_math_op(name))
        return info

    def add(self, e: Event, a: Args, ts: float, end: float) -> None:
        name = e.name
        modelled, math = self._info(name)
        f = -1.0
        arg = False
        if a.flops is not None and a.flops > 0:
            f, arg = float(a.flops), True
        elif modelled and a.input_dims:
            key = (name, bytes(a.input_dims), bytes(a.concrete_inputs))
            known = self._shapes.get(key)
            if known is None:
                known = self._shapes[key] = _shape_flops(name, a)
            f = known
        elif not math:
            return
        if f < 0 and not math:
            return
        rows = self.threads.get((e.pid, e.tid))
        if rows is None:
            rows = self.threads[(e.pid, e.tid)] = []
        rows.append((ts, end, name, f, a.input_type, arg))

    def result(self, spans: Sequence[tuple[float, float]], numbers: Sequence[int]) -> FlopCounts:
        """Count each call once (the innermost with a count) and place it in its step."""
        out = FlopCounts()
        starts = [s for s, _ in spans]
        formats: dict[tuple[str, ...], str] = {}
        for rows in self.threads.values():
            for rec, counted, covered in _innermost(rows):
                ts, _end, name, f, types, arg = rec
                if not counted:
                    if covered:
                        out.covered.add(name)
                    elif f < 0:
                        out.uncovered.add(name)
                    continue
                total, calls = out.per_op.get(name, (0.0, 0))
                out.per_op[name] = (total + f, calls + 1)
                out.total += f
                sig = tuple(types or ())
                fmt = formats.get(sig)
                if fmt is None:
                    fmt = formats[sig] = number_format(sig) or "unknown"
                key = fmt
                out.by_format[key] = out.by_format.get(key, 0.0) + f
                out.sources.add("flops_arg" if arg else "shapes")
                i = bisect.bisect_right(starts, ts) - 1
                if i >= 0 and ts < spans[i][1]:
                    out.step_flops[numbers[i]] = out.step_flops.get(numbers[i], 0.0) + f
        return out


def _shape_flops(name: str, a: Args) -> float:
    try:
        dims = _lists.decode(a.input_dims)
        concrete = _lists.decode(a.concrete_inputs) if a.concrete_inputs else None
    except msgspec.DecodeError:  # ValidationError included: not a list
        return -1.0
    shaped = [d if isinstance(d, list) else [] for d in dims]
    if not all(isinstance(x, int) for d in shaped for x in d):
        return -1.0
    texts = [str(c) for c in concrete] if concrete is not None else None
    f = flops(name, shaped, texts)
    return -1.0 if f is None else float(f)


def _innermost(rows: list[_Record]) -> list[tuple[_Record, bool, bool]]:
    """Each call with (counted, covered): counted if it has a count and nothing inside it has;
    covered if a call around it or inside it was counted (its math is not missing)."""
    rows.sort(key=lambda r: (r[0], -r[1]))
    inner_count = [False] * len(rows)  # some call inside has a count
    outer_count = [False] * len(rows)  # some call around has a count
    stack: list[int] = []
    for i, (ts, _end, _n, f, _fmt, _a) in enumerate(rows):
        while stack and rows[stack[-1]][1] <= ts:
            stack.pop()
        if stack:
            top = stack[-1]
            outer_count[i] = outer_count[top] or rows[top][3] >= 0
        if f >= 0:
            for j in reversed(stack):
                if inner_count[j]:
                    break
                inner_count[j] = True
        stack.append(i)
    return [
        (r, r[3] >= 0 and not inner_count[i], inner_count[i] or outer_count[i])
        for i, r in enumerate(rows)
    ]
