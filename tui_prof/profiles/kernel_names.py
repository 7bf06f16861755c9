"""What a GPU kernel's name says: runs on matrix units, 16-bit (or narrower) math, collective.

Contract: pure functions of a name, one place for each rule, used by every reader (Kineto
traces, XSpace kernel stats, TensorBoard's saved tool files). Lists cite where they come from;
tests/unit/test_kernel_names.py holds real kernel names from public traces, issues and libraries.
- Matrix units (NVIDIA Tensor Cores, AMD Matrix Cores):
  * torch-tb-profiler's TC_Allowlist (tensor_core.py, from NVIDIA PyProf tc.py): h884, s884,
    h1688, s1688, hmma, i8816, 16816, xmma_*, c1688 and cuDNN's special-purpose conv kernels;
  * CUTLASS 2 and 3 (`cutlass_80_tensorop_…`, `cutlass3x_sm90_tensorop_…`,
    `cutlass3x_sm100_bstensorop_…`: CUTLASS's profiler's procedural names);
  * cuBLAS/cuDNN `sm80_xmma_…`/`sm90_xmma_…` and cuBLAS 12's `nvjet_…` (Hopper, Blackwell);
  * Hopper/Blackwell instruction names in hand-written kernels (`wgmma`, `tcgen05`, `umma`);
  * FP8/FP4 GEMMs named by their formats (`bmm_MxE4m3_MxE2m1…_sm100f`, `…e4m3…gemm…`): those
    formats only run on matrix units;
  * fused attention (FlashAttention 2/3 `flash_fwd`/`FlashAttnFwdSm90`, `fmha`, cuDNN's `sdpa`);
  * AMD: Tensile/hipBLASLt's MFMA field (`_MI16x16x16x1_`, `_MI32x32x8`), Composable Kernel's
    `xdl`/`xdlops` GEMMs and MFMA/WMMA in kernel names.
- 16-bit: fp16/bf16/half/bfloat16 in the name, cuBLAS `h884`/`h1688`/`h16816`/`hmma`, FP8/FP4
  formats, and Tensile/hipBLASLt's data-type field (`Cijk_Ailk_Bljk_BBS…` bf16, `HHS` fp16,
  `F8…` fp8; `S`/`SB` are fp32).
- Not matrix units: a name that says it runs on the CUDA cores' FMA pipes (`…_ffma_…`: cuBLAS's
  `sm80_xmma_gemm_f32f32_f32f32_f32_…_ffma_…` is a float32 GEMM without Tensor Cores, though
  torch-tb-profiler's `xmma_gemm` entry counts it), CUTLASS's SIMT kernels (`cutlass_…_simt_…`)
  and cuDNN's `init_device_workspace_kernel<xmma…>`.
- TF32: float32 math on Tensor Cores says `tf32` in its name (cuDNN's `…_f32f32_tf32f32_f32_…`
  convolutions, PyTorch's default for them; cuBLAS's when `allow_tf32` is on).
- Collectives: Holistic Trace Analysis' `NCCL_KERNEL_RE` (`^nccl.*Kernel`; RCCL keeps the names).
"""

from __future__ import annotations

import re

COLLECTIVE_KERNEL = re.compile(r"^nccl.*Kernel")

# torch-tb-profiler TC_Allowlist (from NVIDIA PyProf tc.py), then names that list predates.
MATRIX_UNIT_SUBSTRINGS: tuple[str, ...] = (
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
    "tensorop",  # CUTLASS 2/3: cutlass_80_tensorop_…, cutlass3x_sm90_(bs)tensorop_…
    "xmma_",  # cuBLAS/cuDNN sm80_/sm90_/sm100_xmma_{gemm,fprop,dgrad,wgrad}…
    "nvjet",  # cuBLAS 12 Hopper/Blackwell GEMMs: nvjet_tst_…, nvjet_hsh_…
    "tcgen05",
    "wgmma",
    "flash_fwd",
    "flash_bwd",
    "FlashAttn",
    "fmha",
    "_sdpa_",  # cuDNN's fused attention: cudnn_generated_fort_native_sdpa_sm90_…
)
_MATRIX_UNIT_RE = re.compile(
    r"_MI\d+x\d+x\d+"  # Tensile/hipBLASLt MFMA instruction shape
    r"|(^|[_:])xdl(ops)?([_<]|$)|xdl_cshuffle|DeviceGemmXdl"  # Composable Kernel
    r"|(?i:mfma|wmma|\bumma\b)"
    # FP8/FP4 GEMMs named by their formats
    r"|(?i:(gemm|bmm|matmul|_mm_|mma).*(e4m3|e5m2|e2m1|fp8|fp4|mxf[468]))"
    r"|(?i:(e4m3|e5m2|e2m1|fp8|fp4|mxf[468]).*(gemm|bmm|matmul|_mm_|mma))"
)

SIXTEEN_BIT_KERNEL = re.compile(
    r"(?i:fp16|bf16|f16|half|bfloat16|e4m3|e5m2|e2m1|fp8|fp4)"
    r"|hmma|(^|_)h(884|1688|16816)"
    r"|^(Custom_)?Cijk_A[a-z]+_B[a-z]+_([HB]|F8)"  # Tensile: bf16 (B), fp16 (H), fp8 (F8) inputs
)


# A kernel name that says its number type at all (16-bit above, or 32-bit): cuBLAS sgemm/s1688,
# CUTLASS/cuDNN f32 and tf32, PyTorch's `<float>` template arguments, Tensile's `_S`/`SB` inputs.
# XLA's fusions (`gemm_fusion_dot_3`, `loop_add_fusion`) say none: by name, their precision is
# unknown, not 32-bit.
_THIRTY_TWO_BIT = re.compile(
    r"(?i:f32|fp32|tf32|float|sgemm|single)|s884|s1688|s16816|^(Custom_)?Cijk_A[a-z]+_B[a-z]+_S"
)


def says_its_type(kernel: str) -> bool:
    """Whether a kernel's name tells its number type (16- or 32-bit) at all."""
    return is_16bit_kernel(kernel) or _THIRTY_TWO_BIT.search(kernel) is not None


def is_collective(kernel: str) -> bool:
    return COLLECTIVE_KERNEL.match(kernel) is not None


# XLA's collective HLO ops as a TPU's "XLA Ops" line names them (`all-reduce.3`, `%all-gather-start
# = …`, `reduce-scatter-fusion`): the ops XLA's HLO opcode list calls collectives.
XLA_COLLECTIVE_OP = re.compile(
    r"^%?(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|"
    r"collective-broadcast|ragged-all-to-all)\b"
)


def is_xla_collective(op: str) -> bool:
    return XLA_COLLECTIVE_OP.match(op) is not None


# FFMA/SIMT math, and cuDNN's workspace set-up that carries its GEMM's template names
_CUDA_CORES = re.compile(r"(^|_)(ffma|simt)(_|$)|init_device_workspace_kernel")


def uses_matrix_units(kernel: str) -> bool:
    """Whether the kernel runs on Tensor Cores / Matrix Cores, by its name."""
    if _CUDA_CORES.search(kernel) is not None:
        return False
    return (
        any(p in kernel for p in MATRIX_UNIT_SUBSTRINGS)
        or _MATRIX_UNIT_RE.search(kernel) is not None
    )


def is_tf32_kernel(kernel: str) -> bool:
    """Whether the kernel runs float32 math as TF32 on Tensor Cores, by its name."""
    return "tf32" in kernel.lower() and _CUDA_CORES.search(kernel) is None


def is_16bit_kernel(kernel: str) -> bool:
    """Whether the kernel computes in 16-bit or narrower types, by its name."""
    return SIXTEEN_BIT_KERNEL.search(kernel) is not None
