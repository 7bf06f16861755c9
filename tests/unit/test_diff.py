"""The diff of two profiles on real sessions: every op accounted for, signs, order and totals."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GPU_LOGDIR, REPO, SAMPLES, needs_shared, run_cli
from rich.console import Console

from tui_prof.experiments.diff_targets import diff_targets, path_target, variant_target
from tui_prof.model import ProfileSummary
from tui_prof.profiles.diff import IN_BOTH, ONLY_IN_A, ONLY_IN_B, PER_STEP, diff_summaries
from tui_prof.profiles.load import summarize_session
from tui_prof.render.diff import diff_renderable, short_names, strip_signature

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
EXPERIMENT = SAMPLES / "experiment_mixed_precision"
Pair = tuple[ProfileSummary, ProfileSummary]


@pytest.fixture(scope="module")
def tf_pair() -> Pair:
    """Keras fit float32 and mixed_bfloat16: the same model, with and without casts."""
    return (
        summarize_session(SAMPLES / "keras_fit_float32"),
        summarize_session(SAMPLES / "keras_fit_mixed"),
    )


def _per_step(s: ProfileSummary) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for o in s.top_ops:
        key = (o.where, o.name)
        out[key] = out.get(key, 0.0) + o.total_self_time_us / 1000 / len(s.steps)
    return out


def test_every_op_of_both_sides_is_in_the_diff_with_its_time_per_step(tf_pair: Pair) -> None:
    a, b = tf_pair
    d = diff_summaries(a, b)
    ta, tb = _per_step(a), _per_step(b)
    assert d.per == PER_STEP
    assert {(r.where, r.name) for r in d.ops} == ta.keys() | tb.keys()
    for r in d.ops:
        assert math.isclose(r.a_ms, ta.get((r.where, r.name), 0.0), abs_tol=1e-12)
        assert math.isclose(r.b_ms, tb.get((r.where, r.name), 0.0), abs_tol=1e-12)
        assert r.delta_ms == r.b_ms - r.a_ms
    # More than the 50 a summary used to keep: the diff needs every op.
    assert len(a.top_ops) > 50 and len(d.ops) >= len(a.top_ops)


def test_mixed_precision_adds_casts_and_rows_are_sorted_by_effect(tf_pair: Pair) -> None:
    a, b = tf_pair
    d = diff_summaries(a, b)
    names_a = {o.name for o in a.top_ops}
    names_b = {o.name for o in b.top_ops}
    assert d.only_in_b == [r.name for r in d.ops if r.status == ONLY_IN_B]
    assert set(d.only_in_b) == names_b - names_a and set(d.only_in_a) == names_a - names_b
    # mixed_bfloat16 casts float32 variables to bfloat16: Cast ops only B has.
    casts = [n for n in d.only_in_b if n.endswith("/Cast")]
    assert casts, d.only_in_b
    for r in d.ops:
        if r.status == ONLY_IN_B:
            assert r.a_ms == 0 and r.delta_ms == r.b_ms >= 0
        elif r.status == ONLY_IN_A:
            assert r.b_ms == 0 and r.delta_ms == -r.a_ms <= 0
        else:
            assert r.status == IN_BOTH
    effects = [abs(r.delta_ms) for r in d.ops]
    assert effects == sorted(effects, reverse=True)
    assert any(r.delta_ms > 0 for r in d.ops) and any(r.delta_ms < 0 for r in d.ops)


def test_deltas_add_up_to_the_change_in_op_time_per_step(tf_pair: Pair) -> None:
    """Host op self times sum to the host's op time per step; their deltas to its change."""
    a, b = tf_pair
    d = diff_summaries(a, b)
    host_a = sum(o.total_self_time_us for o in a.top_ops) / 1000 / len(a.steps)
    host_b = sum(o.total_self_time_us for o in b.top_ops) / 1000 / len(b.steps)
    total = d.op_totals()["Host"]
    assert math.isclose(total.a_ms, host_a) and math.isclose(total.b_ms, host_b)
    assert math.isclose(sum(r.delta_ms for r in d.ops), host_b - host_a, abs_tol=1e-9)
    step = d.step_time
    assert step is not None and a.average is not None and b.average is not None
    assert step.a_ms == a.average.step_time_ms and step.b_ms == b.average.step_time_ms
    # Ops run on several threads, so their sum is not the step time: the diff says which it is.
    doc = d.to_dict()
    assert doc["totals"]["ops"]["Host"]["delta_ms"] == pytest.approx(host_b - host_a)
    assert doc["step_time"]["delta_ms"] == pytest.approx(step.b_ms - step.a_ms)


def test_swapping_sides_negates_every_delta(tf_pair: Pair) -> None:
    a, b = tf_pair
    ab, ba = diff_summaries(a, b), diff_summaries(b, a)
    back = {(r.where, r.name): r.delta_ms for r in ba.ops}
    assert all(back[(r.where, r.name)] == -r.delta_ms for r in ab.ops)
    assert set(ab.only_in_a) == set(ba.only_in_b) and set(ab.only_in_b) == set(ba.only_in_a)


def test_a_profile_against_itself_changes_nothing(tf_pair: Pair) -> None:
    a, _ = tf_pair
    d = diff_summaries(a, a)
    assert d.ops and all(r.delta_ms == 0 and r.status == IN_BOTH for r in d.ops)
    assert not d.only_in_a and not d.only_in_b


@needs_shared
def test_kernels_of_a_gpu_profile_are_summed_by_name_and_vanish_against_a_cpu_one() -> None:
    gpu = summarize_session(GPU_LOGDIR)
    cpu = summarize_session(SAMPLES / "custom_loop")
    d = diff_summaries(gpu, cpu)
    by_name: dict[str, float] = {}
    for k in gpu.kernels:
        by_name[k.name] = by_name.get(k.name, 0.0) + k.total_duration_us / 1000 / len(gpu.steps)
    assert len(by_name) < len(gpu.kernels), "the sample splits some kernels over several ops"
    assert {r.name for r in d.kernels} == set(by_name)
    assert all(r.status == ONLY_IN_A and r.b_ms == 0 for r in d.kernels)
    for r in d.kernels:
        assert math.isclose(r.a_ms, by_name[r.name])
    assert math.isclose(d.kernel_total().a_ms, sum(by_name.values()))
    assert d.to_dict()["kernels_only_in_a"] == [r.name for r in d.kernels]
    assert any("GPU" in n and "CPU" in n for n in d.notes)


def test_a_variant_is_the_mean_over_its_runs_with_a_spread() -> None:
    a, b = variant_target(EXPERIMENT, "float32"), variant_target(EXPERIMENT, "mixed")
    assert len(a.sessions) == len(b.sessions) == 5
    d = diff_targets(a, b, use_cache=False)
    assert d.a.profiles == d.b.profiles == 5
    runs = [summarize_session(s) for s in a.sessions]
    top = d.ops[0]
    per_run = [
        sum(o.total_self_time_us for o in s.top_ops if o.name == top.name and o.where == top.where)
        / 1000
        / len(s.steps)
        for s in runs
    ]
    mean = sum(per_run) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in per_run) / 4)
    assert math.isclose(top.a_ms, mean) and top.a_sd_ms is not None
    assert math.isclose(top.a_sd_ms, sd)
    se = d.delta_se(top)
    assert se is not None and se > 0
    steps = [s.average.step_time_ms for s in runs if s.average is not None]
    assert len(steps) == 5
    assert math.isclose(d.a.step_time_ms or 0, sum(steps) / 5)
    assert not any("One profile per side" in n for n in d.notes)


def test_names_from_traces_are_text_not_markup(tf_pair: Pair) -> None:
    a, b = tf_pair
    evil = "[bold red]x|y[/] `op`"
    ops = (dataclasses.replace(b.top_ops[0], name=evil), *b.top_ops[1:])
    d = diff_summaries(a, dataclasses.replace(b, top_ops=ops))
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(diff_renderable(d, limit=len(d.ops)))
    assert "[bold red]x|y[/]" in out.getvalue()
    from tui_prof.cli.diff import to_markdown

    md = to_markdown(d, limit=None)
    line = next(ln for ln in md.splitlines() if "bold red" in ln)
    assert "x\\|y" in line
    assert len(re.split(r"(?<!\\)\|", line)) == 8  # six cells: the name's pipe adds no column


def test_short_names_keep_the_end_and_stay_distinct() -> None:
    s = summarize_session(SAMPLES / "custom_loop")
    names = [o.name for o in s.top_ops]
    for width in (12, 24, 36, 60):
        short = short_names(names, width)
        assert len(set(short)) == len(set(names))
        assert all(len(x) <= width for x in short)
    # A name that is unique by its end is shown by its end.
    unique = short_names(["a/very/long/scope/name/Conv2D", "b/MatMul"], 14)
    assert unique == ["…/name/Conv2D", "b/MatMul"]  # cut where a scope begins
    kernel = "void ns::gemm<float, 128>(ns::Params<float, 128>, int)"
    assert strip_signature(kernel) == "ns::gemm<float, 128>"


@needs_shared
def test_kernel_names_stay_distinct_at_80_columns() -> None:
    gpu = summarize_session(GPU_LOGDIR)
    names = sorted({k.name for k in gpu.kernels})
    for width in (20, 34, 60):
        short = short_names(names, width, kernels=True)
        assert len(set(short)) == len(names) and all(len(x) <= width for x in short)


# -- the command --------------------------------------------------------------------------
def tuiprof_diff(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("diff", *args, cwd=REPO)


def test_cli_json_contract(tmp_path: Path) -> None:
    res = tuiprof_diff("sample_traces/keras_fit_float32", "sample_traces/keras_fit_mixed", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {"ops", "only_in_a", "only_in_b", "kernels", "step_time", "a", "b"} <= doc.keys()
    first = doc["ops"][0]
    assert {"name", "a_ms", "b_ms", "delta_ms"} <= first.keys()
    deltas = [abs(o["delta_ms"]) for o in doc["ops"]]
    assert deltas == sorted(deltas, reverse=True)
    assert set(doc["only_in_b"]) <= {o["name"] for o in doc["ops"] if o["a_ms"] == 0}
    assert doc["a"]["steps"] == doc["b"]["steps"] == 5
    assert doc["kernels"] == []  # CPU profiles


def test_cli_experiment_defaults_to_baseline_against_the_other_variant() -> None:
    res = tuiprof_diff(str(EXPERIMENT), "--markdown", "--limit", "3")
    assert res.returncode == 0, res.stderr
    assert "**A**: float32 (5 of 5 runs)" in res.stdout
    assert "**B**: mixed (5 of 5 runs)" in res.stdout
    assert "## Ops (first 3 of" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sample_traces/nope", "sample_traces/custom_loop"], "no such file or directory"),
        (["sample_traces", "sample_traces/custom_loop"], "sessions; name one of them"),
        (["sample_traces/custom_loop"], "give two profiles"),
        ([str(EXPERIMENT), "--variants", "float32", "fp8"], "no variant 'fp8'"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    res = tuiprof_diff(*args)
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr


def test_pytorch_autocast_against_float32() -> None:
    d = diff_targets(
        path_target(SAMPLES / "torch_float32"), path_target(SAMPLES / "torch_autocast")
    )
    assert d.per == PER_STEP and d.a.steps == d.b.steps == 5
    step = d.step_time
    assert step is not None and step.delta_ms > 0  # bfloat16 is emulated on this sample's CPU
    assert any("ToCopyBackward0" in n for n in d.only_in_b), d.only_in_b
    assert not d.kernels  # a CPU trace
    effects = [abs(r.delta_ms) for r in d.ops]
    assert effects == sorted(effects, reverse=True)
    for where, total in d.op_totals().items():
        rows = [r for r in d.ops if r.where == where]
        assert math.isclose(sum(r.delta_ms for r in rows), total.delta_ms, abs_tol=1e-9)


def test_cli_variant_without_profiles_is_one_line(tmp_path: Path) -> None:
    """An experiment whose jobs profile nothing: the diff says so instead of failing."""
    (tmp_path / "job.py").write_text("print('no profile here')\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'name = "noprof"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 1\n'
        "[variants.a]\n[variants.b]\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui_prof.cli",
            "run",
            str(spec),
            "--headless",
            "--output",
            str(tmp_path / "exp"),
        ],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    res = tuiprof_diff(str(tmp_path / "exp"))
    assert res.returncode == 2
    assert "none of its 1 finished run(s) wrote a profile" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_pytorch_cuda_autocast_against_float32_has_kernels() -> None:
    d = diff_targets(
        path_target(SAMPLES / "torch_cuda_float32"), path_target(SAMPLES / "torch_cuda_autocast")
    )
    assert d.kernels and d.ops and d.a.device_type == d.b.device_type
    # float16 autocast brings half-precision kernels float32 never launched.
    assert any("half" in n.lower() or "fp16" in n.lower() for n in d.to_dict()["kernels_only_in_b"])
    effects = [abs(r.delta_ms) for r in d.kernels]
    assert effects == sorted(effects, reverse=True)
    assert math.isclose(sum(r.delta_ms for r in d.kernels), d.kernel_total().delta_ms, abs_tol=1e-9)


def test_an_op_on_the_host_and_on_the_device_reads_as_two_rows() -> None:
    """PyTorch names an op's CPU time and its GPU time alike (`aten::mm`): each face of the diff
    says which side a row is, so the two rows never read the same."""
    from tui_prof.cli.diff import to_markdown

    d = diff_targets(
        path_target(SAMPLES / "torch_cuda_float32"), path_target(SAMPLES / "torch_cuda_autocast")
    )
    both = {r.name for r in d.ops if r.where == "Host"} & {
        r.name for r in d.ops if r.where == "Device"
    }
    assert "aten::mm" in both
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(diff_renderable(d, limit=len(d.ops)))
    table = out.getvalue().split("Kernels by change")[0]
    cells = [ln.split("│")[1].strip() for ln in table.splitlines() if ln.startswith("│")]
    assert len(cells) == len(d.ops) and len(set(cells)) == len(cells)
    assert "aten::mm (host)" in cells and "aten::mm (device)" in cells
    md = to_markdown(d, limit=None)
    assert "`aten::mm (host)`" in md and "`aten::mm (device)`" in md
    assert "`aten::mm`" not in md
