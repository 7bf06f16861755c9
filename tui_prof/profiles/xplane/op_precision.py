"""The 16-bit share of device compute from op and kernel statistics, where steps do not give it.

Contract: pure functions from the converter's tables (or the model) to a `Precision`:
`hlo_precision` reads the types in each device HLO op's text (the converter's `hlo_stats` tool:
`%dot.1 = bf16[8,8]{1,0} dot(bf16[8,4] %a, ...)`): an op is 16-bit when the floating-point
types of its result are 16-bit, or, for matrix ops (dot, convolution, GEMM custom calls), those
of its operands (bf16 inputs accumulating in f32 still run on 16-bit units); other float ops are
32-bit; ops without floats and data movement, collectives and idle time are not compute and are
left out. `kernel_precision` judges kernels by name (KERNEL_16BIT), the weaker
evidence, used where there are no HLO ops (TensorFlow without XLA).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tui_prof.model import KernelStat, Precision
from tui_prof.profiles.kernel_names import SIXTEEN_BIT_KERNEL
from tui_prof.profiles.xplane.tb_tables import rows

# Kernel names that carry a 16-bit type, for kernels without a shape stat (JAX, XLA): the one
# rule in profiles/kernel_names.py. The step finder judges kernels by it too.
KERNEL_16BIT = SIXTEEN_BIT_KERNEL
_FLOAT = re.compile(r"\b(bf16|f16|f8\w*|f32|f64|tf32)\[")
_SIXTEEN = ("bf16", "f16", "f8")
_NOT_COMPUTE = re.compile(
    r"copy|data formatting|all-|collective|send|recv|infeed|outfeed|reduce-scatter|idle",
    re.IGNORECASE,
)
_MATRIX = re.compile(r"\b(dot|convolution|custom-call)\(|gemm|dot_general|conv", re.IGNORECASE)


def _is_16(types: list[str]) -> bool:
    return all(t.startswith(_SIXTEEN) for t in types)


def op_is_16bit(expression: str) -> bool | None:
    """True/False for a 16-/32-bit float op, None for an op without float types."""
    lhs, _, rhs = expression.partition(" = ")
    body = rhs or lhs
    # The result type is everything before the opcode: "(bf16[..], s8[..]) custom-call(...)".
    depth, cut = 0, len(body)
    for i, ch in enumerate(body):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == " " and depth == 0:
            cut = i
            break
    result, operands = _FLOAT.findall(body[:cut]), _FLOAT.findall(body[cut:].split("),")[0])
    if _MATRIX.search(body[cut:]) and operands and _is_16(operands):
        return True
    if result:
        return _is_16(result)
    return _is_16(operands) if operands else None


def hlo_precision(hlo_stats: Any) -> Precision | None:
    """16-bit share of device HLO op self time, or None where there are no such ops."""
    table = hlo_stats[0] if isinstance(hlo_stats, list) and hlo_stats else hlo_stats
    if not isinstance(table, dict):
        return None
    ps = [0.0, 0.0]  # 16-bit, 32-bit self time
    for r in rows(table):
        if _NOT_COMPUTE.search(str(r.get("category") or "")):
            continue
        half = op_is_16bit(str(r.get("hlo_op_expression") or ""))
        if half is None:
            continue
        ps[0 if half else 1] += float(r.get("total_self_time") or 0.0)
    return _precision(ps[0], ps[1], "hlo_ops")


def kernel_precision(kernels: Iterable[KernelStat]) -> Precision | None:
    """16-bit share of kernel time, judging each kernel by its name."""
    ps = [0.0, 0.0]
    for k in kernels:
        if _NOT_COMPUTE.search(k.name) or k.name.lower().startswith(("memcpy", "memset", "nccl")):
            continue
        ps[0 if KERNEL_16BIT.search(k.name) else 1] += k.total_duration_us
    return _precision(ps[0], ps[1], "kernel_names")


def _precision(p16: float, p32: float, source: str) -> Precision | None:
    total = p16 + p32
    if total <= 0:
        return None
    return Precision(100.0 * p16 / total, 100.0 * p32 / total, source)
