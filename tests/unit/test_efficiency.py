"""FLOPs, MFU and memory: the shape models by hand, real traces against their own figures.

References: 2·M·N·K computed here from the traces' recorded shapes (read with the json module,
not tuiprof's reader); torch.utils.flop_counter on the same model; the `[memory]` events' own
maxima; the converter's XLA cost on an XSpace profile.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SAMPLES, SHARED_TRACES, needs_shared

from tui_prof.model import Environment
from tui_prof.profiles.cache import decode, encode
from tui_prof.profiles.discover import discover
from tui_prof.profiles.efficiency import efficiency, with_peak
from tui_prof.profiles.hardware_table import SPECS
from tui_prof.profiles.kineto.flop_models import flops, is_math_op, number_format
from tui_prof.profiles.load import load_summary

V100 = SHARED_TRACES / "kineto_tb_plugin"
A100 = SHARED_TRACES / "kineto" / "a100_rank0.json.gz"
GEMM_XSPACE = SHARED_TRACES / "jax_gpu_gemm"


# -- the shape models, by hand ---------------------------------------------------------------


def test_gemm_models() -> None:
    assert flops("aten::mm", [[32, 10], [10, 128]]) == 2 * 32 * 10 * 128
    assert flops("aten::addmm", [[128], [32, 1024], [1024, 128], [], []]) == 2 * 32 * 1024 * 128
    assert flops("aten::bmm", [[4, 5, 16], [4, 16, 7]]) == 2 * 4 * 5 * 16 * 7
    assert flops("aten::baddbmm", [[4, 5, 7], [4, 5, 16], [4, 16, 7]]) == 2 * 4 * 5 * 16 * 7
    # matmul broadcasts batch dimensions; linear's weight is (out, in)
    assert flops("aten::matmul", [[3, 1, 5, 16], [4, 16, 7]]) == 2 * 12 * 5 * 16 * 7
    assert flops("aten::linear", [[2, 5, 16], [8, 16], [8]]) == 2 * 10 * 16 * 8
    assert flops("aten::mm", [[32, 10]]) is None  # a record without the second operand
    assert flops("aten::relu", [[32, 10], [1]]) is None  # no model


def test_convolution_models() -> None:
    # 3→8 channels, 3×3, stride 2, padding 1 on 16×16: 8×8 out
    x, w = [4, 3, 16, 16], [8, 3, 3, 3]
    expected = 2 * 4 * 8 * 8 * 8 * 3 * 3 * 3
    conv2d = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]
    assert flops("aten::conv2d", [x, w, [8], [], [], [], []], conv2d) == expected
    mkldnn = ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"]  # padding before stride
    assert flops("aten::mkldnn_convolution", [x, w, [8], [], [], [], []], mkldnn) == expected
    cudnn = ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]
    assert flops("aten::cudnn_convolution", [x, w, [], [], [], [], [], [], []], cudnn) == expected
    # dilation 2, no padding: 16 - 2·2 = 12 → 12×12 out at stride 1
    dilated = ["", "", "", "[1, 1]", "[0, 0]", "[2, 2]", "1"]
    assert flops("aten::conv2d", [x, w, [8]], dilated) == 2 * 4 * 8 * 144 * 27
    # grouped: the weight holds C_in / groups
    grouped = flops(
        "aten::conv2d", [[1, 8, 4, 4], [8, 2, 1, 1], []], ["", "", "", "1", "0", "1", "4"]
    )
    assert grouped == 2 * 1 * 8 * 16 * 2
    # no concrete inputs (2021 traces): stride unknown, no count
    assert flops("aten::conv2d", [x, w, [8]], None) is None
    transposed = ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"]
    assert flops("aten::convolution", [x, w, [8]], transposed) is None
    # backward: input and weight gradients, each a forward's worth, as output_mask says
    back = [[4, 8, 8, 8], x, w]
    mask = ["", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    assert flops("aten::convolution_backward", back, [*mask, "[True, True, True]"]) == 2 * expected
    assert flops("aten::convolution_backward", back, [*mask, "[False, True, True]"]) == expected


def test_attention_models() -> None:
    b, h, lq, s, e = 2, 4, 128, 256, 64
    fwd = 4 * b * h * lq * s * e
    bhle = [[b, h, lq, e], [b, h, s, e], [b, h, s, e]]
    assert flops("aten::scaled_dot_product_attention", bhle) == fwd
    blhe = [[b, lq, h, e], [b, s, h, e], [b, s, h, e]]
    assert flops("aten::_flash_attention_forward", blhe) == fwd
    grad = [[b, h, lq, e], *bhle]
    assert flops("aten::_scaled_dot_product_flash_attention_backward", grad) == 2.5 * fwd


def test_math_ops_and_formats() -> None:
    for name in ("aten::mm", "aten::cudnn_convolution", "aten::_flash_attention_forward"):
        assert is_math_op(name)
    for name in ("aten::relu", "aten::add_", "aten::empty", "aten::copy_"):
        assert not is_math_op(name)
    assert number_format(["c10::BFloat16", "float"]) == "bf16"
    assert number_format(["c10::Half"]) == "fp16"
    assert number_format(["float", "float"]) == "fp32"
    assert number_format(["c10::Float8_e4m3fn"]) == "fp8"
    assert number_format(["long", "Scalar"]) == ""


# -- MFU ----------------------------------------------------------------------------------------


def test_mfu_against_a_given_peak() -> None:
    env = Environment("GPU", 2, ("h",))
    e = efficiency(
        source="shapes",
        total=4e12,
        step_flops=[2e12, 2e12],
        step_time_ms=10.0,
        by_format={"bf16": 4e12},
        env=env,
    )
    assert e is not None
    assert e.achieved_tflops == pytest.approx(200.0)  # 2 TFLOP in 10 ms
    assert e.peak_format == "bf16" and e.mfu_percent is None  # no table row for this device
    from dataclasses import replace

    from tui_prof.model import ProfileSummary

    s = ProfileSummary("p", ("h",), "x", "", (), None, None, None, (), (), env, "", ())
    mfu = with_peak(replace(s, efficiency=e), 400.0).efficiency
    assert mfu is not None and mfu.mfu_percent == pytest.approx(25.0)  # 200 / (400 × 2)
    assert mfu.peak_source == "--peak-tflops"


# -- real traces ---------------------------------------------------------------------------------


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path) as f:
        doc = json.load(f)
    return list(doc["traceEvents"])


@needs_shared
def test_gemm_flops_equal_2mnk_from_the_recorded_shapes() -> None:
    expected = 0
    for ev in _events(A100):
        if ev.get("name") == "aten::mm" and ev.get("cat") == "cpu_op":
            (m, k), (_k, n) = ev["args"]["Input Dims"][:2]
            expected += 2 * m * k * n
    s = load_summary(discover(A100).sessions[0], use_cache=False)
    mm = [o for o in s.top_ops if o.name == "aten::mm"]
    assert mm and all(o.flops == expected for o in mm)
    e = s.efficiency
    assert e is not None and e.flops_source == "shapes" and e.formats == {"fp32": 100.0}
    assert e.flops_per_step == pytest.approx(sum(e.step_flops) / len(s.steps))
    assert e.flops_per_step is not None and s.average is not None
    assert e.achieved_tflops == pytest.approx(
        e.flops_per_step / (s.average.step_time_ms / 1e3) / 1e12
    )
    # the hardware table's A100 80GB SXM: fp32 on CUDA cores, 19.5 TFLOP/s (NVIDIA's datasheet)
    assert e.peak_tflops == 19.5 and e.peak_format == "fp32" and "A100" in e.peak_source
    assert e.achieved_tflops is not None
    assert e.mfu_percent == pytest.approx(100 * e.achieved_tflops / 19.5)


@needs_shared
def test_2021_trace_names_what_has_no_model_and_sums_its_memory_events() -> None:
    """The V100 plugin sample: forward convolutions recorded without stride/padding have no
    count and are named with their device time; memory is Bytes only (relative peaks)."""
    s = load_summary(discover(V100).sessions[0], use_cache=False)
    e = s.efficiency
    assert e is not None
    missing = {u.name: u.device_time_percent for u in e.unmodelled}
    assert "aten::cudnn_convolution" in missing and missing["aten::cudnn_convolution"] > 5
    # backward convolutions are counted once: their _input/_weight children are covered
    assert "aten::cudnn_convolution_backward_input" not in missing
    level, peak = 0, 0
    path = next(V100.glob("*.json.gz"))
    for ev in sorted(
        (x for x in _events(path) if x.get("name") == "[memory]"), key=lambda x: x["ts"]
    ):
        args = ev["args"]
        if args.get("Device Type") == 1:
            level += args["Bytes"]
            peak = max(peak, level)
    m = s.memory
    assert m is not None and m.relative and m.source == "kineto_memory_events"
    assert m.peak_allocated_mb == pytest.approx(peak / 2**20)
    assert len(m.step_peak_allocated_mb) == len(s.steps) and m.series_mb
    assert m.top_allocators and m.top_allocators[0].allocated_mb > 0
    assert decode(encode(s)).efficiency == s.efficiency
    assert decode(encode(s)).memory == s.memory


def _gemm_flops_from_the_converters_text(hlo: list[dict[str, object]]) -> float:
    """2·M·N·K × runs of each cuBLAS GEMM call, from the shapes the converter's own HLO
    expressions print (`custom-call(bf16[M,K]{..} %a, bf16[K,N]{..} %b)`), and the converter's
    count of the Triton GEMM fusion (the one it counts)."""
    import re

    total = 0.0
    for r in hlo:
        expr = str(r.get("hlo_op_expression") or "")
        if "__cublas$gemm" in expr:
            args = expr.split("custom-call(", 1)[1]
            (m, k), (_, n) = [tuple(map(int, d)) for d in re.findall(r"\[(\d+),(\d+)\]", args)[:2]]
            total += 2.0 * m * n * k * float(r["occurrences"])  # type: ignore[arg-type]
        elif r.get("model_flop_rate"):
            total += float(r["model_flop_rate"]) * float(r["total_self_time"]) * 1e3  # type: ignore[arg-type]
    return total


@needs_shared
def test_xla_cost_and_the_hlos_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX GEMMs on MI300X: a 256³ bf16 dot (a Triton fusion, which the converter counts: 3 ×
    2·256³) and five larger ones as hipBLASLt calls, 3 runs each, which it counts as 0 FLOPs.
    tuiprof counts those from the profile's own HLO: 2·M·N·K as the converter prints the shapes."""
    from tui_prof.profiles.xplane.converter import convert
    from tui_prof.profiles.xplane.tb_tables import rows

    paths = [h.path for h in discover(GEMM_XSPACE).sessions[0].hosts]
    hlo = rows(convert(paths, ("hlo_stats",))["hlo_stats"])
    fusion = next(r for r in hlo if r.get("model_flop_rate"))
    assert fusion["model_flop_rate"] * fusion["total_self_time"] * 1e3 == pytest.approx(
        3 * 2 * 256**3
    )
    assert all(
        not r.get("model_flop_rate") for r in hlo if "__cublas$gemm" in r["hlo_op_expression"]
    )
    expected = _gemm_flops_from_the_converters_text(hlo)
    assert expected == pytest.approx(2_686_602_706_944)
    s = load_summary(discover(GEMM_XSPACE).sessions[0], use_cache=False)
    dot = next(o for o in s.top_ops if o.flops)
    assert dot.name == "jit(dot)/dot_general" and dot.flops == pytest.approx(expected)
    e = s.efficiency
    assert e is not None and e.flops_source == "xla_hlo" and e.peak_format == "bf16"
    assert e.flops_total == pytest.approx(expected)
    assert e.devices == 1  # one of the eight GPUs did the work
    assert s.memory is not None and s.memory.source == "xla_memory_profile"
    # read without the converter (as profiles of 200 MB or more are): the same count and peak
    monkeypatch.setenv("TUIPROF_LARGE_MB", "0")
    raw = load_summary(discover(GEMM_XSPACE).sessions[0], use_cache=False).efficiency
    assert raw is not None and raw.flops_source == "xla_hlo"
    assert raw.flops_total == pytest.approx(expected) and raw.devices == 1
    assert raw.peak_tflops == e.peak_tflops and raw.peak_source == e.peak_source
    assert raw.mfu_percent == pytest.approx(e.mfu_percent)


# -- a trace torch records here (CPU) ----------------------------------------------------------


def test_torch_trace_flops_equal_torchs_flop_counter(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (an optional extra)")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    lin, proj = torch.nn.Linear(8 * 8 * 8, 64), torch.nn.Linear(16, 16)

    def step(x: Any, a: Any) -> None:  # torch tensors (torch has no type information here)
        h = lin(conv(x).relu().flatten(1))
        q = proj(a)
        att = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        (h.sum() + att.sum() + torch.bmm(a, a.transpose(1, 2)).sum()).backward()

    x, a = torch.randn(4, 3, 16, 16), torch.randn(2, 5, 16, requires_grad=True)
    trace = tmp_path / "t.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as p:
        for _ in range(2):
            step(x, a)
    p.export_chrome_trace(str(trace))
    with FlopCounterMode(display=False) as fc:
        step(x, a)
    s = load_summary(discover(trace).sessions[0], use_cache=False)
    e = s.efficiency
    assert e is not None and e.flops_source == "shapes"
    # two forward+backward passes; sdpa's math path is counted once, through its bmm children
    assert e.flops_total == 2 * fc.get_total_flops()
    totals = [
        x["args"]["Total Allocated"]
        for x in json.loads(trace.read_text())["traceEvents"]
        if x.get("name") == "[memory]"
    ]
    m = s.memory
    assert m is not None and not m.relative
    assert m.peak_allocated_mb == pytest.approx(max(totals) / 2**20)


def test_diff_compares_mfu_and_memory() -> None:
    """`tuiprof diff`'s efficiency block: each side's own figures, B − A."""
    from tui_prof.profiles.diff import diff_summaries

    a = load_summary(discover(SAMPLES / "torch_cuda_float32").sessions[0], use_cache=False)
    b = load_summary(discover(SAMPLES / "torch_cuda_autocast").sessions[0], use_cache=False)
    assert a.efficiency is not None and b.efficiency is not None
    changes = diff_summaries([a], [b]).to_dict()["efficiency"]
    mfu = changes["mfu_percent"]
    assert mfu["a"] == a.efficiency.mfu_percent and mfu["b"] == b.efficiency.mfu_percent
    assert mfu["delta"] == pytest.approx(mfu["b"] - mfu["a"])
    # the same model both times: the same FLOPs per step, fp32 against fp16 peaks
    assert changes["flops_per_step"]["delta"] == 0
    assert a.efficiency.peak_format == "fp32" and b.efficiency.peak_format == "fp16"
    assert "peak_allocated_mb" not in changes  # neither recorded memory


def test_mfu_and_peak_memory_are_metrics_of_runs_with_profiles(tmp_path: Path) -> None:
    """Two variants whose jobs leave a profile in their run directory (a copy of a sample trace:
    H100, fp32 and autocast); `tuiprof compare` compares their MFU like any metric."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import REPO

    for name in ("torch_cuda_float32", "torch_cuda_autocast"):
        shutil.copy(next((SAMPLES / name).rglob("*.pt.trace.json.gz")), tmp_path / f"{name}.gz")
    job = "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['TUIPROF_RUN_DIR'] + '/w.pt.trace.json.gz')"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TUIPROF_CACHE_DIR": str(tmp_path / "cache")}
    py = sys.executable
    run = subprocess.run(
        [py, "-m", "tui_prof.cli", "run", "--headless", "--no-profiler-port",
         "--variant", f"fp32={py} -c \"{job}\" torch_cuda_float32.gz",
         "--variant", f"amp={py} -c \"{job}\" torch_cuda_autocast.gz",
         "--repeats", "2", "--output", str(tmp_path / "e")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = subprocess.run(
        [py, "-m", "tui_prof.cli", "compare", str(tmp_path / "e"), "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert "mfu_percent" in doc["metrics"]
    fp32 = load_summary(discover(SAMPLES / "torch_cuda_float32").sessions[0], use_cache=False)
    assert fp32.efficiency is not None
    means = {v: x["mean"] for v, x in doc["metrics"]["mfu_percent"]["variants"].items()}
    assert means["fp32"] == pytest.approx(fp32.efficiency.mfu_percent)
    assert means["amp"] < means["fp32"]  # the same FLOPs against the fp16 Tensor Core peak


def test_an_older_sessions_saved_memory_profile(tmp_path: Path) -> None:
    """TensorBoard 2.x saved the memory profile tool's JSON beside the other tool files
    (`<host>.memory_profile.json.gz`): read with the session, never a session alone."""
    import shutil

    from tui_prof.profiles.xplane.converter import convert
    from tui_prof.profiles.xplane.memory import memory_use

    session = tmp_path / "plugins" / "profile" / "s"
    shutil.copytree(
        next((REPO / "tests" / "data" / "legacy_tf22").rglob("GPU-input-bound")), session
    )
    xplane = next((SAMPLES / "keras_fit_float32").rglob("*.xplane.pb"))
    doc = convert([xplane], ("memory_profile",))["memory_profile"]
    with gzip.open(session / "localhost.memory_profile.json.gz", "wt") as f:
        json.dump(doc, f)
    (tmp_path / "alone").mkdir()
    shutil.copy(session / "localhost.memory_profile.json.gz", tmp_path / "alone")
    found = discover(tmp_path)
    assert [s.format for s in found.sessions] == ["legacy"]  # the lone copy is no session
    s = load_summary(found.sessions[0], use_cache=False)
    assert s.memory is not None and s.memory == memory_use(doc)
    assert s.memory.peak_allocated_mb is not None and s.memory.source == "xla_memory_profile"


# -- a real H100 trace: float32 convolutions ran as TF32 --------------------------------------

WIDE = SAMPLES / "torch_cuda_wide_float32"


def _h100_trace() -> tuple[Path, list[dict[str, object]]]:
    (path,) = WIDE.glob("*.pt.trace.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return path, json.load(f)["traceEvents"]


def test_float32_that_ran_as_tf32_counts_against_the_tf32_peak() -> None:
    """cuDNN runs float32 convolutions as TF32 (kernel names `…_tf32f32_…`), cuBLAS ran this
    model's float32 matmuls on the CUDA cores (`…_ffma_…`): MFU against the fp32 peak (67
    TFLOP/s) read 61% here; the convolutions' share of the FLOPs ran against 494.5."""
    path, events = _h100_trace()
    kernels = {str(e["name"]) for e in events if e.get("cat") == "kernel"}
    assert any("tf32" in k for k in kernels) and any("_ffma_" in k for k in kernels)
    s = load_summary(path, use_cache=False)
    e = s.efficiency
    assert e is not None and e.mfu_percent is not None
    conv = sum(f for name, f in _per_op(s).items() if "conv" in name)
    assert conv / e.flops_total > 0.9  # the convolutions carry the math
    assert e.formats["tf32"] > 85.0 and e.formats.get("fp32", 0.0) > 0.0  # the mm/addmm
    assert e.peak_format == "tf32" and e.peak_tflops == 494.5
    assert e.mfu_percent < 15.0  # 8.2%: the achieved rate is the same, the peak is right
    fp16 = load_summary(next((SAMPLES / "torch_cuda_wide_autocast").glob("*.gz")), use_cache=False)
    assert fp16.efficiency is not None and fp16.efficiency.peak_format == "fp16"


def _per_op(s: object) -> dict[str, float]:
    ops = getattr(s, "top_ops", ())
    return {o.name: o.flops for o in ops if o.flops}


def test_h100_memory_equals_the_memory_events_own_maximum() -> None:
    path, events = _h100_trace()
    allocated = [
        float(a["Total Allocated"]) / 2**20  # MiB, as PyTorch's memory tools count
        for e in events
        if e.get("name") == "[memory]"
        and isinstance(a := e.get("args"), dict)
        and a.get("Device Type") == 1  # CUDA
    ]
    m = load_summary(path, use_cache=False).memory
    assert m is not None and m.peak_allocated_mb is not None
    assert m.peak_allocated_mb == pytest.approx(max(allocated), rel=1e-9)


@needs_shared
def test_an_mi250_gcd_from_rocm_device_properties() -> None:
    """HTA's MI250 trace names its devices "AMD Radeon Graphics" with ROCm's 9.0 and 104 compute
    units: gfx90a (an MI210, or one GCD of an MI250), so the peak is one GCD's, not the card's."""
    s = load_summary(SHARED_TRACES / "kineto" / "mi250_minitoy_train.json.gz", use_cache=False)
    assert s.environment.device_type == "AMD GPU - gfx90a"
    e = s.efficiency
    assert e is not None and e.peak_tflops is not None and e.mfu_percent is not None
    assert "one GCD of 2" in e.peak_source and "(by architecture)" in e.peak_source
    assert e.peak_tflops == pytest.approx(SPECS["mi250x"].matrix_tflops["fp32"] / 2)


def test_tiny_mfu_reads_as_a_percentage() -> None:
    from tui_prof.render.efficiency import percent

    assert [percent(v) for v in (38.2, 3.84, 0.042, 0.0013, 7.4e-05, 0.0)] == [
        "38%",
        "3.8%",
        "0.042%",
        "0.0013%",
        "<0.001%",
        "0%",
    ]
