"""Steps from repeated XLA program runs, the no-step view, and TPU planes (no JAX needed here).

Evidence: the JAX sample traces (made by examples/train_jax.py), profiles built at test time with
exactly known events (a JAX-like GPU job, an SPMD job, a TPU job), and the public JAX GPU profile
in ../shared (a bf16 GEMM on AMD MI300X) where present.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, needs_shared, sample_session
from rich.console import Console
from xla_profiles import Space, gpu_job, tpu_job

from tui_prof.model import STEP_SOURCE_OFFICIAL, STEP_SOURCE_PROGRAM_RUNS
from tui_prof.profiles.load import summarize_session
from tui_prof.profiles.xplane.op_precision import KERNEL_16BIT, op_is_16bit
from tui_prof.profiles.xplane.program_runs import find_programs, matches, program_name
from tui_prof.profiles.xplane.xspace import XSpaceFile, read_plane
from tui_prof.render.summary import summary_renderable

GEMM = SHARED_TRACES / "jax_gpu_gemm"
needs_gemm = pytest.mark.skipif(not GEMM.is_dir(), reason=f"{GEMM} not present")


def _text(summary: object) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(summary_renderable(summary))  # type: ignore[arg-type]
    return console.export_text()


def _adds_up(summary: object) -> None:
    for s in summary.steps:  # type: ignore[attr-defined]
        assert sum(s.breakdown_ms.values()) == pytest.approx(s.step_time_ms, rel=1e-9, abs=1e-9)


# --- names -----------------------------------------------------------------------------------


def test_program_names_and_matching() -> None:
    assert program_name("PjitFunction(train_step)") == "jit_train_step"
    assert program_name("PmapFunction(f)") == "pmap_f"
    assert program_name("jit_dot:XLA GPU module") == "jit_dot"
    for wanted in ("jit_train_step", "train_step", "PjitFunction(train_step)"):
        assert matches(wanted, "jit_train_step")
    assert not matches("train", "jit_train_step")


def test_sixteen_bit_judgements() -> None:
    gemm = (
        "%custom-call.1 = (bf16[8192,8192]{1,0}, s8[79691776]{0}) custom-call(bf16[8192,4096]{1,0}"
        ' %a.1, bf16[4096,8192]{1,0} %b.1), custom_call_target="__cublas$gemm"'
    )
    assert op_is_16bit(gemm) is True
    assert op_is_16bit("%dot.3 = f32[8,8]{1,0} dot(bf16[8,4]{1,0} %a, bf16[4,8]{1,0} %b)") is True
    assert (
        op_is_16bit("%add = f32[5,1024]{1,0:T(8,128)} add(f32[5,1024] %x, f32[5,1024] %y)") is False
    )
    assert op_is_16bit("%convert = bf16[4]{0} convert(f32[4]{0} %x)") is True
    assert op_is_16bit("%iota = s32[4]{0} iota()") is None
    for name in ("Cijk_Ailk_Bljk_BBS_BH_MT256x224x64", "sm80_xmma_gemm_bf16bf16", "volta_h884gemm"):
        assert KERNEL_16BIT.search(name), name
    for name in ("Cijk_Ailk_Bljk_S_MT64", "sgemm_128x64_nn", "wrapped_broadcast.kd"):
        assert not KERNEL_16BIT.search(name), name


# --- the JAX sample traces (examples/train_jax.py) --------------------------------------------


def test_jax_sample_without_markers_steps_are_program_runs() -> None:
    s = summarize_session(sample_session("jax_program_runs"))
    assert s.step_source == STEP_SOURCE_PROGRAM_RUNS
    assert "'jit_train_step'" in s.step_source_detail
    assert len(s.steps) == 8  # 10 traced runs, less the first and last as the converter drops them
    _adds_up(s)
    assert all(st.breakdown_ms["host_compute"] > 0 for st in s.steps)
    assert [(p.name, p.runs) for p in s.programs] == [("jit_train_step", 10)]
    assert s.environment.device_type == "CPU" and s.precision is None
    assert s.device_utilization is None  # no devices on a CPU job


def test_jax_sample_with_markers_keeps_the_converters_steps() -> None:
    session = sample_session("jax_step_markers")
    official = summarize_session(session)
    assert official.step_source == STEP_SOURCE_OFFICIAL and len(official.steps) == 8
    runs = summarize_session(session, step_program="train_step")
    assert runs.step_source == STEP_SOURCE_PROGRAM_RUNS and len(runs.steps) == 8
    assert "named with --step-program" in runs.step_source_detail
    # A run's step lasts until the next run starts, a marked step until its marker ends (the loop
    # blocks on the result inside it): the same steps, each about as long, the runs' a little
    # longer by the Python between markers.
    for run, step in zip(runs.steps, official.steps, strict=True):
        assert 0.7 * step.step_time_ms <= run.step_time_ms <= 1.5 * step.step_time_ms


# --- a JAX-like GPU job, built event by event -------------------------------------------------


def test_gpu_job_steps_are_runs_of_the_program_with_the_most_device_time(tmp_path: Path) -> None:
    s = summarize_session(gpu_job(tmp_path))
    assert s.step_source == STEP_SOURCE_PROGRAM_RUNS
    assert "'jit_train_step'" in s.step_source_detail
    assert [st.step for st in s.steps] == [1, 2, 3, 4]  # six runs, first and last dropped
    # A step runs from its first kernel (+40) to the next run's (+140): 100 µs, of which the
    # kernels at +40..60 and +65..75 compute 30; the metrics program's kernel and the idle rest
    # are "all others".
    for st in s.steps:
        assert st.step_time_ms == pytest.approx(0.1)
        assert st.breakdown_ms["device_compute"] == pytest.approx(0.03)
        assert st.breakdown_ms["other"] == pytest.approx(0.07)
    _adds_up(s)
    programs = {p.name: (p.runs, round(p.time_ms, 6)) for p in s.programs}
    assert programs == {
        "jit_train_step": (6, 0.18),
        "jit_metrics": (6, 0.012),
        "jit_init": (1, 0.25),
    }
    # 16-bit: the bf16 GEMM's 20 µs of each step's 30 µs of compute (no HLO ops in this profile).
    assert s.precision is not None and s.precision.source == "steps"
    assert s.precision.compute_16bit_percent == pytest.approx(100 * 20 / 30)
    # Runs start every 100 µs but take 35: the host sets the pace.
    assert any("idle 65%" in w for w in s.warnings), s.warnings
    u = s.device_utilization
    assert u is not None and u.profile_ms == pytest.approx(1.0)
    assert [(d.name, round(d.busy_percent, 6)) for d in u.devices] == [
        ("/device:GPU:0", 44.2),
        ("/device:GPU:1", 0.0),
    ]
    assert u.busy_percent == pytest.approx(22.1)
    assert s.environment.device_names == ("/device:GPU:0", "/device:GPU:1")


def test_gpu_job_named_program(tmp_path: Path) -> None:
    logdir = gpu_job(tmp_path)
    s = summarize_session(logdir, step_program="metrics")
    assert s.step_source == STEP_SOURCE_PROGRAM_RUNS and len(s.steps) == 4
    assert all(st.step_time_ms == pytest.approx(0.1) for st in s.steps)  # start to start
    assert all(st.breakdown_ms["device_compute"] == pytest.approx(0.002) for st in s.steps)
    s = summarize_session(logdir, step_program="PjitFunction(init)")
    assert len(s.steps) == 1 and s.steps[0].step_time_ms == pytest.approx(0.25)
    s = summarize_session(logdir, step_program="nope")
    assert not s.steps and s.average is None
    assert "no XLA program 'nope'" in s.step_source_detail
    assert "jit_train_step ×6" in s.step_source_detail
    assert {p.name for p in s.programs} == {"jit_train_step", "jit_metrics", "jit_init"}
    assert s.recommendations[0].startswith("No steps: mark each")
    assert "jax.profiler.StepTraceAnnotation" in s.recommendations[0]
    text = _text(s)
    assert "Average step-time breakdown" not in text  # no empty table
    assert "No step-time breakdown" in text and "XLA programs run" in text
    assert (
        "Devices busy 22.1% of the 1.00 ms profile (mean of 2): GPU:0 44.2%; no events on 1 (GPU:1)"
        in text
    )
    assert "StepTraceAnnotation" in text


def test_cli_step_program_and_json_fields(tmp_path: Path) -> None:
    logdir = gpu_job(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    (doc,) = json.loads(r.stdout)["sessions"]
    assert doc["step_source"] == "xla_program_runs" and len(doc["steps"]) == 4
    assert {"name": "jit_train_step", "runs": 6, "time_ms": 0.18} in doc["xla_programs"]
    assert doc["device_utilization"]["devices"][0]["busy_percent"] == pytest.approx(44.2)
    assert doc["precision"]["source"] == "steps"
    r = subprocess.run(
        [
            *(sys.executable, "-m", "tui_prof.cli", "summary", str(logdir)),
            *("--step-program", "metrics", "--markdown"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "'jit_metrics'" in r.stdout and "| `jit_train_step` | 6 | 0.180 |" in r.stdout
    assert "Device utilisation: 22.1%" in r.stdout


def test_executions_on_several_device_threads_are_one_run(tmp_path: Path) -> None:
    """An SPMD call runs the program once per device, on as many host threads at once."""
    space = Space()
    host = space.plane(0, "/host:CPU")
    for thread in (1, 2):
        host.line(
            thread,
            f"pjrt/{thread}",
            [("jit_f:XLA GPU module", 100.0 * k + thread, 10, {}) for k in range(5)],
        )
    with XSpaceFile(space.save(tmp_path) / "testhost.xplane.pb") as f:
        plane = read_plane(f, f.planes[0])
    (prog,) = find_programs(plane, cpu_only=False)
    assert prog.name == "jit_f" and prog.runs == 5
    assert [(w.begin_ps, w.end_ps) for w in prog.windows][:2] == [
        (1_000_000, 12_000_000),
        (101_000_000, 112_000_000),
    ]


# --- TPU planes --------------------------------------------------------------------------------


def test_tpu_planes_are_listed_and_shown_without_steps(tmp_path: Path) -> None:
    s = summarize_session(tpu_job(tmp_path))
    assert s.environment.device_names == ("/device:TPU:0", "/device:TPU:1")
    assert s.environment.device_count == 2
    assert not s.steps and s.step_source == "none"
    assert "no launch ids" in s.step_source_detail
    u = s.device_utilization
    # the converter's duty cycle: the XLA Ops line only (50 µs of each run; waits aside), over
    # the span of the programs (10 to 710 µs), not the whole 1,000 µs profile
    assert u is not None and u.rule == "duty_cycle"
    assert [round(d.busy_percent, 6) for d in u.devices] == [28.571429, 28.571429]
    assert [(p.name, p.runs, round(p.time_ms, 6)) for p in s.programs] == [("jit_f", 4, 0.8)]
    text = _text(s)
    assert "No step-time breakdown" in text and "TPU duty cycle 28.6% (2 cores)" in text
    assert "TPU:0 28.6%, TPU:1 28.6%" in text
    assert "--step-program" not in " ".join(s.recommendations)  # TPU runs cannot be split here


# --- the public JAX GPU profile -----------------------------------------------------------------


@needs_shared
@needs_gemm
def test_shared_jax_gpu_gemm() -> None:
    (session,) = [p.parent for p in GEMM.rglob("*.xplane.pb")]
    s = summarize_session(session)
    assert s.step_source == STEP_SOURCE_PROGRAM_RUNS
    assert "18 runs of the XLA program 'jit_dot'" in s.step_source_detail
    assert len(s.steps) == 16  # 6 GEMM shapes × 3 runs, first and last dropped
    _adds_up(s)
    # Steps run from one GEMM to the next: the GEMMs compute, the gaps between are idle.
    assert all(0 < st.breakdown_ms["device_compute"] <= st.step_time_ms for st in s.steps)
    assert any("runs start every" in w for w in s.warnings)
    assert [(p.name, p.runs) for p in s.programs] == [
        ("jit_dot", 18),
        ("jit_broadcast_in_dim", 12),
        ("jit_convert_element_type", 12),
    ]
    # Every GEMM is bf16: the HLO ops say so (the kernels carry no shapes).
    assert s.precision is not None and s.precision.source == "hlo_ops"
    assert s.precision.compute_16bit_percent == pytest.approx(100.0)
    u = s.device_utilization
    assert u is not None and len(u.devices) == 8
    assert u.devices[0].busy_percent > 20 and all(d.busy_percent == 0 for d in u.devices[1:])
    assert s.environment.device_type.startswith("AMD GPU") and s.environment.device_count == 8
    named = summarize_session(session, step_program="jit_broadcast_in_dim")
    assert len(named.steps) == 10
