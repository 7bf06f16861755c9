"""tuiprof's PyTorch numbers against the references on the same files: the PyTorch profiler
TensorBoard plugin's parser (torch-tb-profiler, no torch needed) and Holistic Trace Analysis.

Where the plugin is right (its own 2021 sample, 2021-style traces) every number equals it within
1%; on today's traces the steps, step times and kernel time equal it, and the runtime calls it
cannot see (it predates `cuda_runtime`) are carved out of its CPU Exec and Other, no more.
"""

from __future__ import annotations

import logging
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import H100_SAMPLES, MI250, PLUGIN_SAMPLE, SHARED_TRACES, TODAY
from kineto_factory import two_steps

from tui_prof.model import NATIVE_CATEGORIES, ProfileSummary
from tui_prof.profiles.kineto import names
from tui_prof.profiles.load import summarize_session

needs_traces = pytest.mark.skipif(
    not PLUGIN_SAMPLE.exists(), reason=f"public traces not found at {SHARED_TRACES}"
)
# The plugin's order (ProfileRole) is ours (NATIVE_CATEGORIES); its costs are in µs.
ROLE = {c: i for i, c in enumerate(NATIVE_CATEGORIES)}
TOTAL = len(NATIVE_CATEGORIES)


def _plugin() -> Any:
    data = pytest.importorskip(
        "torch_tb_profiler.profiler.data", reason="torch-tb-profiler is not installed"
    )
    logging.getLogger("torch_tb_profiler").setLevel(logging.ERROR)
    return data.RunProfileData


@cache
def plugin(path: Path) -> Any:
    with tempfile.TemporaryDirectory() as cache_dir:
        return _plugin().parse("worker0", None, str(path), cache_dir)


@cache
def ours(path: Path) -> ProfileSummary:
    return summarize_session(path)


def _close(a: float, b: float) -> bool:
    """Within 1%, or 1 µs for near-zero categories."""
    return abs(a - b) <= max(0.01 * abs(b), 0.001)


def _plugin_steps(p: Any) -> list[tuple[str, float, list[float]]]:
    return [
        (name, c.costs[TOTAL] / 1000, [x / 1000 for x in c.costs[:TOTAL]])
        for name, c in zip(p.steps_names, p.steps_costs, strict=True)
    ]


@needs_traces
def test_the_plugins_own_sample_equals_the_plugin_in_every_category() -> None:
    p, s = plugin(PLUGIN_SAMPLE), ours(PLUGIN_SAMPLE)
    ref = _plugin_steps(p)
    assert (
        [str(st.step) for st in s.steps]
        == [name for name, _, _ in ref]
        == list(map(str, range(5, 11)))
    )
    for st, (_, time_ms, costs) in zip(s.steps, ref, strict=True):
        assert _close(st.step_time_ms, time_ms)
        assert st.native_breakdown_ms is not None
        for c in NATIVE_CATEGORIES:
            assert _close(st.native_breakdown_ms[c], costs[ROLE[c]]), (st.step, c)
    # and the figures the plugin shows (../shared/traces/README.md)
    avg = s.average
    assert avg is not None and avg.native_breakdown_ms is not None
    assert _close(avg.step_time_ms, 177.592)
    shown = {"kernel": 98.589, "memcpy": 1.915, "memset": 0.089, "runtime": 2.908}
    shown |= {"dataloader": 59.262, "cpu_exec": 13.674, "other": 1.156, "communication": 0.0}
    for c, v in shown.items():
        assert _close(avg.native_breakdown_ms[c], v), c


@needs_traces
def test_the_plugins_kernel_and_op_tables_on_its_sample() -> None:
    p, s = plugin(PLUGIN_SAMPLE), ours(PLUGIN_SAMPLE)
    by_name: dict[str, list[float]] = {}
    for k in s.kernels:
        acc = by_name.setdefault(k.name, [0, 0.0])
        acc[0] += k.occurrences
        acc[1] += k.total_duration_us
    ref = {name: [row["count"], row["sum"]] for name, row in p.kernel_stat.iterrows()}
    assert by_name == ref
    host = {o.name: o.total_self_time_us for o in s.top_ops if o.where == "Host"}
    device = {o.name: o.total_self_time_us for o in s.top_ops if o.where == "Device"}
    for agg in p.op_list_groupby_name:
        assert _close(host.get(agg.name, 0.0), agg.self_host_duration), agg.name
        assert _close(device.get(agg.name, 0.0), agg.self_device_duration), agg.name


@needs_traces
@pytest.mark.parametrize("path", TODAY, ids=lambda p: p.name)
def test_todays_traces_equal_the_plugin_in_steps_step_time_and_kernel_time(path: Path) -> None:
    p, s = plugin(path), ours(path)
    ref = _plugin_steps(p)
    assert [str(st.step) for st in s.steps] == [name for name, _, _ in ref]
    for st, (_, time_ms, costs) in zip(s.steps, ref, strict=True):
        native = st.native_breakdown_ms
        assert native is not None
        assert _close(st.step_time_ms, time_ms)
        for c in ("kernel", "memcpy", "memset", "communication"):
            assert _close(native[c], costs[ROLE[c]]), c
        assert costs[ROLE["runtime"]] == 0  # the plugin's known blind spot
        # what it cannot see comes out of its CPU Exec and Other, nothing else moves
        mine = native["runtime"] + native["cpu_exec"] + native["other"]
        assert _close(mine, costs[ROLE["cpu_exec"]] + costs[ROLE["other"]])
    avg = s.average
    assert avg is not None and avg.native_breakdown_ms is not None
    # said where it matters: runtime calls of 1% of the step or more
    matters = avg.native_breakdown_ms["runtime"] >= 0.01 * avg.step_time_ms
    assert matters == any("shows Runtime 0" in w for w in s.warnings)


@pytest.mark.parametrize("path", H100_SAMPLES, ids=lambda p: p.parent.name)
def test_h100_samples_equal_the_plugin_on_its_host_steps(path: Path) -> None:
    """A real H100 trace (PyTorch 2.11): the plugin lists each step twice (the host range and
    its gpu_user_annotation copy); its host entries are ours, step by step."""
    p, s = plugin(path), ours(path)
    ref = _plugin_steps(p)
    names = [name for name, _, _ in ref]
    assert names == [n for st in s.steps for n in (str(st.step), str(st.step))]
    host = ref[::2]  # each host range starts before its GPU copy
    for st, (_, time_ms, costs) in zip(s.steps, host, strict=True):
        native = st.native_breakdown_ms
        assert native is not None
        assert _close(st.step_time_ms, time_ms)
        for c in ("kernel", "memcpy", "memset", "communication"):
            assert _close(native[c], costs[ROLE[c]]), c
        assert costs[ROLE["runtime"]] == costs[ROLE["dataloader"]] == 0  # it sees neither
        assert native["runtime"] > 0 and native["dataloader"] > 0
        mine = sum(native[c] for c in ("runtime", "dataloader", "cpu_exec", "other"))
        assert _close(mine, costs[ROLE["cpu_exec"]] + costs[ROLE["other"]])


@needs_traces
def test_rocm_trace_differs_from_the_plugin_only_where_the_plugin_is_wrong() -> None:
    p, s = plugin(MI250), ours(MI250)
    ref = _plugin_steps(p)
    # the plugin counts the GPU-side copy of ProfilerStep#1 as a second step "1"
    assert [name for name, _, _ in ref] == ["1", "1", "2"]
    assert [st.step for st in s.steps] == [1]  # step 2 launched nothing: dropped
    first = s.steps[0]
    assert first.native_breakdown_ms is not None
    assert _close(first.step_time_ms, ref[0][1])
    assert _close(first.native_breakdown_ms["kernel"], ref[0][2][ROLE["kernel"]])
    assert first.native_breakdown_ms["runtime"] > 5.0  # hipLaunchKernel & co: 6.7 ms
    assert any("GPU-side copy" in w for w in s.warnings)


@pytest.mark.parametrize("vocab", ["2021", "today"])
def test_synthetic_traces_against_the_plugin(tmp_path: Path, vocab: str) -> None:
    path = two_steps(vocab).write(tmp_path / f"{vocab}.pt.trace.json")
    p, s = plugin(path), summarize_session(path)
    ref = _plugin_steps(p)
    if vocab == "today":  # the plugin also counts the gpu_user_annotation copy of step 1
        assert [name for name, _, _ in ref] == ["1", "1", "2", "3"]
        ref = [ref[0], ref[2]]
    else:
        assert [name for name, _, _ in ref] == ["1", "2"]  # its tail rule drops step 3
    assert [st.step for st in s.steps] == [1, 2]
    for st, (_, time_ms, costs) in zip(s.steps, ref, strict=True):
        native = st.native_breakdown_ms
        assert native is not None
        assert _close(st.step_time_ms, time_ms)
        same = NATIVE_CATEGORIES if vocab == "2021" else ("kernel", "memcpy", "memset")
        for c in same:
            assert _close(native[c], costs[ROLE[c]]), (st.step, c)


def _hta_trace(path: Path) -> Any:
    pytest.importorskip("hta.common.trace", reason="holistictraceanalysis is not installed")
    from hta.common.trace import Trace

    logging.disable(logging.WARNING)
    try:
        t = Trace(trace_files={0: os.path.abspath(path)}, trace_dir="/")
        t.parse_traces()
    finally:
        logging.disable(logging.NOTSET)
    return t


@pytest.mark.parametrize(
    "path", [PLUGIN_SAMPLE, *TODAY[:3], MI250, *H100_SAMPLES], ids=lambda p: p.name
)
def test_kernel_times_equal_holistic_trace_analysis(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    t = _hta_trace(path)
    df = t.get_trace(0)
    sym = t.symbol_table.get_sym_table()
    kernels = df[df["cat"].map(lambda i: sym[i].lower() == "kernel")]
    ref: dict[str, list[float]] = {}
    for name_id, dur in zip(kernels["name"], kernels["dur"], strict=True):
        acc = ref.setdefault(sym[name_id], [0, 0.0])
        acc[0] += 1
        acc[1] += dur
    s = ours(path)
    mine: dict[str, list[float]] = {}
    for k in s.kernels:
        acc = mine.setdefault(k.name, [0, 0.0])
        acc[0] += k.occurrences
        acc[1] += k.total_duration_us
    assert set(mine) == set(ref)
    for name, (calls, total) in ref.items():
        assert mine[name][0] == calls
        # HTA rounds times to whole microseconds (up to 2 per kernel); ROCm traces carry ns
        assert abs(mine[name][1] - total) <= max(1e-6 * total, 2 * calls), name
    comm = sum(v[1] for n, v in ref.items() if names.is_collective(n))
    assert _close(sum(k.total_duration_us for k in s.kernels if names.is_collective(k.name)), comm)


@needs_traces
@pytest.mark.parametrize("path", [PLUGIN_SAMPLE, TODAY[0], TODAY[1]], ids=lambda p: p.name)
def test_steps_equal_holistic_trace_analysis(path: Path) -> None:
    pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed")
    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)
    try:
        analysis = TraceAnalysis(
            trace_files={0: os.path.abspath(path)}, trace_dir="/", include_last_profiler_step=True
        )
    finally:
        logging.disable(logging.NOTSET)
    assert [int(n) for n in analysis.get_profiler_steps()] == [st.step for st in ours(path).steps]
