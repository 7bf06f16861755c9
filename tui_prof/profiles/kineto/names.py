"""What a kernel's or op's name says: collective, Tensor Core, 16-bit, Tensor-Core-eligible op.

Contract: pure functions of a name, each list cited to where it comes from, so a change of rule is
a change of one list here.
- Collectives: Holistic Trace Analysis' `NCCL_KERNEL_RE` (hta/utils/utils.py): `^nccl.*Kernel`
  (RCCL's kernels keep the nccl names).
- Tensor Core kernels: torch-tb-profiler's TC_Allowlist (tensor_core.py), itself from NVIDIA
  PyProf (pyprof/prof/tc.py), plus names that list predates: CUTLASS's `tensorop` kernels,
  cuDNN's `xmma_{fprop,dgrad,wgrad}_implicit_gemm`, FlashAttention's and PyTorch's fused
  attention (`flash_fwd`/`flash_bwd`/`fmha`), and AMD Tensile's matrix-core kernels (`_MI32x32x8`:
  the MI field Tensile puts in MFMA kernels' names).
- Tensor-Core-eligible ops: torch-tb-profiler's TC_OP_Allowlist (from ATen's autocast fp16
  list, autocast_mode.cpp), plus today's names of the same ops (`aten::convolution_backward`,
  scaled-dot-product attention, `…Backward0`).
- 16-bit kernels: fp16/bf16 in the name (cuBLAS `h884`/`h1688`/`h16816`/`hmma`, `f16`, `bf16`,
  `Half`/`BFloat16` template arguments); ops whose recorded input types are Half or BFloat16.
"""

from __future__ import annotations

import re

COLLECTIVE_KERNEL = re.compile(r"^nccl.*Kernel")

TC_KERNEL_PATTERNS: tuple[str, ...] = (
    # torch-tb-profiler TC_Allowlist (from NVIDIA PyProf tc.py)
    "h884",
    "s884",
    "h1688",
    "s1688",
    "hmma",
    "i8816",
    "16816",
    "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel",
    "conv1x1",
    "conv2d_c1_k1",
    "direct_group",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_warp_specialized_implicit_gemm",
    "xmma_gemm",
    "xmma_sparse_gemm",
    "c1688",
    # newer than that list
    "tensorop",
    "xmma_fprop_implicit_gemm",
    "xmma_dgrad_implicit_gemm",
    "xmma_wgrad_implicit_gemm",
    "flash_fwd",
    "flash_bwd",
    "fmha",
)
_TENSILE_MFMA = re.compile(r"_MI\d+x\d+x\d+")

TC_ELIGIBLE_OPS: frozenset[str] = frozenset(
    (
        # torch-tb-profiler TC_OP_Allowlist
        "aten::_convolution",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_tbc",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::convolution",
        "aten::cudnn_convolution",
        "aten::cudnn_convolution_transpose",
        "aten::prelu",
        "aten::addmm",
        "aten::addmv",
        "aten::addr",
        "aten::matmul",
        "aten::mm",
        "aten::mv",
        "aten::linear",
        "aten::addbmm",
        "aten::baddbmm",
        "aten::bmm",
        "aten::chain_matmul",
        "aten::linalg_multi_dot",
        "aten::_thnn_fused_lstm_cell",
        "aten::_thnn_fused_gru_cell",
        "aten::lstm_cell",
        "aten::gru_cell",
        "aten::rnn_tanh_cell",
        "aten::rnn_relu_cell",
        "CudnnConvolutionBackward",
        "BmmBackward",
        "aten::cudnn_convolution_transpose_backward",
        "CudnnConvolutionTransposeBackward",
        "MmBackward",
        "aten::cudnn_convolution_backward_weight",
        "aten::addmm_",
        "AddmvBackward",
        "MvBackward",
        "aten::cudnn_convolution_transpose_backward_weight",
        "aten::cudnn_convolution_transpose_backward_input",
        "AddmmBackward",
        "aten::cudnn_convolution_backward_input",
        "AddbmmBackward",
        "aten::cudnn_convolution_backward",
        # today's names of the same ops
        "aten::convolution_backward",
        "ConvolutionBackward",
        "LinearBackward",
        "BaddbmmBackward",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_flash_attention_forward",
        "aten::_flash_attention_backward",
        "aten::_efficient_attention_forward",
        "aten::_efficient_attention_backward",
        "aten::_scaled_mm",
    )
)
_AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "
_BACKWARD_NUMBER = re.compile(r"(Backward)\d+$")

SIXTEEN_BIT_KERNEL = re.compile(r"(?i:fp16|bf16|f16|half|bfloat16)|hmma|h884|h1688|h16816")


def is_collective(kernel: str) -> bool:
    return COLLECTIVE_KERNEL.match(kernel) is not None


def uses_tensor_core(kernel: str) -> bool:
    return any(p in kernel for p in TC_KERNEL_PATTERNS) or _TENSILE_MFMA.search(kernel) is not None


def tc_eligible_op(op: str) -> bool:
    """ATen ops and autograd nodes that run on Tensor Cores in 16-bit (`MmBackward0` → `MmBackward`)."""
    if op.startswith(_AUTOGRAD_PREFIX):
        op = op[len(_AUTOGRAD_PREFIX) :]
    return op in TC_ELIGIBLE_OPS or _BACKWARD_NUMBER.sub(r"\1", op) in TC_ELIGIBLE_OPS


def is_16bit_kernel(kernel: str) -> bool:
    return SIXTEEN_BIT_KERNEL.search(kernel) is not None


def op_type(op: str) -> str:
    """A short type for an op: its namespace (`aten`, `autograd`, `nccl` …), else `op`."""
    if op.startswith(_AUTOGRAD_PREFIX):
        return "autograd"
    for sep in ("::", ":", "#"):
        if sep in op:
            return op.split(sep, 1)[0][:24]
    return "op"
