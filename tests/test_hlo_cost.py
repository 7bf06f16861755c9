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

jax = pytest.importorskip("jax", reason="jax is not installed (an optional extra)")
jnp = pytest.importorskip("jax.numpy")


def _compiled(padding: Any) -> tuple[float, float]:
    """(XLA's FLOPs, tuiprof's FLOPs) of a strided conv, a dot and a batched dot."""

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
