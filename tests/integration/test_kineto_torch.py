"""Traces recorded by torch's own profiler at test time (CPU), read back by tuiprof."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import load_summary

torch = pytest.importorskip("torch", reason="torch is not installed (an optional extra)")


def _train(steps: int, prof: object | None = None) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(512, 64), torch.randint(0, 10, (512,))),
        batch_size=32,
    )
    for i, (x, y) in enumerate(data):
        if i >= steps:
            break
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if prof is not None:
            prof.step()  # type: ignore[attr-defined]


def test_tensorboard_trace_handler_output(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    logdir = tmp_path / "log" / "mlp"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(logdir), worker_name="worker0"),
        record_shapes=True,
    ) as prof:
        _train(6, prof)
    files = sorted(logdir.glob("*.pt.trace.json*"))
    assert len(files) == 1
    found = discover(tmp_path / "log")
    assert len(found.sessions) == 1
    session = found.sessions[0]
    assert session.format == "kineto" and [h.host for h in session.hosts] == ["worker0"]
    s = load_summary(session, use_cache=False)
    assert s.step_source == "profiler_step"
    assert len(s.steps) == 3 and [st.step for st in s.steps] == sorted(st.step for st in s.steps)
    assert s.environment.device_type == "CPU" and s.precision is None
    for st in s.steps:
        assert st.step_time_ms > 0
        assert sum(st.breakdown_ms.values()) == pytest.approx(st.step_time_ms)
        assert st.native_breakdown_ms is not None
        assert st.native_breakdown_ms["kernel"] == 0.0
        assert st.breakdown_ms["host_compute"] > 0
        assert st.breakdown_ms["input"] > 0  # enumerate(DataLoader)#…__next__ spans
    host_ops = {o.name for o in s.top_ops if o.where == "Host"}
    assert "aten::addmm" in host_ops or "aten::linear" in host_ops
    assert s.bottleneck and s.recommendations


def test_export_chrome_trace_without_step_markers(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _train(4)
    path = tmp_path / "my_trace.json"
    prof.export_chrome_trace(str(path))
    found = discover(tmp_path)
    assert [s.path for s in found.sessions] == [path]
    s = load_summary(found.sessions[0], use_cache=False)
    assert s.step_source == "optimizer_step"  # no prof.step(): steps end at Optimizer.step
    assert len(s.steps) == 3
