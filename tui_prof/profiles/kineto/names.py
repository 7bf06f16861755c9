"""What an op's or runtime call's name says, for the Kineto reader: Tensor-Core-eligible op,
op type, start-up call; kernel names' rules (collective, matrix units, 16-bit) live in
profiles/kernel_names.py, shared by every reader, and are re-exported here.

Contract: pure functions of a name, each list cited to where it comes from, so a change of rule is
a change of one list.
- Tensor-Core-eligible ops: torch-tb-profiler's TC_OP_Allowlist (from ATen's autocast fp16
  list, autocast_mode.cpp), plus today's names of the same ops (`aten::convolution_backward`,
  scaled-dot-product attention, `…Backward0`).
- 16-bit ops: ops whose recorded input types are Half or BFloat16 (kineto/ops.py).
"""

from __future__ import annotations

import re

from tui_prof.profiles.kernel_names import is_16bit_kernel as is_16bit_kernel
from tui_prof.profiles.kernel_names import is_collective as is_collective
from tui_prof.profiles.kernel_names import uses_matrix_units

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


# One-off start-up runtime calls: creating the context and streams, querying the device,
# the first allocations (PyTorch's caching allocator calls cudaMalloc/cudaFree rarely after
# warm-up). Seen as multi-second calls at the start of real traces (HTA's A100 benchmark trace:
# a 30 s cudaDeviceGetStreamPriorityRange, a 6 s cudaFree); CUDA and ROCm (hip*) names alike.
# Runtime calls that wait for the device (…Synchronize, memcpy calls: a copy call blocks until its
# copy is done): their time the device does not cover is waiting ("other"), not launch overhead.
WAIT_CALL = re.compile(r"Synchroni[sz]e|Memcpy", re.IGNORECASE)

STARTUP_CALL = re.compile(
    r"^(cuda|hip|cu)(DeviceGetStreamPriorityRange|Free|FreeHost|Malloc\w*|HostAlloc|"
    r"HostRegister|StreamCreate\w*|EventCreate\w*|GetDeviceProperties\w*|GetDeviceCount|"
    r"SetDevice|DeviceSetLimit|Init|CtxCreate\w*|DevicePrimaryCtx\w*|ModuleLoad\w*|"
    r"LibraryLoad\w*)(_v\d+)?$"
)


def is_startup_call(name: str) -> bool:
    return STARTUP_CALL.match(name) is not None


uses_tensor_core = uses_matrix_units  # the Kineto reader's name for the shared rule


def tc_eligible_op(op: str) -> bool:
    """ATen ops and autograd nodes that run on Tensor Cores in 16-bit (`MmBackward0` → `MmBackward`)."""
    if op.startswith(_AUTOGRAD_PREFIX):
        op = op[len(_AUTOGRAD_PREFIX) :]
    return op in TC_ELIGIBLE_OPS or _BACKWARD_NUMBER.sub(r"\1", op) in TC_ELIGIBLE_OPS


def op_type(op: str) -> str:
    """A short type for an op: its namespace (`aten`, `autograd`, `nccl` …), else `op`."""
    if op.startswith(_AUTOGRAD_PREFIX):
        return "autograd"
    for sep in ("::", ":", "#"):
        if sep in op:
            return op.split(sep, 1)[0][:24]
    return "op"
