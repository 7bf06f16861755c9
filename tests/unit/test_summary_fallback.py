"""Where TensorBoard finds no steps, tuiprof still finds them, through the same summary model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import GPU_LOGDIR, needs_shared, sample_session

from tui_prof.model import CATEGORIES, STEP_SOURCE_OFFICIAL
from tui_prof.profiles.load import summarize_session


@pytest.mark.parametrize("name", ["keras_fit_float32", "keras_fit_mixed"])
def test_keras_fit_profiles_get_steps_and_say_how(name: str) -> None:
    s = summarize_session(sample_session(name))
    assert s.step_source == "keras_profiled_batch"
    assert "no step markers" in s.step_source_detail
    assert len(s.steps) == 5  # the example profiles batches 5–9
    assert s.average is not None and s.average.step_time_ms > 0
    assert s.bottleneck and not s.warnings


@pytest.mark.parametrize("name", ["custom_loop", "input_bound", "keras_fit_step_markers"])
def test_forced_fallback_agrees_with_the_converter(name: str) -> None:
    """The proof the brief asks for: same step count, category averages within 5%."""
    official = summarize_session(sample_session(name))
    own = summarize_session(sample_session(name), force_fallback=True)
    assert official.step_source == STEP_SOURCE_OFFICIAL and own.step_source != STEP_SOURCE_OFFICIAL
    assert own.step_source_detail.startswith("forced")
    assert len(own.steps) == len(official.steps)
    assert own.average is not None and official.average is not None
    for c in CATEGORIES:
        a, b = own.average.breakdown_ms[c], official.average.breakdown_ms[c]
        assert a == pytest.approx(b, rel=0.05, abs=0.01), c
    assert own.average.step_time_ms == pytest.approx(official.average.step_time_ms, rel=0.05)


@needs_shared
def test_forced_fallback_on_the_8_gpu_profile() -> None:
    official = summarize_session(GPU_LOGDIR)
    own = summarize_session(GPU_LOGDIR, force_fallback=True)
    assert len(own.steps) == len(official.steps) == 1
    assert own.average is not None and official.average is not None
    for c in CATEGORIES:
        assert own.average.breakdown_ms[c] == pytest.approx(
            official.average.breakdown_ms[c], rel=0.05, abs=0.01
        )


def test_large_profiles_are_streamed_and_say_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above the size limit the converter (≈11× the file in memory) is skipped unless --full."""
    monkeypatch.setenv("TUIPROF_LARGE_MB", "0.01")
    streamed = summarize_session(sample_session("custom_loop"))
    full = summarize_session(sample_session("custom_loop"), full=True)
    assert streamed.step_source == "step_markers" and full.step_source == STEP_SOURCE_OFFICIAL
    assert len(streamed.steps) == len(full.steps)
    assert streamed.average is not None and full.average is not None
    assert streamed.average.step_time_ms == pytest.approx(full.average.step_time_ms, rel=0.05)
    assert not streamed.top_ops and full.top_ops
    assert any("--full" in w for w in streamed.warnings)
    assert streamed.environment.device_type == "CPU"


def test_summary_json_contract_on_a_fallback_session() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui_prof.cli",
            "summary",
            str(sample_session("keras_fit_mixed")),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc = json.loads(out)
    (s,) = doc["sessions"]
    for key in ("path", "hosts", "step_source", "steps", "average", "precision", "bottleneck"):
        assert key in s
    assert set(s["average"]["breakdown_ms"]) == set(CATEGORIES)
    assert set(s["steps"][0]) >= {"step", "step_time_ms", "breakdown_ms"}
    assert s["precision"] is None  # CPU-only: no device compute to split
