"""Matrix-unit and 16-bit recognition on real kernel names (profiles/kernel_names.py).

Each name is copied from where it was seen: the public traces in ../shared/traces, tuiprof's
sample traces, and public GitHub issues, code and profiling write-ups (cited beside each).
"""

from __future__ import annotations

import pytest

from tui_prof.profiles.kernel_names import is_16bit_kernel, is_tf32_kernel, uses_matrix_units

MATRIX_UNIT_KERNELS = [
    # Volta/Turing/Ampere: cuBLAS and CUTLASS 2 (torch-tb-profiler's list and beyond)
    "volta_h884gemm_64x64_ldg8_nn",
    "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_nn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>"
    "(cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1::Params)",  # HTA a100_rank0 trace
    "cutlass_tensorop_s1688tf32gemm_256x128_16x3_nn_align4",  # NVIDIA/cutlass#999
    # cuDNN xmma on an H100 (sample_traces/torch_cuda_autocast)
    "sm80_xmma_wgrad_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_"
    "tilesize32x32x64_stage1_warpsize2x2x1_g1_tensor16x8x16_aligna2_alignc2",
    # Hopper: cuBLAS xmma (triton-lang/triton#3668), CUTLASS 3 (NVIDIA/cutlass#947), cuBLAS 12
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas",
    "cutlass3x_sm90_tensorop_h64x128x16gemm_f16_f16_f16_void_f16_128x128x64_1x1x1_0_nnn_align8",
    "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT",  # torch.profiler tables of H100 runs
    "nvjet_tss_64x8_64x16_2x1_v_bz_splitK_TNT",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4>>",
    # Blackwell: cuBLAS 12.8+ and TensorRT-LLM's FP8/FP4 batched GEMMs
    "nvjet_sm100_tst_32x64_64x16_4x2_2cta_h_bz_splitK_bias_TNN",
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_Ab32_Bb32_Cb32_t128x8x512_s3_et128x8_m128x8x32_c1x1x1_rM_TN_"
    "transOut_schPd2x1x2x3_biasFp32M_bN_tma_ldgstsSf_rgTma_clmp_swiGlu_dynB_sm100f",
    "bmm_E2m1_E2m1E2m1_Fp32_t128x64x256_s6_et128x64_m128x64x64_cga1x1x1_16dp256b_TN_transOut_"
    "schedS_bN_ldgsts_tmaOpt_clmp_swiGlu_dynBatch_sm100a",
    "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_Ab32_Bb32_t128x8x256u2_s4_et128x8_m128x8x32_c1x1x1_rM_TN",
    # AMD: Tensile via rocBLAS/hipBLASLt on MI300X (shared jax_gpu_gemm) and MI250 (HTA trace)
    "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB1_APM1_ABV0_ACED0_AF0EM1_AF1EM1",
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1",
    "Custom_Cijk_Alik_Bljk_BBS_BH_Bias_AS_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_K1_MIWT4_16_"
    "DTVA",  # ROCm/hipBLASLt#869
    "Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN",
    # AMD Composable Kernel GEMMs (MI355X traces in SemiAnalysisAI/InferenceX#1004)
    "gemm_xdl_preshuffle",
    # float32 convolutions as TF32 on an H100 (cuDNN's default; sample_traces/torch_cuda_wide_float32)
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
    "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
]

TF32_KERNELS = [
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
    "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
    "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
    "warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn",
    "cutlass_tensorop_s1688tf32gemm_256x128_16x3_nn_align4",
]


@pytest.mark.parametrize("name", TF32_KERNELS)
def test_tf32_kernels(name: str) -> None:
    assert is_tf32_kernel(name) and uses_matrix_units(name) and not is_16bit_kernel(name)


CUDA_CORE_KERNELS = [
    # float32 on an H100's CUDA cores: cuBLAS/cuDNN xmma kernels that say `ffma`
    # (sample_traces/torch_cuda_wide_float32), and cuDNN's workspace set-up
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas",
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_"
    "warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
    "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::"
    "implicit_gemm::wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::Grid_constant_params> >"
    "(xmma__5x_cudnn::implicit_gemm::wgrad_indexed::Warp_specialized_params<xmma__5x_cudnn::"
    "Grid_constant_params>, bool)",
    "cutlass_80_simt_sgemm_128x128_8x5_nn_align1",
]

OTHER_KERNELS = [
    "volta_sgemm_128x64_nn",  # FP32 FFMA GEMM
    "ampere_sgemm_128x64_nn",
    "Cijk_Ailk_Bljk_S_MT64x64x8_SN",  # Tensile without the MFMA field
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "wrapped_broadcast.kd",
    *CUDA_CORE_KERNELS,
    "__amd_rocclr_copyBuffer.kd",
    "triton_poi_fused_arange_ge_index_put_lift_fresh_0",
    "FusedAddRMSNormKernel",
    "routingIndicesCluster",
    "dynamic_per_token_scaled_fp8_quant_kernel",
]


@pytest.mark.parametrize("name", MATRIX_UNIT_KERNELS)
def test_matrix_unit_kernels_are_recognised(name: str) -> None:
    assert uses_matrix_units(name)


@pytest.mark.parametrize("name", OTHER_KERNELS)
def test_other_kernels_are_not(name: str) -> None:
    assert not uses_matrix_units(name)


@pytest.mark.parametrize(
    "name",
    [
        "volta_h884gemm_64x64_ldg8_nn",
        "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_nn",
        "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN",
        "Custom_Cijk_Alik_Bljk_BBS_BH_Bias_AS_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_K1",
        "Custom_Cijk_Ailk_Bljk_F8H_HHS_BH_MT128x16x128_MI16x16x1_16",  # ROCm/hipBLASLt#607
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_Ab32_Bb32_Cb32_t128x8x512_s3_sm100f",
        "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_Ab32_Bb32_t128x8x256u2_s4",
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
        "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>",
    ],
)
def test_sixteen_bit_and_narrower_kernels(name: str) -> None:
    assert is_16bit_kernel(name)


@pytest.mark.parametrize(
    "name",
    [
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN",  # fp32 MFMA
        "cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1",  # TF32
        "ampere_sgemm_128x64_nn",
        "wrapped_broadcast.kd",
    ],
)
def test_thirty_two_bit_kernels(name: str) -> None:
    assert not is_16bit_kernel(name)


@pytest.mark.parametrize(
    "name,says",
    [
        ("gemm_fusion_dot_general_10", False),  # XLA fusions (sample_traces/jax_cuda_bf16)
        ("loop_add_fusion", False),
        ("input_reduce_fusion_2", False),
        ("ampere_sgemm_128x64_nn", True),
        ("volta_h884gemm_64x64_ldg8_nn", True),
        ("Cijk_Ailk_Bljk_S_MT64x64x8_SN", True),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", True),
    ],
)
def test_which_names_say_their_type(name: str, says: bool) -> None:
    from tui_prof.profiles.kernel_names import says_its_type

    assert says_its_type(name) is says


@pytest.mark.parametrize("name", CUDA_CORE_KERNELS)
def test_float32_on_cuda_cores_is_not_tf32(name: str) -> None:
    assert not is_tf32_kernel(name)
