"""The hardware table's rows: each device model's matrix units, their number formats, dense peaks
and memory bandwidth, with the datasheet it comes from (hardware.py finds a profile's row).

Figures are the vendors' published peaks, DENSE (NVIDIA and AMD quote matrix peaks "with
sparsity" as well, at twice these), in TFLOP/s (TOPS for int8) and GB/s (10^9 bytes/s). Each row
cites its datasheet. A row found only from an architecture (a gfx name, a compute capability, an
XLA "(Hopper)") has `exact=False`: its number formats are right for the architecture, its peaks
are one member's (the one named in `name`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

# Number formats a matrix unit may run ("fp32" = fp32 on the matrix units: AMD's MFMA).
FORMATS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")

# The vendor's word for its matrix units.
MATRIX_UNITS: dict[str, str] = {"NVIDIA": "Tensor Cores", "AMD": "Matrix Cores", "Google": "MXU"}


@dataclass(frozen=True)
class DeviceSpec:
    """One device model: vendor, its matrix units and their formats, dense peaks, memory bandwidth.

    `matrix_tflops` holds the dense peak of each format its matrix units run (Tensor Cores, Matrix
    Cores, MXU); a format absent from it is one the device's matrix units do not run.
    `fp32_tflops` is fp32 on the ordinary (vector/CUDA) cores; None where the vendor gives none.
    """

    name: str  # "NVIDIA H100 SXM"
    vendor: str  # "NVIDIA", "AMD", "Google", "" (CPU)
    kind: str  # "GPU", "TPU", "CPU"
    arch: str  # "sm_90", "gfx942", "TPU v5p", ""
    matrix_tflops: dict[str, float] = field(default_factory=dict)
    fp32_tflops: float | None = None
    memory_bandwidth_gbs: float | None = None
    source: str = ""
    exact: bool = True  # False: found from the architecture only (peaks are `name`'s)
    # Devices a framework lists per package: MI250/MI250X's two GCDs, TPU v2/v3's two
    # TensorCores per chip. The figures above are the package's (the datasheet's); `per_device`
    # gives one framework device's share, which is what a profile's device did.
    devices_per_package: int = 1

    @property
    def matrix_units(self) -> str:
        """The vendor's word: "Tensor Cores", "Matrix Cores", "MXU"; "" for a CPU."""
        return MATRIX_UNITS.get(self.vendor, "")

    @property
    def matrix_formats(self) -> frozenset[str]:
        return frozenset(self.matrix_tflops)

    def supports(self, fmt: str) -> bool:
        """Whether the matrix units run `fmt` ("bf16", "tf32", "fp8", …)."""
        return fmt in self.matrix_tflops

    def peak_flops(self, fmt: str) -> float | None:
        """Dense peak FLOP/s (OP/s for int8) of `fmt`: on the matrix units where they run it,
        else, for "fp32", on the ordinary cores; None where the device has no such figure."""
        if fmt in self.matrix_tflops:
            return self.matrix_tflops[fmt] * 1e12
        if fmt == "fp32" and self.fp32_tflops is not None:
            return self.fp32_tflops * 1e12
        return None

    def per_device(self) -> DeviceSpec:
        """The row as one framework device sees it: the package's figures split between its
        GCDs or cores, the name saying so."""
        n = self.devices_per_package
        if n == 1:
            return self
        part = "GCD" if self.vendor == "AMD" else "core"
        return replace(
            self,
            name=f"{self.name}, one {part} of {n}",
            matrix_tflops={k: v / n for k, v in self.matrix_tflops.items()},
            fp32_tflops=None if self.fp32_tflops is None else self.fp32_tflops / n,
            memory_bandwidth_gbs=(
                None if self.memory_bandwidth_gbs is None else self.memory_bandwidth_gbs / n
            ),
            devices_per_package=1,
        )

    @property
    def memory_bandwidth(self) -> float | None:
        """Peak memory bandwidth in bytes/s."""
        return None if self.memory_bandwidth_gbs is None else self.memory_bandwidth_gbs * 1e9


def _nv(
    name: str, arch: str, vector_fp32: float, bw: float, source: str, **matrix: float
) -> DeviceSpec:
    return DeviceSpec(name, "NVIDIA", "GPU", arch, dict(matrix), vector_fp32, bw, source)


def _amd(
    name: str, arch: str, vector_fp32: float, bw: float, source: str, gcds: int = 1, **matrix: float
) -> DeviceSpec:
    return DeviceSpec(
        name, "AMD", "GPU", arch, dict(matrix), vector_fp32, bw, source, devices_per_package=gcds
    )


def _tpu(name: str, bw: float, source: str, cores: int = 1, **matrix: float) -> DeviceSpec:
    return DeviceSpec(
        name, "Google", "TPU", name, dict(matrix), None, bw, source, devices_per_package=cores
    )


_V100 = "NVIDIA Tesla V100 GPU Accelerator datasheet (nvidia.com/v100): Tensor Cores run fp16 only"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/a100, 1758950-r4); sparse = 2x"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/h100); sparse = 2x"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/h200): H100's compute; sparse = 2x"
_MI300 = "AMD Instinct MI300X/MI325X data sheets (amd.com/instinct); AMD CDNA 3 white paper"
_MI355 = (
    "AMD Instinct MI350 series data sheet (amd.com/instinct); AMD CDNA 4 white paper: "
    "fp4/fp6 (MX) added, no xf32/TF32 matrix format"
)
_TPU = "Google Cloud TPU docs, system architecture (cloud.google.com/tpu/docs/"

# The rows, keyed for the name patterns below. NVIDIA's "fp32" peak is the CUDA cores' (Tensor
# Cores run fp32 as tf32); AMD's MFMA runs fp32 itself ("fp32" in matrix_tflops).
SPECS: dict[str, DeviceSpec] = {
    # --- NVIDIA Volta (sm_70): fp16 Tensor Cores only.
    "v100_sxm2": _nv("NVIDIA V100 SXM2", "sm_70", 15.7, 900, _V100, fp16=125),
    "v100_pcie": _nv("NVIDIA V100 PCIe", "sm_70", 14.0, 900, _V100, fp16=112),
    "v100s_pcie": _nv("NVIDIA V100S PCIe", "sm_70", 16.4, 1134, _V100, fp16=130),
    # --- Turing (sm_75)
    "t4": _nv(
        "NVIDIA T4",
        "sm_75",
        8.1,
        320,
        "NVIDIA T4 Tensor Core GPU datasheet (nvidia.com/t4)",
        fp16=65,
        int8=130,
    ),
    # --- Ampere (sm_80, sm_86)
    "a100_40gb": _nv(
        "NVIDIA A100 40GB", "sm_80", 19.5, 1555, _A100, tf32=156, fp16=312, bf16=312, int8=624
    ),
    "a100_80gb_pcie": _nv(
        "NVIDIA A100 80GB PCIe", "sm_80", 19.5, 1935, _A100, tf32=156, fp16=312, bf16=312, int8=624
    ),
    "a100_80gb_sxm": _nv(
        "NVIDIA A100 80GB SXM", "sm_80", 19.5, 2039, _A100, tf32=156, fp16=312, bf16=312, int8=624
    ),
    "a10": _nv(
        "NVIDIA A10",
        "sm_86",
        31.2,
        600,
        "NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/a10); sparse = 2x",
        tf32=62.5,
        fp16=125,
        bf16=125,
        int8=250,
    ),
    # --- Ada Lovelace (sm_89): fp8 Tensor Cores
    "l4": _nv(
        "NVIDIA L4",
        "sm_89",
        30.3,
        300,
        "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/l4): 120/242/485 TF with sparsity",
        tf32=60,
        fp16=121,
        bf16=121,
        fp8=242.5,
        int8=242.5,
    ),
    "l40": _nv(
        "NVIDIA L40",
        "sm_89",
        90.5,
        864,
        "NVIDIA L40 GPU datasheet (nvidia.com/l40): 181/362/724 TF with sparsity",
        tf32=90.5,
        fp16=181,
        bf16=181,
        fp8=362,
        int8=362,
    ),
    "l40s": _nv(
        "NVIDIA L40S",
        "sm_89",
        91.6,
        864,
        "NVIDIA L40S GPU datasheet (nvidia.com/l40s): 366/733/1466 TF with sparsity",
        tf32=183,
        fp16=362.05,
        bf16=362.05,
        fp8=733,
        int8=733,
    ),
    # --- Hopper (sm_90)
    "h100_sxm": _nv(
        "NVIDIA H100 SXM",
        "sm_90",
        67,
        3350,
        _H100,
        tf32=494.5,
        fp16=989.5,
        bf16=989.5,
        fp8=1979,
        int8=1979,
    ),
    "h100_pcie": _nv(
        "NVIDIA H100 PCIe",
        "sm_90",
        51,
        2000,
        _H100,
        tf32=378,
        fp16=756,
        bf16=756,
        fp8=1513,
        int8=1513,
    ),
    "h100_nvl": _nv(
        "NVIDIA H100 NVL",
        "sm_90",
        60,
        3900,
        _H100,
        tf32=417.5,
        fp16=835.5,
        bf16=835.5,
        fp8=1670.5,
        int8=1670.5,
    ),
    "h200": _nv(
        "NVIDIA H200 SXM",
        "sm_90",
        67,
        4800,
        _H200,
        tf32=494.5,
        fp16=989.5,
        bf16=989.5,
        fp8=1979,
        int8=1979,
    ),
    "h200_nvl": _nv(
        "NVIDIA H200 NVL",
        "sm_90",
        60,
        4800,
        _H200,
        tf32=417.5,
        fp16=835.5,
        bf16=835.5,
        fp8=1670.5,
        int8=1670.5,
    ),
    # --- Blackwell (sm_100): fp4 Tensor Cores
    "b200": _nv(
        "NVIDIA B200",
        "sm_100",
        75,
        8000,
        "NVIDIA DGX B200 / HGX B200 datasheets (nvidia.com/dgx-b200): 18 PF fp4, 9 PF fp8, "
        "4.5 PF fp16 with sparsity; 64 TB/s HBM3e over 8 GPUs",
        tf32=1100,
        fp16=2250,
        bf16=2250,
        fp8=4500,
        fp4=9000,
        int8=4500,
    ),
    # --- AMD CDNA 2 (gfx90a)
    "mi250x": _amd(
        "AMD Instinct MI250X",
        "gfx90a",
        47.9,
        3276.8,
        "AMD Instinct MI250X data sheet (amd.com/instinct); AMD CDNA 2 white paper",
        gcds=2,  # each GCD is its own ROCm device
        fp32=95.7,
        fp16=383,
        bf16=383,
        int8=383,
    ),
    "mi250": _amd(
        "AMD Instinct MI250",
        "gfx90a",
        45.3,
        3276.8,
        "AMD Instinct MI250 data sheet (amd.com/instinct); AMD CDNA 2 white paper",
        gcds=2,
        fp32=90.5,
        fp16=362.1,
        bf16=362.1,
        int8=362.1,
    ),
    # --- AMD CDNA 3 (gfx942)
    "mi300x": _amd(
        "AMD Instinct MI300X",
        "gfx942",
        163.4,
        5300,
        _MI300,
        fp32=163.4,
        tf32=653.7,
        fp16=1307.4,
        bf16=1307.4,
        fp8=2614.9,
        int8=2614.9,
    ),
    "mi300a": _amd(
        "AMD Instinct MI300A",
        "gfx942",
        122.6,
        5300,
        "AMD Instinct MI300A data sheet (amd.com/instinct)",
        fp32=122.6,
        tf32=490.3,
        fp16=980.6,
        bf16=980.6,
        fp8=1961.2,
        int8=1961.2,
    ),
    "mi325x": _amd(
        "AMD Instinct MI325X",
        "gfx942",
        163.4,
        6000,
        _MI300,
        fp32=163.4,
        tf32=653.7,
        fp16=1307.4,
        bf16=1307.4,
        fp8=2614.9,
        int8=2614.9,
    ),
    # --- AMD CDNA 4 (gfx950)
    "mi350x": _amd(
        "AMD Instinct MI350X",
        "gfx950",
        144.2,
        8000,
        _MI355,
        fp32=144.2,
        fp16=2306.9,
        bf16=2306.9,
        fp8=4613.7,
        fp4=9227.5,
        int8=4613.7,
    ),
    "mi355x": _amd(
        "AMD Instinct MI355X",
        "gfx950",
        157.3,
        8000,
        _MI355,
        fp32=157.3,
        fp16=2516.6,
        bf16=2516.6,
        fp8=5033.2,
        fp4=10066.3,
        int8=5033.2,
    ),
    # --- Google TPU, per chip. The MXU multiplies bf16 (fp32 in several bf16 passes).
    # v2 and v3 chips have two TensorCores, each its own JAX/TF device; v4 and v5p join theirs
    # (megacore), v5e and v6e have one.
    "tpu_v2": _tpu("TPU v2", 600, _TPU + "v2)", cores=2, bf16=45),
    "tpu_v3": _tpu("TPU v3", 900, _TPU + "v3)", cores=2, bf16=123),
    "tpu_v4": _tpu("TPU v4", 1200, _TPU + "v4)", bf16=275, int8=275),
    "tpu_v5e": _tpu("TPU v5e", 819, _TPU + "v5e)", bf16=197, int8=394),
    "tpu_v5p": _tpu("TPU v5p", 2765, _TPU + "v5p)", bf16=459, int8=918),
    "tpu_v6e": _tpu("TPU v6e", 1640, _TPU + "v6e)", bf16=918, int8=1836),
    # --- A host CPU: no matrix units this table can vouch for (AMX, AVX-512 BF16 vary by model).
    "cpu": DeviceSpec("CPU", "", "CPU", ""),
}
