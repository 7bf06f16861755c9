"""FLOPs of one PyTorch op call from its recorded input shapes (`record_shapes=True`).

Contract: `flops(name, dims, concrete)` returns the call's floating-point operations (a multiply
and an add count two, as torch.utils.flop_counter and XLA count them), or None where the op has
no model or its record lacks what the model needs (a forward convolution without its concrete
stride/padding/dilation). `is_math_op(name)` says which ops carry the math, so the ops without a
model can be named with their share of device time. Only the ops that do the matrix work are
modelled; element-wise ops are left out (their FLOPs are a rounding error next to a GEMM's).
Attention layouts: `_scaled_dot_product_*` take (batch, heads, seq, dim); `_flash_attention_*`,
`_efficient_attention_*` and flash-attn's own ops take (batch, seq, heads, dim). Backward
attention is 2.5× forward (five matmuls to forward's two), as torch.utils.flop_counter counts it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

Dims = Sequence[Sequence[int]]
Concrete = Sequence[str] | None

_MATH = re.compile(
    r"(^|::|_)(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|conv|convolution|attention|attn)",
    re.IGNORECASE,
)


def is_math_op(name: str) -> bool:
    """An op that would carry matrix math (a GEMM, a convolution, attention)."""
    return _MATH.search(name) is not None


def _prod(xs: Sequence[int]) -> int:
    return math.prod(int(x) for x in xs)


def _gemm(a: Sequence[int], b: Sequence[int]) -> int | None:
    if len(a) != 2 or len(b) != 2:
        return None
    return 2 * a[0] * a[1] * b[1]


def _bgemm(a: Sequence[int], b: Sequence[int]) -> int | None:
    if len(a) != 3 or len(b) != 3:
        return None
    return 2 * a[0] * a[1] * a[2] * b[2]


def _matmul(a: Sequence[int], b: Sequence[int]) -> int | None:
    """torch.matmul's broadcasting: (…, M, K) @ (…, K, N); 1-D operands are vectors."""
    if not a or not b:
        return None
    m = a[-2] if len(a) >= 2 else 1
    k = a[-1]
    n = b[-1] if len(b) >= 2 else 1
    batch_a, batch_b = list(a[:-2]), list(b[:-2])
    width = max(len(batch_a), len(batch_b))
    batch_a = [1] * (width - len(batch_a)) + batch_a
    batch_b = [1] * (width - len(batch_b)) + batch_b
    batch = _prod([max(x, y) for x, y in zip(batch_a, batch_b, strict=True)])
    return 2 * batch * m * k * n


def _linear(x: Sequence[int], w: Sequence[int]) -> int | None:
    if not x or len(w) != 2:
        return None
    return 2 * _prod(x[:-1]) * w[1] * w[0]


def _ints(text: str) -> list[int] | None:
    """A recorded int list ("[1, 1]") or scalar ("1") as ints."""
    try:
        parts = [p for p in text.strip().strip("[]").split(",") if p.strip()]
        return [int(p) for p in parts]
    except ValueError:
        return None


def _conv_out(
    x: Sequence[int], w: Sequence[int], stride: str, padding: str, dilation: str
) -> list[int] | None:
    spatial = len(x) - 2
    st, pad, dil = _ints(stride), _ints(padding), _ints(dilation)
    if st is None or pad is None or dil is None or spatial < 1:
        return None
    st, pad, dil = (v * spatial if len(v) == 1 else v for v in (st, pad, dil))
    if not (len(st) == len(pad) == len(dil) == spatial) or 0 in st:
        return None
    return [
        (x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // st[i] + 1 for i in range(spatial)
    ]


def _conv_flops(x: Sequence[int], w: Sequence[int], out_spatial: Sequence[int]) -> int:
    """2 · N · C_out · Π(out) · (C_in / groups) · Π(kernel): the weight holds C_in / groups."""
    return 2 * x[0] * w[0] * _prod(out_spatial) * _prod(w[1:])


# Forward convolutions: where stride, padding and dilation sit among the recorded inputs.
_CONV_ARGS: dict[str, tuple[int, int, int]] = {
    "aten::conv1d": (3, 4, 5),
    "aten::conv2d": (3, 4, 5),
    "aten::conv3d": (3, 4, 5),
    "aten::convolution": (3, 4, 5),
    "aten::_convolution": (3, 4, 5),
    "aten::cudnn_convolution": (3, 2, 4),
    "aten::mkldnn_convolution": (4, 3, 5),
    "aten::miopen_convolution": (4, 3, 5),
}
_TRANSPOSED = {"aten::convolution": 6, "aten::_convolution": 6}


def _conv(name: str, dims: Dims, concrete: Concrete) -> int | None:
    x, w = dims[0], dims[1]
    if len(x) < 3 or len(w) != len(x) or not concrete:
        return None
    si, pi, di = _CONV_ARGS[name]
    if max(si, pi, di) >= len(concrete):
        return None
    t = _TRANSPOSED.get(name)
    if t is not None and t < len(concrete) and concrete[t].strip().lower() == "true":
        return None  # transposed convolution: not modelled
    out = _conv_out(x, w, concrete[si], concrete[pi], concrete[di])
    if out is None or min(out) <= 0:
        return None
    return _conv_flops(x, w, out)


def _conv_backward(dims: Dims, concrete: Concrete, go: int, x: int, w: int) -> int | None:
    """Input and weight gradients each cost a forward pass (output_mask picks which ran)."""
    if max(go, x, w) >= len(dims):
        return None
    grad, inp, wt = dims[go], dims[x], dims[w]
    if len(grad) < 3 or len(inp) != len(grad) or len(wt) != len(grad):
        return None
    fwd = _conv_flops(inp, wt, grad[2:])
    passes = 2
    if concrete:
        mask = concrete[-1].strip().strip("[]").split(",")
        if len(mask) >= 2:
            passes = sum(m.strip().lower() == "true" for m in mask[:2])
    return passes * fwd


def _attention(q: Sequence[int], k: Sequence[int], v: Sequence[int], heads_first: bool) -> int:
    if heads_first:  # (B, H, L, E)
        b, h, lq, e = q[0], q[1], q[2], q[3]
        s, ev = k[2], v[3]
    else:  # (B, L, H, E)
        b, lq, h, e = q[0], q[1], q[2], q[3]
        s, ev = k[1], v[3]
    return 2 * b * h * lq * s * e + 2 * b * h * lq * s * ev


def _attn(dims: Dims, first: int, heads_first: bool, scale: float) -> int | None:
    if first + 3 > len(dims):
        return None
    q, k, v = dims[first], dims[first + 1], dims[first + 2]
    if not (len(q) == len(k) == len(v) == 4):
        return None
    return int(scale * _attention(q, k, v, heads_first))


_Model = Callable[[Dims, Concrete], int | None]


def _two(fn: Callable[[Sequence[int], Sequence[int]], int | None], i: int, j: int) -> _Model:
    def model(dims: Dims, _c: Concrete) -> int | None:
        return fn(dims[i], dims[j]) if max(i, j) < len(dims) else None

    return model


_MODELS: dict[str, _Model] = {
    "aten::mm": _two(_gemm, 0, 1),
    "aten::addmm": _two(_gemm, 1, 2),
    "aten::_scaled_mm": _two(_gemm, 0, 1),
    "aten::bmm": _two(_bgemm, 0, 1),
    "aten::baddbmm": _two(_bgemm, 1, 2),
    "aten::matmul": _two(_matmul, 0, 1),
    "aten::linear": _two(_linear, 0, 1),
    "aten::convolution_backward": lambda d, c: _conv_backward(d, c, 0, 1, 2),
    "aten::cudnn_convolution_backward": lambda d, c: _conv_backward(d, c, 1, 0, 2),
    "aten::scaled_dot_product_attention": lambda d, _c: _attn(d, 0, True, 1.0),
    "aten::_scaled_dot_product_flash_attention": lambda d, _c: _attn(d, 0, True, 1.0),
    "aten::_scaled_dot_product_efficient_attention": lambda d, _c: _attn(d, 0, True, 1.0),
    "aten::_scaled_dot_product_cudnn_attention": lambda d, _c: _attn(d, 0, True, 1.0),
    "aten::_scaled_dot_product_flash_attention_for_cpu": lambda d, _c: _attn(d, 0, True, 1.0),
    "aten::_flash_attention_forward": lambda d, _c: _attn(d, 0, False, 1.0),
    "aten::_efficient_attention_forward": lambda d, _c: _attn(d, 0, False, 1.0),
    "flash_attn::_flash_attn_forward": lambda d, _c: _attn(d, 0, False, 1.0),
    "aten::_scaled_dot_product_flash_attention_backward": lambda d, _c: _attn(d, 1, True, 2.5),
    "aten::_scaled_dot_product_efficient_attention_backward": lambda d, _c: _attn(d, 1, True, 2.5),
    "aten::_scaled_dot_product_cudnn_attention_backward": lambda d, _c: _attn(d, 1, True, 2.5),
    "aten::_flash_attention_backward": lambda d, _c: _attn(d, 1, False, 2.5),
    "aten::_efficient_attention_backward": lambda d, _c: _attn(d, 1, False, 2.5),
    "flash_attn::_flash_attn_backward": lambda d, _c: _attn(d, 1, False, 2.5),
}
for _name in _CONV_ARGS:
    _MODELS[_name] = lambda d, c, _n=_name: _conv(_n, d, c)  # type: ignore[misc]

MODELLED: frozenset[str] = frozenset(_MODELS)


def flops(name: str, dims: Dims, concrete: Concrete = None) -> int | None:
    """The call's FLOPs from its shapes, or None (no model, or a record it cannot use)."""
    model = _MODELS.get(name)
    if model is None or len(dims) < 2:
        return None
    try:
        return model(dims, concrete)
    except (IndexError, TypeError, ValueError):
        return None  # a record of another shape than the model expects


# Number formats from the recorded input types (the first tensor's), in the hardware table's words.
_FORMATS = (
    ("Float8", "fp8"),
    ("BFloat16", "bf16"),
    ("Half", "fp16"),
    ("double", "fp64"),
    ("float", "fp32"),
)


def number_format(types: Sequence[str] | None) -> str:
    """The format the math ran in, from the first floating-point input ("" where none says)."""
    for t in types or ():
        for needle, fmt in _FORMATS:
            if needle in t:
                return fmt
    return ""
