"""XLA's FLOPs from a profile's own HLO: what the devices ran, counted by tuiprof.

Contract: `hlo_flops(paths)` returns the FLOPs and bytes the devices' XLA ops ran, by number
format and by framework op, or None where the profile keeps no HLO (its `/host:metadata` plane
holds each XLA program's HloProto) or no device op maps to an op that does math. Each
instruction gets the FLOPs XLA's cost analysis gives matrix math: 2·(output elements)·
(contracted size) for a dot and for cuBLAS / hipBLASLt GEMM calls (their dimension numbers are
in the call's backend config), 2·(kernel elements)·(forward output elements ÷ output features)
for a convolution and cuDNN / MIOpen convolution calls (forward and both backward passes), and
for a fusion the sum of what it fuses. Elementwise and reduction ops are not counted: the figure
is the matrix math MFU is about. Bytes are the instruction's operands and result.

Executions: each device kernel names its HLO op (`hlo_op`) and program (`program_id`); an
execution of an op launches each of its kernels once, so an op ran as often as its most
launched kernel (a split-K GEMM's two kernels are one execution; ops in a while loop's body
count once per iteration, as the device ran them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tui_prof.profiles.xplane.hlo_proto import ELEMENT_BYTES, FORMATS, HloProto
from tui_prof.profiles.xplane.line_events import MISSING
from tui_prof.profiles.xplane.xspace import XSpaceFile, read_plane, text

METADATA_PLANE = "/host:metadata"
HLO_STAT = "Hlo Proto"
_GEMM_CALL = ("gemm", "matmul")  # __cublas$gemm, __cublas$lt$matmul(…), hipBLASLt alike
_CONV_CALL = "conv"  # __cudnn$convForward, …BackwardInput, …BackwardFilter, MIOpen alike


@dataclass
class OpCost:
    """One framework op's (or HLO op's) FLOPs and bytes over the profile, and its executions."""

    flops: float = 0.0
    bytes_accessed: float = 0.0
    executions: int = 0


@dataclass
class HloFlops:
    """FLOPs over the profile, per number format and per op name; the devices that ran them."""

    total: float = 0.0
    by_format: dict[str, float] = field(default_factory=dict)
    ops: dict[str, OpCost] = field(default_factory=dict)
    devices: set[str] = field(default_factory=set)

    def add(self, name: str, cost: tuple[float, str, float], times: int) -> None:
        flops, fmt, nbytes = cost
        f = flops * times
        self.total += f
        self.by_format[fmt] = self.by_format.get(fmt, 0.0) + f
        op = self.ops.setdefault(name, OpCost())
        op.flops += f
        op.bytes_accessed += nbytes * times
        op.executions += times


def _elements(shape: Any) -> int:
    return math.prod(shape.dimensions)


def _result(shape: Any) -> Any:
    """A custom call's result: the first element of its (result, workspace) tuple."""
    return shape.tuple_shapes[0] if len(shape.tuple_shapes) else shape


def _fmt(shape: Any) -> str:
    return FORMATS.get(shape.element_type, "unknown")


def _gemm_dims(inst: Any) -> list[int] | None:
    """lhs contracting dimensions from a GEMM call's backend config (JSON)."""
    try:
        cfg = json.loads(inst.backend_config or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    dims = (cfg.get("gemm_backend_config") or {}).get("dot_dimension_numbers") or {}
    got = dims.get("lhs_contracting_dimensions")
    return [int(d) for d in got] if isinstance(got, list) else None


def _bytes(shape: Any) -> float:
    if len(shape.tuple_shapes):
        return sum(_bytes(t) for t in shape.tuple_shapes)
    return float(_elements(shape) * ELEMENT_BYTES.get(shape.element_type, 0))


class _Module:
    """One program's instructions by id and by name, their cost worked out on demand."""

    def __init__(self, module: Any) -> None:
        self.by_id: dict[int, Any] = {}
        self.by_name: dict[str, Any] = {}
        self.computations: dict[int, Any] = {c.id: c for c in module.computations}
        for c in module.computations:
            for inst in c.instructions:
                self.by_id[inst.id] = inst
                self.by_name[text(inst.name)] = inst
        self._memo: dict[int, tuple[float, str]] = {}

    def _operand(self, inst: Any, k: int) -> Any | None:
        ids = inst.operand_ids
        return self.by_id.get(ids[k]) if len(ids) > k else None

    def cost(self, inst: Any) -> tuple[float, str, float]:
        """(FLOPs, number format, bytes of operands and result) of one execution."""
        flops, fmt = self.flops(inst)
        if flops <= 0:
            return 0.0, "", 0.0
        operands = (self.by_id.get(i) for i in inst.operand_ids)
        result = _result(inst.shape) if text(inst.opcode) == "custom-call" else inst.shape
        nbytes = sum(_bytes(o.shape) for o in operands if o is not None) + _bytes(result)
        return flops, fmt, nbytes

    def flops(self, inst: Any) -> tuple[float, str]:
        """(FLOPs of one execution, number format of its inputs); (0, "") where no math."""
        got = self._memo.get(inst.id)
        if got is None:
            self._memo[inst.id] = (0.0, "")  # a fusion that calls itself (a damaged file) stops
            try:
                got = self._flops(inst)
            except (IndexError, KeyError, TypeError, ValueError):  # dimensions out of range
                got = (0.0, "")
            self._memo[inst.id] = got
        return got

    def _flops(self, inst: Any) -> tuple[float, str]:
        op = text(inst.opcode)
        lhs = self._operand(inst, 0)
        if op == "dot" and lhs is not None:
            contracting = inst.dot_dimension_numbers.lhs_contracting_dimensions
            k = math.prod(lhs.shape.dimensions[d] for d in contracting)
            return 2.0 * _elements(inst.shape) * k, _fmt(lhs.shape)
        if op == "convolution":
            return self._conv(inst, inst.shape, self._operand(inst, 1))
        if op == "custom-call":
            return self._call(inst, text(inst.custom_call_target).lower(), lhs)
        if op == "fusion":
            total, formats = 0.0, dict[str, float]()
            for cid in inst.called_computation_ids:
                comp = self.computations.get(cid)
                for sub in comp.instructions if comp is not None else ():
                    f, fmt = self.flops(sub)
                    total += f
                    formats[fmt] = formats.get(fmt, 0.0) + f
            return total, max(formats, key=lambda k: formats[k]) if total else ""
        return 0.0, ""

    def _call(self, inst: Any, target: str, lhs: Any | None) -> tuple[float, str]:
        """A library call: cuBLAS/hipBLASLt GEMMs and cuDNN/MIOpen convolutions."""
        if lhs is not None and any(g in target for g in _GEMM_CALL):
            dims = _gemm_dims(inst)
            if dims is None:
                return 0.0, ""
            k = math.prod(lhs.shape.dimensions[d] for d in dims)
            return 2.0 * _elements(_result(inst.shape)) * k, _fmt(lhs.shape)
        if _CONV_CALL not in target:
            return 0.0, ""
        if "backwardfilter" in target:  # (input, grad output) → grad filter
            grad = self._operand(inst, 1)
            return self._conv(inst, grad.shape if grad else None, None, _result(inst.shape))
        if "backwardinput" in target:  # (grad output, filter) → grad input
            grad = self._operand(inst, 0)
            return self._conv(inst, grad.shape if grad else None, self._operand(inst, 1))
        return self._conv(inst, _result(inst.shape), self._operand(inst, 1))

    def _conv(
        self, inst: Any, forward_out: Any, kernel: Any | None, kernel_shape: Any = None
    ) -> tuple[float, str]:
        """2 × kernel elements × forward output positions (its elements ÷ output features)."""
        kshape = kernel_shape if kernel_shape is not None else (kernel.shape if kernel else None)
        if forward_out is None or kshape is None or not len(kshape.dimensions):
            return 0.0, ""
        dim = inst.convolution_dimension_numbers.kernel_output_feature_dimension
        out_features = kshape.dimensions[dim] if dim < len(kshape.dimensions) else 0
        if out_features <= 0:
            return 0.0, ""
        positions = _elements(forward_out) / out_features
        first = self._operand(inst, 0)
        return 2.0 * _elements(kshape) * positions, _fmt(first.shape if first else kshape)

    def op_name(self, inst: Any) -> str:
        """The framework op the instruction came from (`jit(f)/dot_general`), else its own."""
        return text(inst.metadata.op_name) or text(inst.name)


def _modules(space: XSpaceFile) -> dict[int, _Module]:
    """Each program's parsed HLO, by program id (the metadata plane's event metadata ids)."""
    plane = next((p for p in space.planes if p.name == METADATA_PLANE), None)
    if plane is None:
        return {}
    msg = space._plane_msg(plane)
    stat_ids = {k for k, v in msg.stat_metadata.items() if text(v.name) == HLO_STAT}
    out: dict[int, _Module] = {}
    for pid, meta in msg.event_metadata.items():
        for st in meta.stats:
            if st.metadata_id in stat_ids and st.bytes_value:
                try:
                    out[pid] = _Module(HloProto.FromString(st.bytes_value).hlo_module)
                except Exception:  # a damaged program's HLO (upb's DecodeError): not counted
                    continue
    return out


def has_hlo(paths: Sequence[Path | str]) -> bool:
    """Whether any file keeps its programs' HLO (a cheap look at the planes' names)."""
    for path in paths:
        with XSpaceFile(path) as space:
            if any(p.name == METADATA_PLANE for p in space.planes):
                return True
    return False


def hlo_flops(paths: Sequence[Path | str]) -> HloFlops | None:
    """The devices' FLOPs from the profile's own HLO; None where it has none to count."""
    result = HloFlops()
    for path in paths:
        with XSpaceFile(path) as space:
            modules = _modules(space)
            if modules:
                _count(space, modules, result)
    return result if result.total > 0 else None


def _count(space: XSpaceFile, modules: dict[int, _Module], result: HloFlops) -> None:
    for plane in space.planes:
        if plane.device is None:
            continue
        pe = read_plane(space, plane, stats=("hlo_op", "program_id"), skip_derived=True)
        keys = []
        for le in pe.lines:
            ops = le.ints["hlo_op"]
            xla = ops != MISSING
            if xla.any():
                keys.append(
                    np.stack([le.ints["program_id"][xla], ops[xla], le.metadata_id[xla]], 1)
                )
        if not keys:
            continue
        launches, counts = np.unique(np.concatenate(keys), axis=0, return_counts=True)
        runs: dict[tuple[int, int], int] = {}
        for (pid, ref, _kernel), n in zip(launches.tolist(), counts.tolist(), strict=True):
            runs[(pid, ref)] = max(runs.get((pid, ref), 0), n)  # its most launched kernel
        names = pe.meta.stat_names
        before = result.total
        for (pid, ref), n in runs.items():
            _add(modules.get(pid), names.get(ref, ""), n, result)
        if result.total > before:
            result.devices.add(plane.name)


def _add(module: _Module | None, name: str, times: int, result: HloFlops) -> None:
    if module is None or not name:
        return
    inst = module.by_name.get(name.split(",")[-1].strip())
    if inst is None:
        return
    cost = module.cost(inst)
    if cost[0] > 0:
        result.add(module.op_name(inst), cost, times)
