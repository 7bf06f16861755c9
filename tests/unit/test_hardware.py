"""The hardware table: rows found from what profiles say, and peaks equal to the vendors' figures.

The published figures below are typed from the datasheets as printed there (NVIDIA's Tensor
Core figures "with sparsity", i.e. twice dense; AMD's and Google's dense), independently of the
table, so a typo in either fails here.
"""

from __future__ import annotations

import pytest

from tui_prof.profiles.hardware import device_spec, vendor_of
from tui_prof.profiles.hardware_table import FORMATS, SPECS

# (name a profile gives, the row's model name)
NAMES = [
    ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2"),
    ("Tesla V100-DGXS-32GB", "NVIDIA V100 SXM2"),
    ("Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe"),
    ("Tesla V100S-PCIE-32GB", "NVIDIA V100S PCIe"),
    ("Tesla T4", "NVIDIA T4"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 40GB"),
    ("NVIDIA A100-PG509-200", "NVIDIA A100 40GB"),
    ("NVIDIA A10", "NVIDIA A10"),
    ("NVIDIA L4", "NVIDIA L4"),
    ("NVIDIA L40", "NVIDIA L40"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("NVIDIA H200", "NVIDIA H200 SXM"),
    ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
    ("NVIDIA B200", "NVIDIA B200"),
    ("AMD Instinct MI250X", "AMD Instinct MI250X"),
    ("AMD Instinct MI250X / MI250", "AMD Instinct MI250X"),
    ("AMD Instinct MI250", "AMD Instinct MI250"),
    ("AMD Instinct MI300X", "AMD Instinct MI300X"),
    ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),
    ("AMD Instinct MI300A", "AMD Instinct MI300A"),
    ("AMD Instinct MI325X", "AMD Instinct MI325X"),
    ("AMD Instinct MI355X", "AMD Instinct MI355X"),
    ("TPU v2", "TPU v2"),
    ("TPU v3", "TPU v3"),
    ("TPU v4", "TPU v4"),
    ("TPU v5 lite", "TPU v5e"),
    ("TPU v5e", "TPU v5e"),
    ("TPU v5", "TPU v5p"),
    ("TPU v5p", "TPU v5p"),
    ("TPU v6 lite", "TPU v6e"),
    ("TPU v6e", "TPU v6e"),
    ("CPU", "CPU"),
]


@pytest.mark.parametrize("name,model", NAMES)
def test_names_profiles_give_find_their_row(name: str, model: str) -> None:
    spec = device_spec(name=name)
    assert spec is not None and spec.name == model and spec.exact


@pytest.mark.parametrize(
    "name,cc,model",
    [
        ("AMD GPU - gfx942", None, "AMD Instinct MI300X"),
        ("AMD GPU - gfx90a", None, "AMD Instinct MI250X"),
        ("gfx950", None, "AMD Instinct MI355X"),
        ("Nvidia GPU (Hopper)", None, "NVIDIA H100 SXM"),
        ("Nvidia GPU (Volta)", None, "NVIDIA V100 SXM2"),
        ("", "7.0", "NVIDIA V100 SXM2"),
        ("", 8.0, "NVIDIA A100 40GB"),
        ("", (9, 0), "NVIDIA H100 SXM"),
        ("GPU", "10.0", "NVIDIA B200"),
    ],
)
def test_an_architecture_alone_gives_an_inexact_row(name: str, cc: object, model: str) -> None:
    spec = device_spec(name=name, compute_capability=cc)  # type: ignore[arg-type]
    assert spec is not None and spec.name == model and not spec.exact


def test_a_model_name_wins_over_the_compute_capability() -> None:
    spec = device_spec(name="Tesla T4", compute_capability="9.0")
    assert spec is not None and spec.name == "NVIDIA T4"


def test_rocm_compute_capability_is_not_read_as_cuda() -> None:
    # ROCm reports gfx90a as 9.0; that is not an H100.
    assert device_spec(name="AMD Radeon Graphics", compute_capability="9.0") is None
    assert vendor_of("AMD Radeon Graphics") == "AMD"


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 4090", "TPU v7", "", "GPU"])
def test_unknown_devices_have_no_row(name: str) -> None:
    assert device_spec(name=name) is None


def test_vendor_words() -> None:
    assert device_spec(name="NVIDIA H100 80GB HBM3").matrix_units == "Tensor Cores"  # type: ignore[union-attr]
    assert device_spec(name="AMD Instinct MI300X").matrix_units == "Matrix Cores"  # type: ignore[union-attr]
    assert device_spec(name="TPU v6 lite").matrix_units == "MXU"  # type: ignore[union-attr]
    assert device_spec(name="CPU").matrix_units == ""  # type: ignore[union-attr]
    assert vendor_of("Tesla V100-SXM2-16GB") == "NVIDIA"
    assert vendor_of("AMD GPU - gfx942") == "AMD"
    assert vendor_of("TPU v4") == "Google"


# The vendors' figures as printed: NVIDIA Tensor Core figures with sparsity (2x dense) where the
# datasheet prints them so (A100 onwards), dense otherwise; TFLOP/s, GB/s.
NVIDIA_SPARSE = {
    "NVIDIA A100 80GB SXM": {"tf32": 312, "bf16": 624, "fp16": 624, "int8": 1248},
    "NVIDIA A10": {"tf32": 125, "bf16": 250, "fp16": 250, "int8": 500},
    "NVIDIA L4": {"tf32": 120, "bf16": 242, "fp16": 242, "fp8": 485, "int8": 485},
    "NVIDIA L40S": {"tf32": 366, "fp8": 1466, "int8": 1466},
    "NVIDIA H100 SXM": {"tf32": 989, "bf16": 1979, "fp16": 1979, "fp8": 3958, "int8": 3958},
    "NVIDIA H100 PCIe": {"tf32": 756, "bf16": 1513, "fp16": 1513, "fp8": 3026, "int8": 3026},
    "NVIDIA B200": {"tf32": 2200, "bf16": 4500, "fp16": 4500, "fp8": 9000, "fp4": 18000},
}
DENSE: dict[str, dict[str, float]] = {
    "NVIDIA V100 SXM2": {"fp16": 125, "fp32": 15.7},
    "NVIDIA V100 PCIe": {"fp16": 112, "fp32": 14},
    "NVIDIA T4": {"fp16": 65, "int8": 130, "fp32": 8.1},
    "NVIDIA A100 40GB": {"bf16": 312, "tf32": 156, "fp32": 19.5},
    "NVIDIA H100 SXM": {"fp32": 67},
    "NVIDIA L40S": {"bf16": 362.05, "fp16": 362.05, "fp32": 91.6},  # printed beside 733 sparse
    "AMD Instinct MI250X": {"fp16": 383, "bf16": 383, "int8": 383, "fp32": 95.7},
    "AMD Instinct MI300X": {"fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "tf32": 653.7},
    "AMD Instinct MI325X": {"fp16": 1307.4, "fp8": 2614.9},
    "AMD Instinct MI355X": {"fp16": 2516.6, "fp8": 5033.2, "fp4": 10066.3},
    "TPU v2": {"bf16": 45},
    "TPU v3": {"bf16": 123},
    "TPU v4": {"bf16": 275},
    "TPU v5e": {"bf16": 197, "int8": 394},
    "TPU v5p": {"bf16": 459, "int8": 918},
    "TPU v6e": {"bf16": 918, "int8": 1836},
}
BANDWIDTH_GBS = {
    "NVIDIA V100 SXM2": 900,
    "NVIDIA T4": 320,
    "NVIDIA A100 40GB": 1555,
    "NVIDIA A100 80GB SXM": 2039,
    "NVIDIA L4": 300,
    "NVIDIA H100 SXM": 3350,
    "NVIDIA H200 SXM": 4800,
    "NVIDIA B200": 8000,
    "AMD Instinct MI250X": 3276.8,
    "AMD Instinct MI300X": 5300,
    "AMD Instinct MI325X": 6000,
    "AMD Instinct MI355X": 8000,
    "TPU v4": 1200,
    "TPU v5e": 819,
    "TPU v5p": 2765,
    "TPU v6e": 1640,
}


def _row(model: str):  # type: ignore[no-untyped-def]
    return next(s for s in SPECS.values() if s.name == model)


@pytest.mark.parametrize("model", sorted(NVIDIA_SPARSE))
def test_nvidia_dense_peaks_are_half_the_sparse_figures(model: str) -> None:
    spec = _row(model)
    for fmt, sparse in NVIDIA_SPARSE[model].items():
        peak = spec.peak_flops(fmt)
        assert peak is not None
        assert peak / 1e12 == pytest.approx(sparse / 2, rel=0.01), fmt


@pytest.mark.parametrize("model", sorted(DENSE))
def test_dense_peaks_equal_the_published_figures(model: str) -> None:
    spec = _row(model)
    for fmt, tflops in DENSE[model].items():
        assert spec.peak_flops(fmt) == pytest.approx(tflops * 1e12, rel=0.001), fmt


@pytest.mark.parametrize("model", sorted(BANDWIDTH_GBS))
def test_memory_bandwidth_equals_the_published_figure(model: str) -> None:
    assert _row(model).memory_bandwidth == pytest.approx(BANDWIDTH_GBS[model] * 1e9)


def test_formats_each_generation_lacks() -> None:
    v100 = device_spec(name="Tesla V100-SXM2-16GB")
    assert v100 is not None and v100.matrix_formats == {"fp16"}
    t4 = device_spec(name="Tesla T4")
    assert t4 is not None and not t4.supports("bf16") and not t4.supports("tf32")
    a100 = device_spec(name="NVIDIA A100-SXM4-80GB")
    assert a100 is not None and a100.supports("bf16") and not a100.supports("fp8")
    h100 = device_spec(name="NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.supports("fp8") and not h100.supports("fp4")
    assert device_spec(name="NVIDIA B200").supports("fp4")  # type: ignore[union-attr]
    mi250 = device_spec(name="AMD Instinct MI250X")
    assert mi250 is not None and not mi250.supports("fp8") and not mi250.supports("tf32")
    assert device_spec(name="AMD Instinct MI300X").supports("fp8")  # type: ignore[union-attr]
    tpu = device_spec(name="TPU v4")
    assert tpu is not None and tpu.supports("bf16") and not tpu.supports("fp16")
    assert device_spec(name="CPU").matrix_formats == frozenset()  # type: ignore[union-attr]


def test_every_row_is_consistent() -> None:
    for key, spec in SPECS.items():
        assert set(spec.matrix_tflops) <= set(FORMATS), key
        assert spec.kind in ("GPU", "TPU", "CPU"), key
        if spec.kind != "CPU":
            assert spec.source and spec.memory_bandwidth_gbs, key
            assert spec.matrix_units, key
        # 16-bit is never slower than the wider formats on the same units
        for wide in ("tf32", "fp32"):
            if wide in spec.matrix_tflops and "bf16" in spec.matrix_tflops:
                assert spec.matrix_tflops["bf16"] >= spec.matrix_tflops[wide], key


def test_a_framework_device_gets_its_share_of_a_multi_die_package() -> None:
    """ROCm lists each MI250/MI250X GCD as its own device and JAX each TPU v2/v3 TensorCore;
    the datasheets' peaks are the package's (MI250X: 383 bf16 for two GCDs; TPU v3: 123 per
    chip of two cores). A profiled device did half: MFU against the whole package reads half."""
    mi250x = SPECS["mi250x"].per_device()
    assert mi250x.matrix_tflops["bf16"] == pytest.approx(191.5)
    assert mi250x.fp32_tflops == pytest.approx(47.9 / 2)
    assert mi250x.memory_bandwidth_gbs == pytest.approx(1638.4)
    assert "one GCD of 2" in mi250x.name
    assert SPECS["tpu_v3"].per_device().matrix_tflops["bf16"] == pytest.approx(61.5)
    assert "one core of 2" in SPECS["tpu_v3"].per_device().name
    for key in ("mi300x", "h100_sxm", "tpu_v4", "tpu_v5e"):
        assert SPECS[key].per_device() is SPECS[key]
