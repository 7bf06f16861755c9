"""Where TensorBoard's converter finds steps, tuiprof's numbers are its numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import GPU_LOGDIR, needs_shared, official_overview, sample_session

from tui_prof.model import CATEGORIES, STEP_SOURCE_OFFICIAL
from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import load_summary, summarize_session
from tui_prof.profiles.xplane.tb_tables import STEP_COLUMNS


def _official_steps(paths: list[Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    overview = official_overview(paths)
    table = next(t for t in overview if any(c["id"] == "stepTimeMs" for c in t["cols"]))
    ids = [c["id"] for c in table["cols"]]
    rows = [{ids[i]: c["v"] for i, c in enumerate(r["c"])} for r in table["rows"]]
    props = {k: v for t in overview for k, v in (t.get("p") or {}).items()}
    return rows, props


@needs_shared
def test_gpu_profile_equals_converter() -> None:
    session = discover(GPU_LOGDIR).sessions[0]
    s = summarize_session(session)
    rows, _props = _official_steps([h.path for h in session.hosts])
    assert s.step_source == STEP_SOURCE_OFFICIAL
    assert len(s.steps) == len(rows) == 1
    for ours, theirs in zip(s.steps, rows, strict=True):
        assert ours.step_time_ms == theirs["stepTimeMs"]
        for col, cat in STEP_COLUMNS.items():
            assert ours.breakdown_ms[cat] == theirs[col], cat
    # The numbers the shared traces' README quotes from TensorBoard: 21.31 ms, 14.88 compute, 30.5% 16-bit.
    assert s.average is not None
    assert round(s.average.step_time_ms, 2) == 21.31
    assert round(s.average.breakdown_ms["device_compute"], 2) == 14.88
    assert round(s.average.breakdown_ms["other"], 2) == 6.43
    assert s.precision is not None and s.precision.compute_16bit_percent == 30.5
    assert s.environment.device_type == "GPU" and s.environment.device_count == 8
    assert s.kernels, "a GPU profile has kernels"
    assert s.bottleneck


@pytest.mark.parametrize("name", ["custom_loop", "input_bound", "keras_fit_step_markers"])
def test_cpu_profiles_with_markers_equal_converter_rounding(name: str) -> None:
    """Averages and standard deviations match the converter's own (0.1 ms-rounded) statistics."""
    session = discover(sample_session(name)).sessions[0]
    s = summarize_session(session)
    rows, props = _official_steps([h.path for h in session.hosts])
    assert s.step_source == STEP_SOURCE_OFFICIAL
    assert len(s.steps) == len(rows) > 1
    avg = s.average
    assert avg is not None
    assert f"{avg.step_time_ms:.1f}" == props["steptime_ms_average"]
    assert f"{avg.step_time_std_ms:.1f}" == props["steptime_ms_standard_deviation"]
    assert f"{avg.min_step_time_ms:.1f}" == props["steptime_ms_minimum"]
    assert f"{avg.max_step_time_ms:.1f}" == props["steptime_ms_maximum"]
    prop_names = {
        "host_compute": "host_compute_time_ms",
        "input": "infeed_time_ms",
        "other": "other_time_ms",
    }
    for cat, prop in prop_names.items():
        assert f"{avg.breakdown_ms[cat]:.1f}" == props[f"{prop}_avg"], cat
    assert s.environment.device_type == "CPU"
    assert s.precision is None  # no device compute on a CPU-only job


def test_input_bound_sample_is_called_input_bound() -> None:
    s = summarize_session(sample_session("input_bound"))
    assert s.bottleneck.startswith("Input-bound")
    assert any("prefetch" in r for r in s.recommendations)


def test_breakdown_adds_up_to_step_time() -> None:
    s = summarize_session(sample_session("custom_loop"))
    assert len(s.steps) == 5  # a loop over no steps would assert nothing
    for st in s.steps:
        assert sum(st.breakdown_ms[c] for c in CATEGORIES) == pytest.approx(
            st.step_time_ms, rel=1e-3
        )


def test_cache_returns_the_same_summary_and_notices_changes(
    tmp_path: Path, _private_cache: Path
) -> None:
    import shutil

    src = sample_session("custom_loop")
    dst = tmp_path / "run" / "plugins" / "profile" / src.name
    shutil.copytree(src, dst)
    first = load_summary(dst)
    assert list(_private_cache.glob("*.msgpack")), "the summary was stored"
    again = load_summary(dst)
    assert again == first
    # Replace the host file by another profile: the cache must not answer for the new content.
    host = next(dst.glob("*.xplane.pb"))
    other = next(sample_session("input_bound").glob("*.xplane.pb"))
    shutil.copyfile(other, host)
    changed = load_summary(dst)
    assert changed.average is not None and first.average is not None
    assert changed.average.step_time_ms != first.average.step_time_ms
