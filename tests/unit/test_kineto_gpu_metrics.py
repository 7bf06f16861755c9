"""The PyTorch plugin's GPU figures (GPU utilisation, est. SM efficiency, est. achieved occupancy)
against the plugin's own parser (torch-tb-profiler's GPUMetricsParser, run here without torch),
over all steps as the plugin shows them and over each step's window."""

from __future__ import annotations

import logging
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import H100_SAMPLES, MI250, PLUGIN_SAMPLE, SHARED_TRACES, TODAY

from tui_prof.device_use import GpuMetric
from tui_prof.model import ProfileSummary
from tui_prof.profiles.load import summarize_session

# Traces whose steps the plugin finds as tuiprof does. On MI250 and the committed H100 samples it
# counts the GPU-side copies of ProfilerStep#N as more steps, so its window ends later; the
# per-step comparison (its rule over each of tuiprof's steps) covers those traces.
SAME_STEPS = [PLUGIN_SAMPLE, *TODAY]


@cache
def ours(path: Path) -> ProfileSummary:
    """tuiprof's summary, once per trace (several tests read the same one)."""
    return summarize_session(path)


@cache
def _plugin(path: Path) -> Any:
    data = pytest.importorskip(
        "torch_tb_profiler.profiler.data", reason="torch-tb-profiler is not installed"
    )
    logging.getLogger("torch_tb_profiler").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as cache_dir:
        return data.RunProfileData.parse("worker0", None, str(path), cache_dir)


def _exists(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"public traces not found at {SHARED_TRACES}")


def _figures(parser: Any, gpu: int) -> tuple[float, float | None, float | None]:
    """(utilisation %, SM efficiency %, occupancy %) as the plugin's overview shows them."""
    sm = parser.avg_approximated_sm_efficiency_per_device[gpu]
    return (
        parser.gpu_utilization[gpu] * 100,
        None if sm is None else sm * 100,
        parser.avg_occupancy_per_device[gpu],
    )


def _mine(m: GpuMetric | Any) -> tuple[float, float | None, float | None]:
    return (m.utilization_percent, m.sm_efficiency_percent, m.occupancy_percent)


def _same(a: tuple[float | None, ...], b: tuple[float | None, ...]) -> bool:
    return all(
        (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-6)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("path", SAME_STEPS, ids=lambda p: p.name)
def test_overall_figures_equal_the_plugins(path: Path) -> None:
    _exists(path)
    parser = _plugin(path).gpu_metrics_parser
    s = ours(path)
    assert sorted(m.device for m in s.gpu_metrics) == sorted(parser.gpu_ids)
    for m in s.gpu_metrics:
        assert _same(_mine(m), _figures(parser, m.device)), (m.device, _mine(m))
    if path == PLUGIN_SAMPLE:  # what its overview shows (rounded to 2 places there)
        (m,) = s.gpu_metrics
        assert (round(m.utilization_percent, 2), round(m.sm_efficiency_percent or 0, 2)) == (
            55.51,
            54.68,
        )
        assert round(m.occupancy_percent or 0, 2) == 49.13
        assert m.name == "Tesla V100-DGXS-32GB"


@pytest.mark.parametrize(
    "path", [PLUGIN_SAMPLE, TODAY[0], MI250, *H100_SAMPLES[:1]], ids=lambda p: p.name
)
def test_each_steps_figures_equal_the_plugins_rule_over_that_step(path: Path) -> None:
    _exists(path)
    from torch_tb_profiler.profiler.gpu_metrics_parser import GPUMetricsParser

    p = _plugin(path)
    s = ours(path)
    assert s.gpu_metrics and all(len(m.steps) == len(s.steps) for m in s.gpu_metrics)
    from tui_prof.profiles.kineto.rank import analyse_file

    spans = analyse_file(path, "w").steps.spans  # type: ignore[union-attr]
    for i, (a, b) in enumerate(spans):
        ref = GPUMetricsParser.parse_events(p.events, a, b, a, b)
        for m in s.gpu_metrics:
            step = m.steps[i]
            assert step.step == s.steps[i].step
            assert _same(_mine(step), _figures(ref, m.device)), (step, m.device)
    if path == MI250:  # AMD: no blocks-per-SM or occupancy args, utilisation alone
        assert all(m.sm_efficiency_percent is None for m in s.gpu_metrics)


def test_a_trace_without_kernels_has_no_gpu_figures() -> None:
    path = TODAY[3]  # a CUPTI counter trace: no kernels
    _exists(path)
    s = ours(path)
    assert s.gpu_metrics == () and "gpu_metrics" not in s.to_dict()


def test_figures_survive_the_cache_and_show_in_the_summary() -> None:
    _exists(PLUGIN_SAMPLE)
    from tui_prof.profiles.cache import decode, encode
    from tui_prof.render.summary import summary_renderable

    s = ours(PLUGIN_SAMPLE)
    again = decode(encode(s))
    assert again.gpu_metrics == s.gpu_metrics
    from rich.console import Console

    console = Console(width=120, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(summary_renderable(s))
    text = console.export_text()
    assert "GPU utilization 55.5% (steps 52.5–59.4%), est. SM efficiency 54.7%" in text
    assert "est. achieved occupancy 49.1%" in text
    from tui_prof.cli.summary import to_markdown

    assert "| 0 | `Tesla V100-DGXS-32GB` | 55.51% | 54.68% | 49.13% |" in to_markdown([s])


async def test_the_steps_tab_shows_each_steps_gpu_utilization(tmp_path: Path) -> None:
    """As a person reads it: the plugin's sample opened in the TUI, the Steps tab at 80×24."""
    _exists(PLUGIN_SAMPLE)
    from conftest import filled, settle
    from textual.widgets.data_table import ColumnKey

    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.widgets.summary_tables import StepBreakdownTable

    (tmp_path / PLUGIN_SAMPLE.name).symlink_to(PLUGIN_SAMPLE)
    expected = ours(PLUGIN_SAMPLE).gpu_metrics[0].steps
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        table = await filled(pilot, StepBreakdownTable)
        col = list(table.columns).index(ColumnKey("gpu_util"))
        shown = [table.get_row_at(i)[col] for i in range(table.row_count)]
        assert shown == [f"{s.utilization_percent:.1f}" for s in expected]
        assert shown[0] == "52.5"
