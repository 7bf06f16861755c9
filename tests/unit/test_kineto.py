"""PyTorch profiler (Kineto) traces: discovery, steps and both breakdowns, on traces made here."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import sample_session
from kineto_factory import (
    DATALOADER,
    EXPECTED_NATIVE,
    EXPECTED_OURS,
    SGEMM,
    SIXTEEN_BIT_PERCENT,
    TENSOR_CORE_PERCENT_OF_ELIGIBLE,
    TENSOR_CORE_PERCENT_OF_KERNELS,
    Trace,
    two_steps,
    write_rank,
)

from tui_prof.model import NATIVE_CATEGORIES
from tui_prof.profiles.discover import discover
from tui_prof.profiles.kineto import names
from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.load import load_summary, summarize_session


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args], capture_output=True, text=True
    )


@pytest.mark.parametrize("vocab", ["2021", "today", "rocm"])
def test_each_vocabulary_splits_steps_as_worked_out_by_hand(tmp_path: Path, vocab: str) -> None:
    path = two_steps(vocab).write(tmp_path / "trace.json.gz")
    s = summarize_session(path)
    assert s.framework == "pytorch"
    assert s.step_source == "profiler_step"
    assert [st.step for st in s.steps] == [1, 2]  # step 3 launched nothing: dropped
    assert any("Dropped the last step" in w for w in s.warnings)
    for st in s.steps:
        assert st.step_time_ms == pytest.approx(10.0)
        assert st.native_breakdown_ms == pytest.approx(EXPECTED_NATIVE[st.step], abs=1e-9)
        ours = {k: v for k, v in st.breakdown_ms.items() if k in EXPECTED_OURS[st.step]}
        assert ours == pytest.approx(EXPECTED_OURS[st.step], abs=1e-9)
        assert sum(st.breakdown_ms.values()) == pytest.approx(st.step_time_ms)
        assert st.native_breakdown_ms is not None
        assert sum(st.native_breakdown_ms.values()) == pytest.approx(st.step_time_ms)
    assert s.precision is not None
    assert s.precision.compute_16bit_percent == pytest.approx(SIXTEEN_BIT_PERCENT)
    assert s.tensor_core is not None
    assert s.tensor_core.percent_of_kernel_time == pytest.approx(TENSOR_CORE_PERCENT_OF_KERNELS)
    assert s.tensor_core.percent_of_eligible_time == pytest.approx(TENSOR_CORE_PERCENT_OF_ELIGIBLE)
    assert s.environment.device_type == "GPU"
    assert s.environment.device_names == ("Test GPU",)
    sgemm = next(k for k in s.kernels if k.name == SGEMM)
    assert (sgemm.op_name, sgemm.occurrences, sgemm.total_duration_us) == ("aten::linear", 1, 3000)
    assert sgemm.tensor_core_eligible and not sgemm.uses_tensor_core
    host = {o.name: o.total_self_time_us for o in s.top_ops if o.where == "Host"}
    device = {o.name: o.total_self_time_us for o in s.top_ops if o.where == "Device"}
    # linear 2000 less its launch (100); conv2d 2000 less its three runtime calls (80)
    assert host["aten::linear"] == pytest.approx(1900)
    assert host["aten::conv2d"] == pytest.approx(1920)
    expected = {"aten::conv2d": 5300, "aten::linear": 3000, "aten::copy_": 500}
    if vocab == "2021":  # an `Operator` then, not a user_annotation: an op that launched a kernel
        expected["nccl:all_reduce"] = 1000
    assert device == pytest.approx(expected)
    d = s.to_dict()
    assert set(d["average"]["native_breakdown_ms"]) == set(NATIVE_CATEGORIES)
    assert d["steps"][0]["native_breakdown_ms"]["kernel"] == pytest.approx(3.0)
    assert any("torch.autocast" in r or "DataLoader(" in r for r in s.recommendations)


def test_todays_traces_say_where_the_plugin_differs(tmp_path: Path) -> None:
    s = summarize_session(two_steps("today").write(tmp_path / "t.json"))
    text = "\n".join(s.warnings)
    assert "shows Runtime 0" in text  # the plugin predates cuda_runtime
    assert "GPU-side copy of ProfilerStep#N" in text
    assert "DataLoader user_annotations" in text
    old = summarize_session(two_steps("2021").write(tmp_path / "o.json"))
    assert not any("Runtime 0" in w for w in old.warnings)  # the plugin reads 2021's Runtime


def _aligned_trace(vocab: str) -> Trace:
    """Step 1's kernel ends 500 µs after its host span: the 2021 rule moves the boundary."""
    t = Trace(vocab)
    t.step(1, 0, 1000)
    op = t.op("aten::mm", 10, 900)
    c = t.runtime("launch", 50, 10, ext=op)
    t.device("k", SGEMM, 100, 1400, c, ext=op)  # ends at 1500
    t.step(2, 1000, 1000)
    op = t.op("aten::mm", 1010, 900)
    c = t.runtime("launch", 1050, 10, ext=op)
    t.device("k", SGEMM, 1600, 200, c, ext=op)
    return t


def test_2021_steps_end_with_their_gpu_work_todays_keep_host_spans(tmp_path: Path) -> None:
    old = summarize_session(_aligned_trace("2021").write(tmp_path / "old.json"))
    assert [s.step_time_ms for s in old.steps] == pytest.approx([1.5, 0.5])
    assert "end of the GPU work" in old.step_source_detail
    new = summarize_session(_aligned_trace("today").write(tmp_path / "new.json"))
    assert [s.step_time_ms for s in new.steps] == pytest.approx([1.0, 1.0])
    assert "host spans" in new.step_source_detail  # the 500 µs lag is half a step: said


def test_without_step_markers_steps_come_from_optimizer_steps_then_the_whole_trace(
    tmp_path: Path,
) -> None:
    t = Trace("today")
    for i in range(4):
        t.op("aten::mm", i * 1000, 600)
        t.annotation("Optimizer.step#SGD.step", i * 1000 + 700, 200)  # ends at i*1000 + 900
    s = summarize_session(t.write(tmp_path / "opt.json"))
    assert s.step_source == "optimizer_step"
    assert [st.step_time_ms for st in s.steps] == pytest.approx([1.0, 1.0, 1.0])
    assert "Optimizer.step" in s.step_source_detail

    t = Trace("today")
    t.op("aten::mm", 100, 600)
    t.op("aten::add", 1000, 200)
    s = summarize_session(t.write(tmp_path / "none.json"))
    assert s.step_source == "trace_span"
    assert [st.step_time_ms for st in s.steps] == pytest.approx([1.1])  # first to last CPU op
    assert s.environment.device_type == "CPU"
    assert s.precision is None
    assert s.steps[0].breakdown_ms["host_compute"] == pytest.approx(0.8)

    forced = summarize_session(two_steps().write(tmp_path / "f.json"), force_fallback=True)
    assert forced.step_source == "trace_span" and forced.step_source_detail.startswith("forced")


def test_a_trace_without_cpu_ops_or_device_properties(tmp_path: Path) -> None:
    t = Trace("today")
    t.device("k", SGEMM, 0, 500, corr=1)
    t.device("k", SGEMM, 1000, 500, corr=2)
    s = summarize_session(t.write(tmp_path / "gpu_only.json"))
    assert s.step_source == "trace_span" and "no CPU ops" in s.step_source_detail
    assert s.steps[0].step_time_ms == pytest.approx(1.5)
    assert s.steps[0].breakdown_ms["device_compute"] == pytest.approx(1.0)
    assert s.environment.device_type == "GPU" and s.environment.device_names == ()


def test_a_tensorboard_logdir_groups_ranks_into_sessions_as_the_plugin_does(
    tmp_path: Path,
) -> None:
    run = tmp_path / "logs" / "resnet"
    for span, (ts0, ts1) in enumerate(
        ((1700000000000, 1700000000013), (1700000100000, 1700000100021))
    ):
        write_rank(run / f"host_11.{ts0}.pt.trace.json.gz", 0, 1.0 + span)
        write_rank(run / f"host_12.{ts1}.pt.trace.json.gz", 1, 1.5 + span)
    (run / "notes.json").write_text('{"schemaVersion": 3, "hello": 1}')  # JSON, not a trace
    found = discover(tmp_path / "logs")
    assert [r.name for r in found.runs] == ["resnet"]
    sessions = found.sessions
    assert len(sessions) == 2
    assert all(
        s.format == "kineto" and [h.host for h in s.hosts] == ["host_11", "host_12"]
        for s in sessions
    )
    assert sessions[0].name < sessions[1].name  # named by time, like TensorBoard's sessions
    s = load_summary(sessions[0], use_cache=False)
    assert [r.name for r in s.ranks] == ["host_11", "host_12"]
    assert [r.rank for r in s.ranks] == [0, 1]
    assert [r.slowest for r in s.ranks] == [False, True]
    assert s.ranks[1].step_time_ms == pytest.approx(15.0)
    # the session's steps are each step's slowest rank
    assert [st.step_time_ms for st in s.steps] == pytest.approx([15.0, 15.0])
    assert any("Rank host_12 is the slowest" in w and "20% above" in w for w in s.warnings)
    assert s.environment.world_size == 2 and s.environment.device_count == 2
    d = s.to_dict()
    assert d["slowest_rank"] == "host_12" and len(d["ranks"]) == 2
    r = _cli("summary", str(tmp_path / "logs"), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "◀ slowest" in r.stdout and "PyTorch profiler plugin's categories" in r.stdout


def test_plain_json_names_are_found_by_their_head(tmp_path: Path) -> None:
    two_steps().write(tmp_path / "trace.json")  # export_chrome_trace, any name
    for rank in (0, 1):
        write_rank(tmp_path / "ranks" / f"rank-{rank}.json.gz", rank, 1.0)
    jax = {"displayTimeUnit": "ns", "traceEvents": [{"ph": "M", "pid": 1, "name": "process_name"}]}
    (tmp_path / "jax.trace.json.gz").write_bytes(gzip.compress(json.dumps(jax).encode()))
    (tmp_path / "config.json").write_text(json.dumps({"lr": 0.1}))
    found = discover(tmp_path)
    by_name = {s.name: s for s in found.sessions}
    assert set(by_name) == {"trace", "rank-*"}
    assert by_name["trace"].path == tmp_path / "trace.json"
    assert [h.host for h in by_name["rank-*"].hosts] == ["rank-0", "rank-1"]
    assert by_name["rank-*"].path == tmp_path / "ranks"  # the only session there: its directory


def test_any_trace_name_works_on_the_command_line(tmp_path: Path) -> None:
    path = two_steps().write(tmp_path / "eager_trace.json.gz")
    r = _cli("summary", str(path), "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["sessions"][0]
    assert doc["framework"] == "pytorch"
    assert doc["average"]["native_breakdown_ms"]["kernel"] == pytest.approx(4.1)
    other = tmp_path / "other.txt"
    other.write_text("{}")
    r = _cli("summary", str(other))
    assert r.returncode == 2
    assert "not a profile" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_cache_round_trips_pytorch_fields(tmp_path: Path) -> None:
    rank_dir = tmp_path / "run"
    for rank in (0, 1):
        write_rank(rank_dir / f"w{rank}.{1700000000000 + rank}.pt.trace.json", rank, 1 + rank)
    session = discover(rank_dir).sessions[0]
    first = load_summary(session)
    again = load_summary(session)  # from the cache
    assert again.to_dict() == first.to_dict()
    assert again.ranks and again.steps[0].native_breakdown_ms is not None


def test_tensorflow_sessions_keep_their_json() -> None:
    d = summarize_session(sample_session("custom_loop")).to_dict()
    assert d["framework"] == "tensorflow"  # from its events (xplane/framework.py)
    assert "ranks" not in d and "slowest_rank" not in d
    assert "native_breakdown_ms" not in d["steps"][0]
    assert "native_breakdown_ms" not in d["average"]
    assert "world_size" not in d["environment"]


def test_cut_points_inside_strings_are_never_taken(tmp_path: Path) -> None:
    """Chunked reading equals reading whole, even where names contain `}, {` and `"traceEvents"`."""
    t = two_steps()
    for i in range(3000):
        t.op('weird}, {"traceEvents": [name' + str(i % 7), 30000 + i * 10, 5)
    path = t.write(tmp_path / "weird.json")

    def collect(chunk: int) -> tuple[Collector, int]:
        c = Collector()
        stream = TraceStream(path, chunk_bytes=chunk)
        for batch in stream.batches():
            c.add(batch)
        return c, stream.parts

    (whole, one), (chunked, many) = collect(2**30), collect(4096)
    assert one == 1 and many > 50
    assert chunked.names == whole.names
    cols = ("thread", "ts", "end", "nid", "flags", "corr")

    def rows(c: Collector) -> np.ndarray:  # every host row, in one order (batches group by kind)
        c.device()
        assert c.host is not None
        table = np.column_stack([getattr(c.host, col) for col in cols])
        return table[np.lexsort(table.T[::-1])]

    a, b = rows(chunked), rows(whole)
    assert len(b) > 3000 and (a == b).all()
    assert chunked.thread_keys == whole.thread_keys


def test_name_rules() -> None:
    assert names.is_collective("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)")
    assert not names.is_collective("void at::native::nccl_like_kernel")
    assert names.uses_tensor_core("ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_nn")
    assert names.uses_tensor_core("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN")
    assert not names.uses_tensor_core("ampere_sgemm_128x64_nn")
    assert names.tc_eligible_op("autograd::engine::evaluate_function: MmBackward0")
    assert names.tc_eligible_op("aten::convolution_backward")
    assert not names.tc_eligible_op("aten::add")
    assert names.is_16bit_kernel("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>")
    assert not names.is_16bit_kernel("ampere_sgemm_128x64_nn")


def test_dataloader_spans_are_input(tmp_path: Path) -> None:
    t = Trace("2021")
    t.step(1, 0, 1000)
    t.op(DATALOADER, 0, 600)
    s = summarize_session(t.write(tmp_path / "dl.json"))
    assert s.steps[0].native_breakdown_ms is not None
    assert s.steps[0].native_breakdown_ms["dataloader"] == pytest.approx(0.6)
    assert s.steps[0].breakdown_ms["input"] == pytest.approx(0.6)
    assert s.bottleneck.startswith("Input-bound")
    assert any("DataLoader(num_workers" in r for r in s.recommendations)


def test_reading_a_pytorch_trace_imports_no_framework(tmp_path: Path) -> None:
    path = two_steps().write(tmp_path / "t.pt.trace.json")
    probe = (
        "import sys\n"
        "from tui_prof.profiles.load import summarize_session\n"
        f"summarize_session({str(path)!r})\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert not loaded & {"torch", "tensorflow", "jax", "textual", "torch_tb_profiler", "hta"}
    assert "msgspec" in loaded
