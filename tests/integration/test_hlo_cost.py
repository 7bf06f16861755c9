"""FLOPs from HLO (xplane/hlo_cost.py) against XLA's own cost analysis of the same program.

jax compiles a program here (CPU); its HLO module is what a GPU profile's `/host:metadata` plane
keeps per program. XLA's `cost_analysis()` counts the same dots and convolutions; with VALID
padding the two agree exactly. With padding, XLA leaves out the taps that fall on the padding,
and tuiprof (as PyTorch's counters do) does not: 2·outputs·C_in·k_h·k_w, computed here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tui_prof.profiles.xplane.hlo_cost import _Module
from tui_prof.profiles.xplane.hlo_proto import HloModuleProto


def _compiled(padding: Any) -> tuple[float, float]:
    """(XLA's FLOPs, tuiprof's FLOPs) of a strided conv, a dot and a batched dot."""
    jax = pytest.importorskip("jax", reason="jax is not installed (an optional extra)")
    jnp = pytest.importorskip("jax.numpy")

    def f(x: Any, w: Any, a: Any, b: Any) -> Any:
        dims = ("NCHW", "OIHW", "NCHW")
        y = jax.lax.conv_general_dilated(x, w, (2, 2), padding, dimension_numbers=dims)
        bmm = jnp.einsum("bij,bjk->bik", a.reshape(4, 4, 64), b.reshape(4, 64, 8))
        return y, a @ b, bmm

    args = (
        jnp.ones((2, 3, 16, 16)),
        jnp.ones((8, 3, 3, 3)),
        jnp.ones((16, 64)),
        jnp.ones((64, 32)),
    )
    compiled = jax.jit(f).lower(*args).compile()
    proto = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    module = HloModuleProto.FromString(proto)
    counter = _Module(module)
    entry = next(c for c in module.computations if c.id == module.entry_computation_id)
    ours = sum(counter.flops(i)[0] for i in entry.instructions)
    return float(compiled.cost_analysis()["flops"]), ours


GEMMS = 2 * 16 * 32 * 64 + 2 * 4 * 4 * 8 * 64  # the dot and the batched dot: 2·M·N·K


def test_valid_padding_equals_xlas_cost() -> None:
    xla, ours = _compiled("VALID")
    assert ours == xla == GEMMS + 2 * (2 * 8 * 7 * 7) * (3 * 3 * 3)


def test_padded_taps_count_as_pytorch_counts_them() -> None:
    xla, ours = _compiled(((1, 1), (1, 1)))
    assert ours == GEMMS + 2 * (2 * 8 * 8 * 8) * (3 * 3 * 3)
    assert xla < ours  # XLA leaves out the taps on the padding


def test_a_damaged_module_counts_nothing_and_raises_nothing() -> None:
    """A dot whose contracting dimension is out of range, and a fusion that calls its own
    computation: no FLOPs, no exception, no endless recursion."""
    m = HloModuleProto(name=b"bad", id=1, entry_computation_id=1)
    comp = m.computations.add(name=b"main", id=1)
    a = comp.instructions.add(name=b"a", opcode=b"parameter", id=10)
    a.shape.element_type, a.shape.dimensions[:] = 11, [4, 4]
    dot = comp.instructions.add(name=b"dot", opcode=b"dot", id=11, operand_ids=[10, 10])
    dot.shape.element_type, dot.shape.dimensions[:] = 11, [4, 4]
    dot.dot_dimension_numbers.lhs_contracting_dimensions[:] = [5]
    loop = comp.instructions.add(name=b"f", opcode=b"fusion", id=12, called_computation_ids=[1])
    gemm = comp.instructions.add(name=b"g", opcode=b"custom-call", id=13, operand_ids=[10])
    gemm.custom_call_target, gemm.backend_config = b"__cublas$gemm", b"{not json"
    counter = _Module(m)
    assert counter.flops(dot) == (0.0, "")
    assert counter.flops(loop) == (0.0, "")
    assert counter.cost(gemm) == (0.0, "", 0.0)
