"""Table-driven checks of the verdict and the advice, on every real profile we have and on every
row of the hardware table with every framework (the rules, for profiles we do not have).

The rules checked, independently of how advice.py words them:
- the verdict names the largest category of the average step (start-up left out), with its share;
  a category it names after that is never larger;
- no advice names a number format the device's row lacks (bf16/TF32 on a V100, any on a CPU);
- the remedies are the framework's (no `tf.function` for JAX, no `torch.` for TensorFlow …);
- the matrix units go by their vendor's word (Tensor Cores, Matrix Cores, MXU);
- no mixed precision where device compute is already >= 90% 16-bit.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SAMPLES, SHARED_TRACES

from tui_prof.model import (
    CATEGORIES,
    CATEGORY_LABELS,
    Environment,
    Precision,
    ProfileSummary,
    StepBreakdown,
    TensorCoreUse,
)
from tui_prof.profiles import advice, remedies
from tui_prof.profiles.assemble import average, device_row, facts
from tui_prof.profiles.discover import discover
from tui_prof.profiles.hardware_table import SPECS, DeviceSpec
from tui_prof.profiles.load import summarize_session
from tui_prof.render.summary import precision_text

FORMAT_WORDS: dict[str, str] = {
    "bf16": r"bfloat16|\bbf16\b|mixed_bfloat16",
    "tf32": r"\bTF32\b|allow_tf32|tensorfloat32|tensor_float_32",
    "fp8": r"\bfp8\b|float8|e4m3|e5m2",
    "fp4": r"\bfp4\b|nvfp4|mxfp4",
    "fp16": r"(?<!b)float16|\bfp16\b|GradScaler",
}
FOREIGN: dict[str, str] = {
    "jax": r"tf\.function|steps_per_execution|jit_compile|keras|torch\.|DataLoader",
    "pytorch": r"tf\.function|steps_per_execution|jit_compile|keras|tf\.data|jax\.",
    "tensorflow": r"torch\.|DataLoader|jax\.",
}
VENDOR_WORDS = {"NVIDIA": "Tensor Cores", "AMD": "Matrix Cores", "Google": "MXU"}
ALL_UNIT_WORDS = r"Tensor ?Cores?|Matrix Cores?|\bMXU\b"
MIXED = r"mixed precision|autocast|mixed_float16|mixed_bfloat16|bfloat16 parameters"


def _sessions() -> list[Path]:
    roots = [SAMPLES] + ([SHARED_TRACES] if SHARED_TRACES.is_dir() else [])
    return [s.path for root in roots for s in discover(root).sessions]


@pytest.fixture(scope="module")
def summaries() -> dict[Path, ProfileSummary]:
    return {p: summarize_session(p) for p in _sessions()}


def _label(path: Path) -> str:
    return "/".join(path.parts[-3:])


def _check_formats(tips: str, spec: DeviceSpec | None, where: str) -> None:
    if spec is None:
        return  # a device the table does not know: advice may only be conditional
    for fmt, words in FORMAT_WORDS.items():
        if re.search(words, tips, re.IGNORECASE):
            assert spec.supports(fmt), f"{where}: advice names {fmt}, {spec.name} has none"


def _check_framework(tips: str, framework: str, where: str) -> None:
    foreign = FOREIGN.get(framework)
    if foreign:
        m = re.search(foreign, tips)
        assert m is None, f"{where}: {framework} advice names {m.group(0) if m else ''}"


def _check_vendor_word(text: str, vendor: str, where: str) -> None:
    for word in re.findall(ALL_UNIT_WORDS, text):
        assert vendor in VENDOR_WORDS, f"{where}: '{word}' for a device of unknown vendor"
        assert word.rstrip("s").replace("TensorCore", "Tensor Core") == VENDOR_WORDS[vendor].rstrip(
            "s"
        ), f"{where}: '{word}' on {vendor} hardware"


def _check_verdict(s: ProfileSummary, where: str) -> None:
    avg = s.average
    if avg is None:
        assert s.verdict is None
        return
    assert s.verdict is not None, where
    startup = s.verdict.startup_ms
    shares = dict(avg.breakdown_ms)
    shares["kernel_launch"] = shares.get("kernel_launch", 0.0) - startup
    step = avg.step_time_ms - startup
    largest = max(CATEGORIES, key=lambda c: shares.get(c, 0.0))
    assert shares[s.verdict.dominant.category] == pytest.approx(shares[largest]), where
    assert f"{100.0 * shares[largest] / step:.1f}%" in s.bottleneck, where
    # The sentence names the dominant category before any other, and no later one is larger.
    named = [
        (m.start(), c)
        for c in CATEGORIES
        for m in re.finditer(re.escape(CATEGORY_LABELS[c].lower()), s.bottleneck.lower())
    ]
    later = [c for _, c in sorted(named) if c != s.verdict.dominant.category]
    for c in later:
        assert shares.get(c, 0.0) <= shares[largest] + 1e-9, f"{where}: {c} named, larger"


def test_there_are_profiles_to_check(summaries: dict[Path, ProfileSummary]) -> None:
    assert len(summaries) >= 20


def test_every_profile_verdict_and_advice(summaries: dict[Path, ProfileSummary]) -> None:
    for path, s in summaries.items():
        where = _label(path)
        _check_verdict(s, where)
        tips = "\n".join(s.recommendations)
        f = facts(s.environment, s.precision, s.framework)
        _check_formats(tips, device_row(s.environment), where)
        _check_framework(tips, s.framework, where)
        _check_vendor_word(tips + "\n" + str(precision_text(s)), f.vendor, where)
        if s.precision is not None and s.precision.compute_16bit_percent >= 90.0:
            assert not re.search(MIXED, tips, re.IGNORECASE), where
        if s.environment.device_type == "CPU":
            assert not re.search(ALL_UNIT_WORDS, tips), where


# A claim that a tip's category is the step: true of the verdict's category alone.
WHOLE_STEP = re.compile(r"dominat|\b(?:take|takes|spends?) the step\b", re.IGNORECASE)


def test_no_tip_claims_its_category_is_the_step() -> None:
    """Any remedy can come as a second tip under another category's verdict: "CPU job: compute
    dominates" read under "Input-bound … 76.6%", "Collectives: communication dominates" under a
    host-bound verdict with collectives at 15%, "the CPU spends the step launching" where launch
    was 7%. So no remedy's claim (its head, before the dash) says its category is the step. Read
    from the tables: no profile here gets every tip, and none got one that said so."""
    claims = [
        (framework, category, text.split(" — ")[0])
        for framework, table in remedies.BY_FRAMEWORK.items()
        for category, text in table.items()
    ]
    assert len(claims) >= 3 * 8 and all(" — " in t for t in remedies.PYTORCH.values())
    for framework, category, claim in claims:
        assert not WHOLE_STEP.search(claim), f"{framework} {category}: {claim}"


def test_the_frameworks_are_known(summaries: dict[Path, ProfileSummary]) -> None:
    for path, s in summaries.items():
        assert s.framework in ("tensorflow", "pytorch", "jax"), _label(path)


# --- the rules on profiles we do not have: every row, every framework, every dominant category --


def _steps(dominant: str) -> list[StepBreakdown]:
    """Two steps where `dominant` takes 60% and every other category a share under it."""
    rest = [c for c in CATEGORIES if c != dominant]
    out = []
    for i in range(2):
        b = {c: 40.0 / len(rest) + i for c in rest}
        b[dominant] = 60.0
        out.append(StepBreakdown(i, sum(b.values()), b))
    return out


DEVICE_TYPES = {"GPU": "GPU", "TPU": "TPU", "CPU": "CPU"}


@pytest.mark.parametrize("key", sorted(SPECS))
@pytest.mark.parametrize("framework", ["tensorflow", "pytorch", "jax"])
@pytest.mark.parametrize("p16", [0.0, 50.0, 99.0])
def test_rules_hold_for_every_row_and_framework(key: str, framework: str, p16: float) -> None:
    spec = SPECS[key]
    env = Environment(
        device_type=DEVICE_TYPES[spec.kind],
        device_count=0 if spec.kind == "CPU" else 1,
        hosts=("h",),
        device_names=() if spec.kind == "CPU" else (spec.name,),
    )
    assert device_row(env) == spec
    prec = None if spec.kind == "CPU" else Precision(p16, 100.0 - p16)
    f = facts(env, prec, framework)
    tc = None if spec.kind == "CPU" else TensorCoreUse(10.0, 20.0)
    for dominant in CATEGORIES:
        _, v, flagged = advice.verdict(average(_steps(dominant)), f)
        assert v is not None and v.dominant.category == dominant
        assert flagged[0] == dominant
        tips = "\n".join(advice.recommendations(flagged, f, tc))
        where = f"{spec.name}/{framework}/{p16}/{dominant}"
        _check_formats(tips, spec, where)
        _check_framework(tips, framework, where)
        _check_vendor_word(tips, spec.vendor, where)
        if p16 >= 90.0:
            assert not re.search(MIXED, tips, re.IGNORECASE), where
        how16 = remedies.sixteen_bit(f)
        assert not how16 or tips.count(how16) <= 1, where  # the recipe is said at most once


def test_startup_is_left_out_of_the_verdict() -> None:
    env = Environment("GPU", 1, ("h",), ("NVIDIA A100-SXM4-40GB",))
    b = {"device_compute": 10.0, "kernel_launch": 1000.0, "host_compute": 20.0}
    avg = average([StepBreakdown(1, 1030.0, b)])
    sentence, v, _ = advice.verdict(avg, facts(env, None, "pytorch"), startup_ms=995.0)
    assert v is not None and v.dominant.category == "host_compute"
    assert v.startup_ms == pytest.approx(995.0)
    assert "Start-up" in sentence and "launch-bound" not in sentence.lower()


def test_a100_startup_is_startup_not_launch_bound(summaries: dict[Path, ProfileSummary]) -> None:
    """HTA's A100 benchmark trace: a 30 s cudaDeviceGetStreamPriorityRange and a 6.5 s cudaFree
    among 79 launches; was "Kernel launch is 97.4% of step time"."""
    path = SHARED_TRACES / "kineto" / "benchmark_result_2869224_1695835535_trace.json.gz"
    if path not in summaries:
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    s = summaries[path]
    assert s.verdict is not None and s.verdict.kind != "launch-bound"
    assert s.verdict.startup_ms > 40_000
    names = [n for n, _ in s.startup_calls]
    assert names[:2] == ["cudaDeviceGetStreamPriorityRange", "cudaFree"]
    assert "Start-up took" in s.bottleneck and "cudaDeviceGetStreamPriorityRange" in s.bottleneck
    assert not any("CUDA graphs" in r or "CUDAGraph" in r for r in s.recommendations)


def test_v100_verdict_and_advice(summaries: dict[Path, ProfileSummary]) -> None:
    """The plugin's V100 ResNet-50 sample: compute-bound first, input second; float16 autocast
    with a GradScaler, no bfloat16 or TF32."""
    path = SHARED_TRACES / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"
    if path not in summaries:
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    s = summaries[path]
    assert s.bottleneck.startswith("Compute-bound on the GPU: device compute is 55.5%")
    assert s.verdict is not None and [f.category for f in s.verdict.secondary] == ["input"]
    tips = "\n".join(s.recommendations)
    assert "dtype=torch.float16" in tips and "GradScaler" in tips
    assert "bfloat16" not in tips and "tf32" not in tips.lower()


def test_jax_on_mi300x_gets_jax_words(summaries: dict[Path, ProfileSummary]) -> None:
    path = SHARED_TRACES / "jax_gpu_gemm" / "plugins" / "profile" / "2025_gemm"
    if path not in summaries:
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    s = summaries[path]
    tips = "\n".join(s.recommendations)
    assert s.framework == "jax" and "jax.jit" in tips
    assert "Tensor" not in tips and "mixed precision" not in tips.lower()
    assert "Matrix Cores:" in str(precision_text(s))


def test_a_gpu_the_table_does_not_name_gets_its_architectures_row() -> None:
    a10g = Environment("GPU", 1, ("h",), ("NVIDIA A10G",), compute_capability="8.6")
    spec = device_row(a10g)
    assert spec is not None and spec.arch == "sm_86" and not spec.exact
    # ROCm's own major.minor is never read as CUDA's (gfx90a reports 9.0, not an H100)
    amd = Environment("GPU", 1, ("h",), ("AMD Radeon Graphics",), compute_capability="9.0")
    assert device_row(amd) is None and facts(amd, None, "pytorch").vendor == "AMD"


def test_pytorch_traces_record_cuda_compute_capability(
    summaries: dict[Path, ProfileSummary],
) -> None:
    expected = {
        "worker0.1623143089861.pt.trace.json.gz": "7.0",  # V100
        "a100_rank0.json.gz": "8.0",
        "mi250_minitoy_train.json.gz": "",  # ROCm: deviceProperties' 9.0 is not CUDA's
    }
    found = {p.name: s for p, s in summaries.items() if p.name in expected}
    if len(found) < len(expected):
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    for name, cc in expected.items():
        env = found[name].environment
        assert env.compute_capability == cc, name
        assert ("compute_capability" in env.to_dict()) == bool(cc)


def test_no_mixed_precision_from_kernel_names_that_say_no_type(
    summaries: dict[Path, ProfileSummary],
) -> None:
    """A bf16 JAX job on an H100: XLA's fusion kernels carry no type in their names, so xprof's
    name rule reads 0% 16-bit; that is no measurement to advise mixed precision on."""
    s = next(v for p, v in summaries.items() if "jax_cuda_bf16" in str(p))
    assert s.precision is not None and s.precision.compute_16bit_percent == 0.0
    assert not s.precision.measured  # TensorBoard's figure, kept, but not a measurement
    assert not any(re.search(MIXED, r, re.IGNORECASE) for r in s.recommendations)
    from tui_prof.render.summary import precision_text

    shown = precision_text(s).plain
    assert "16-bit share: unknown" in shown and "Tensor Cores: unknown" in shown
    assert "32-bit" not in shown.split("(")[0]  # no "100.0% 32-bit" claim


def test_a_16bit_share_from_kernel_names_that_say_their_types_stays_measured(
    summaries: dict[Path, ProfileSummary],
) -> None:
    """The TensorFlow demo's kernels carry shapes and typed names: its 30.5% is a measurement."""
    s = next((v for p, v in summaries.items() if "tf_gpu_multi_worker" in str(p)), None)
    if s is None:
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    assert s.precision is not None and s.precision.measured
    assert s.precision.compute_16bit_percent == pytest.approx(30.5, abs=0.05)


def test_devices_busy_however_little_are_never_idle() -> None:
    """A report once read "8 idle" beside non-zero device compute. A device with any event is busy
    ("<0.1%" where tiny); devices without a single event are listed apart."""
    from tui_prof.device_use import DeviceBusy, DeviceUtilization
    from tui_prof.render.summary import utilization_text

    gpus = [DeviceBusy(f"/device:GPU:{i}", 0.01) for i in range(7)]
    u = DeviceUtilization(100.0, 0.01, (*gpus, DeviceBusy("/device:GPU:7", 0.0)))
    text = utilization_text(u).plain
    assert "idle" not in text
    assert "GPU:0 <0.1%" in text and "no events on 1 (GPU:7)" in text


def test_xla_gpu_planes_give_the_compute_capability(
    summaries: dict[Path, ProfileSummary],
) -> None:
    """The 2020 TensorFlow demo names no GPU model, but its GPU planes say compute capability
    7.0 (a V100): float16 advice, never bfloat16. AMD planes' 9.4 (gfx942) is ROCm's, left out."""
    by_dir = {p.parts[-4] if len(p.parts) > 3 else "": s for p, s in summaries.items()}
    if "tf_gpu_multi_worker" not in by_dir:
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    tf = by_dir["tf_gpu_multi_worker"]
    assert tf.environment.compute_capability == "7.0"
    row = device_row(tf.environment)
    assert row is not None and row.arch == "sm_70"
    tips = "\n".join(tf.recommendations)
    assert "mixed_float16" in tips and "bfloat16" not in tips
    assert by_dir["jax_gpu_gemm"].environment.compute_capability == ""


@pytest.mark.parametrize("compute_percent", [1.2, 35.0])
def test_device_compute_tips_follow_the_bottleneck_where_compute_is_small(
    compute_percent: float,
) -> None:
    """Mixed precision cannot save more than the device compute: on a launch-bound step with
    1.2% device compute it comes after the launch remedy and says its bound; at 35% it leads."""
    env = Environment("GPU", 1, ("h",), ("NVIDIA A100-SXM4-40GB",))
    b = {
        "device_compute": compute_percent,
        "kernel_launch": 100.0 - compute_percent - 10.0,
        "host_compute": 10.0,
    }
    avg = average([StepBreakdown(1, 100.0, b)])
    f = facts(env, Precision(0.0, 100.0), "pytorch")
    _, v, flagged = advice.verdict(avg, f)
    assert v is not None and avg is not None
    share = advice.shares(avg)[2]["device_compute"]
    assert share == pytest.approx(compute_percent)
    tips = advice.recommendations(flagged, f, TensorCoreUse(10.0, 20.0), share)
    mixed = [i for i, t in enumerate(tips) if "mixed precision" in t]
    launch = [i for i, t in enumerate(tips) if t.startswith("Kernel launch")]
    assert len(mixed) == 1 and len(launch) == 1
    if compute_percent < advice.DEVICE_COMPUTE_PERCENT:
        assert mixed[0] > launch[0]
        assert f"only {compute_percent:.1f}% of this step" in tips[mixed[0]]
    else:
        assert mixed[0] == 0 and "of this step" not in tips[0]


@pytest.mark.parametrize("flagged", ["device_compute", "other"])
@pytest.mark.parametrize("p16", [0.0, 40.0])
def test_matrix_units_that_run_no_32bit_format_are_reached_by_16bit_not_shapes(
    p16: float, flagged: str
) -> None:
    """A V100's Tensor Cores run fp16 only: float32 matmuls stay off them whatever their
    shapes, so the matrix-unit tip says to go 16-bit instead of offering shapes alone;
    an A100 (TF32) keeps its TF32 tip. After a device-compute tip, which gives the same 16-bit,
    TF32 and shapes, the units' tip points at it instead of saying them twice."""
    tc = TensorCoreUse(0.0, 0.0)
    after_compute = flagged == "device_compute"
    for name, fix in (("Tesla V100-SXM2-16GB", "float16"), ("NVIDIA A100-SXM4-40GB", "TF32")):
        env = Environment("GPU", 1, ("h",), (name,))
        f = facts(env, Precision(p16, 100.0 - p16), "pytorch")
        tips = advice.recommendations([flagged], f, tc, 60.0)
        units = next(t for t in tips if t.startswith("Tensor Cores:"))
        text = "\n".join(tips)
        assert text.count("multiples of 8") == 1, tips
        if fix == "TF32":
            assert "no 32-bit" not in units and text.count("allow_tf32") == 1, tips
            assert ("device-compute tip above" in units) == after_compute, units
            assert ("TF32" in units) != after_compute, units
            continue
        assert "no 32-bit format" in units, units
        if p16 == 40.0 and not after_compute:  # no tip above gives the recipe: this one does
            assert "GradScaler" in units, units
            continue
        # the mixed-precision tip (p16 = 0) or the device-compute one says how; this one points
        # at it rather than saying it twice
        assert "mixed precision above" in units and "GradScaler" not in units
        assert tips.index(units) > next(i for i, t in enumerate(tips) if "GradScaler" in t)
        assert sum("GradScaler" in t for t in tips) == 1, tips


def test_the_others_tip_points_at_tuiprofs_timeline_where_the_profile_holds_events(
    summaries: dict[Path, ProfileSummary],
) -> None:
    """It sent users to "a trace viewer (Perfetto)" while tuiprof's own Timeline shows the same
    host threads; the older tool files hold no events, so there it still names a trace viewer."""
    pointing = [
        tip
        for s in summaries.values()
        for tip in s.recommendations
        if tip.startswith("All others") and "host threads" in tip
    ]
    assert pointing  # the PyTorch GPU samples flag all others
    for tip in pointing:
        assert "`tuiprof timeline`" in tip and "trace viewer" not in tip, tip
    for framework in ("tensorflow", "pytorch"):
        f = remedies.Facts(framework, "GPU", None, "NVIDIA")
        assert not f.has_events
        no_events, events = (
            remedies.remedy("other", f),
            remedies.remedy("other", replace(f, has_events=True)),
        )
        assert "a trace viewer (TensorBoard's or Perfetto)" in no_events and "{" not in no_events
        assert "the Timeline tab (`5`) or `tuiprof timeline`" in events


@pytest.mark.parametrize("framework", ["tensorflow", "pytorch", "jax"])
def test_a_partly_16bit_profile_hears_what_its_32bit_rest_often_is_once(framework: str) -> None:
    """An autocast run (52% 16-bit) was told to use autocast and nothing more; with the recipe
    it now hears that the 32-bit rest is often meant to stay 32-bit, once, and a float32 run
    (0%) or a bf16 one (95%) does not."""
    env = Environment("GPU", 1, ("h",), ("NVIDIA H100 80GB HBM3",))
    tc = TensorCoreUse(12.0, 34.0)
    for p16, told in ((52.0, True), (0.0, False), (95.0, False)):
        f = facts(env, Precision(p16, 100.0 - p16), framework)
        for flagged in (["device_compute"], ["other"]):
            tips = advice.recommendations(flagged, f, tc, 60.0)
            said = sum("the 32-bit rest is often what should stay 32-bit" in t for t in tips)
            assert said == (1 if told else 0), (p16, flagged, tips)
            if told:
                assert f"{p16:.0f}% of device compute is 16-bit already" in "\n".join(tips)
