"""The notebook API: `tui_prof.load` and `tui_prof.load_experiment` give the numbers of `tuiprof
summary` and `tuiprof compare` as pandas DataFrames."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import SAMPLES, needs_module

import tui_prof
from tui_prof.experiments.store import load_experiment as load_record
from tui_prof.profiles.load import summarize_session

pytestmark = needs_module("pandas", "pandas")


def test_load_gives_steps_ops_and_kernels_as_frames() -> None:
    sessions = tui_prof.load(SAMPLES / "torch_cuda_float32")
    assert len(sessions) == 1 and not sessions.errors
    s = sessions[0]
    reference = summarize_session(s.path)
    steps = s.steps
    assert list(steps.index) == [st.step for st in reference.steps]
    assert steps["step_time_ms"].tolist() == [st.step_time_ms for st in reference.steps]
    for category, ms in reference.steps[0].breakdown_ms.items():
        assert math.isclose(steps[category].iloc[0], ms)
    assert (
        len(s.ops) == len(reference.top_ops) and s.ops["name"].iloc[0] == reference.top_ops[0].name
    )
    kernels = s.kernels
    assert len(kernels) == len(reference.kernels) > 0
    assert {"name", "total_duration_us", "uses_tensor_core"} <= set(kernels.columns)
    assert s.to_dict()["step_source"] == reference.step_source


def test_a_cpu_session_has_an_empty_kernel_table_with_its_columns() -> None:
    s = tui_prof.load(SAMPLES / "keras_fit_mixed")[0]
    assert s.kernels.empty and "total_duration_us" in s.kernels.columns


def test_load_over_a_logdir_lists_every_session_and_their_averages() -> None:
    sessions = tui_prof.load(SAMPLES / "jax_program_runs")
    averages = sessions.averages
    assert len(averages) == len(sessions) >= 1
    assert averages["step_time_ms"].notna().all()


def test_a_damaged_session_is_an_error_not_an_exception(tmp_path: Path) -> None:
    bad = tmp_path / "run" / "plugins" / "profile" / "s1"
    bad.mkdir(parents=True)
    (bad / "host.xplane.pb").write_bytes(b"\x0a\x05abc")
    sessions = tui_prof.load(tmp_path, use_cache=False)
    assert len(sessions) == 0 and len(sessions.errors) == 1
    assert sessions.errors[0][0] == str(bad)


def test_load_experiment_gives_one_row_per_run_with_its_metrics() -> None:
    exp = SAMPLES / "experiment_mixed_precision"
    runs = tui_prof.load_experiment(exp).runs
    record = load_record(exp)
    assert list(runs.index) == [r.run_id for r in record.runs]
    first = record.runs[0]
    assert runs.loc[first.run_id, "variant"] == first.variant
    assert runs.loc[first.run_id, "wall_time_s"] == first.wall_time_s
    for metric, value in first.metrics.items():
        assert runs.loc[first.run_id, metric] == value


def test_without_pandas_the_api_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ImportError, match=r"tuiprof\[pandas\]"):
        tui_prof.load(SAMPLES / "keras_fit_mixed")
