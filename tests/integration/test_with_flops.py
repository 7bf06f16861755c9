"""A trace torch records here with `with_flops=True`: FLOPs against 2·M·N·K by hand and torch's own.

torch's `with_flops=True` computes each GEMM's and convolution's FLOPs (its `computeFlops`), but
the trace file it writes (2.x) carries only `"with_flops": 1` at the top: the counts stay in the
profiler's in-memory events. So tuiprof counts from the recorded shapes, and the references are
2·M·N·K computed here from the file's `Input Dims` and torch's own counts from those events. The
`flops` arg path is checked on the same trace with torch's counts written into it as `flops`
args, on the ops torch counts them on (`aten::conv2d`, the parent of the call that runs the
convolution): no op is counted twice.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES

from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import load_summary

WIDE_H100 = SAMPLES / "torch_cuda_wide_float32"  # recorded on an H100 with with_flops=True

STEPS = 3
GEMMS = ("aten::addmm", "aten::mm", "aten::bmm")


def _record(path: Path) -> dict[int, float]:
    """Three profiled steps of a linear layer, a matmul, a bmm and a strided, padded conv; torch's
    own FLOPs per call, by the call's External id."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    lin, conv = torch.nn.Linear(64, 32), torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x, w2 = torch.randn(16, 64), torch.randn(32, 8)
    a, b, img = torch.randn(4, 10, 24), torch.randn(4, 24, 12), torch.randn(2, 3, 16, 16)
    counts: dict[int, float] = {}

    def ready(p: Any) -> None:
        p.export_chrome_trace(str(path))
        counts.update(
            {e.correlation_id(): float(e.flops()) for e in p.profiler.kineto_results.events()}
        )

    with (
        torch.no_grad(),
        profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            with_flops=True,
            profile_memory=True,
            schedule=schedule(wait=0, warmup=1, active=STEPS),  # ProfilerStep#N markers
            on_trace_ready=ready,
        ) as p,
    ):
        for _ in range(1 + STEPS):
            y = lin(x)
            (y.sum() + torch.matmul(y, w2).sum() + torch.bmm(a, b).sum() + conv(img).sum()).item()
            p.step()
    assert counts, "the profiler wrote no trace"
    return counts


def _by_hand(e: dict[str, Any]) -> float | None:
    """2·M·N·K (GEMMs) or 2·outputs·C_in·k_h·k_w (the convolution) from the file's own args."""
    name = e["name"]
    if name not in ("aten::addmm", "aten::mm", "aten::bmm", "aten::conv2d"):
        return None
    dims: list[list[int]] = e["args"]["Input Dims"]
    if name == "aten::addmm":  # bias, A (M×K), B (K×N)
        (m, k), (_, n) = dims[1], dims[2]
        return 2.0 * m * n * k
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2.0 * m * n * k
    if name == "aten::bmm":
        (bs, m, k), (_, _, n) = dims[0], dims[1]
        return 2.0 * bs * m * n * k
    if name == "aten::conv2d":
        (batch, c_in, h, w), (c_out, _, kh, kw) = dims[0], dims[1]
        concrete = e["args"]["Concrete Inputs"]
        stride: list[int] = json.loads(concrete[3])
        pad: list[int] = json.loads(concrete[4])
        oh = (h + 2 * pad[0] - kh) // stride[0] + 1
        ow = (w + 2 * pad[1] - kw) // stride[1] + 1
        return 2.0 * batch * c_out * oh * ow * c_in * kh * kw
    return None


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, Any], dict[int, float]]:
    path = tmp_path_factory.mktemp("with_flops") / "t.json"
    torch_flops = _record(path)
    return path, json.loads(path.read_text()), torch_flops


@pytest.mark.torch
def test_shapes_give_2mnk_and_torchs_own_counts(
    recorded: tuple[Path, dict[str, Any], dict[int, float]],
) -> None:
    path, doc, torch_flops = recorded
    assert doc["with_flops"] == 1
    ops = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    hand: dict[str, float] = {}
    for e in ops:
        f = _by_hand(e)
        if f is not None:
            hand[e["name"]] = hand.get(e["name"], 0.0) + f
            # torch's own count of the same call (its with_flops), by External id
            assert torch_flops[e["args"]["External id"]] == f, e["name"]
    assert set(hand) == {*GEMMS, "aten::conv2d"}
    s = load_summary(discover(path).sessions[0], use_cache=False)
    e = s.efficiency
    assert e is not None
    written = any("flops" in x.get("args", {}) for x in ops)
    assert e.flops_source == ("flops_arg" if written else "shapes")
    flops = {o.name: o.flops for o in s.top_ops if o.flops}
    for name in GEMMS:
        assert flops[name] == hand[name]
    # the convolution is counted once, on the innermost call (the one that runs it), not also
    # on aten::conv2d → aten::convolution → aten::_convolution above it
    conv = [n for n in flops if "conv" in n]
    assert len(conv) == 1 and flops[conv[0]] == hand["aten::conv2d"]
    assert "aten::linear" not in flops and "aten::matmul" not in flops
    assert e.flops_total == sum(hand.values())
    assert e.step_flops == tuple([sum(hand.values()) / STEPS] * STEPS)
    assert s.memory is not None and s.memory.peak_allocated_mb is not None


@pytest.mark.torch
def test_flops_args_count_once(
    recorded: tuple[Path, dict[str, Any], dict[int, float]], tmp_path: Path
) -> None:
    """torch's counts written into the trace as `flops` args (on addmm, mm, bmm, conv2d and the
    scalar adds, as torch attributes them): the total is torch's, with the convolution once."""
    _, doc, torch_flops = recorded
    for e in doc["traceEvents"]:
        f = torch_flops.get(e.get("args", {}).get("External id", -1), 0.0)
        if e.get("cat") == "cpu_op" and f > 0:
            e["args"]["flops"] = f
    path = tmp_path / "with_flops_args.json"
    path.write_text(json.dumps(doc))
    s = load_summary(discover(path).sessions[0], use_cache=False)
    e = s.efficiency
    assert e is not None and "flops_arg" in e.flops_source
    total = sum(
        torch_flops[x["args"]["External id"]]
        for x in doc["traceEvents"]
        if "flops" in x.get("args", {})
    )
    assert e.flops_total == total


def test_an_h100_trace_recorded_with_flops() -> None:
    """The H100 sample recorded with with_flops=True and profile_memory=True: no `flops` args in
    the file (torch 2.x), so the shapes count; GEMMs equal 2·M·N·K from its Input Dims, the
    forward convolutions 2·N·C_out·H_out·W_out·C_in·k_h·k_w from aten::conv2d's dims, stride
    and padding, counted once on the call that runs them (aten::cudnn_convolution)."""
    trace = next(WIDE_H100.rglob("*.pt.trace.json.gz"))
    with gzip.open(trace) as fh:
        doc = json.loads(fh.read())
    assert doc["with_flops"] == 1 and doc["profile_memory"] == 1
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    assert not any("flops" in e["args"] for e in ops)
    hand: dict[str, float] = {}
    for e in ops:
        f = _by_hand(e)
        if f is not None:
            hand[e["name"]] = hand.get(e["name"], 0.0) + f
    s = load_summary(discover(trace).sessions[0], use_cache=False)
    assert s.efficiency is not None and s.efficiency.flops_source == "shapes"
    flops = {o.name: o.flops for o in s.top_ops if o.where == "Host"}
    assert flops["aten::addmm"] == hand["aten::addmm"]
    assert flops["aten::mm"] == hand["aten::mm"]
    assert flops["aten::cudnn_convolution"] == hand["aten::conv2d"]
    for parent in ("aten::conv2d", "aten::convolution", "aten::_convolution", "aten::linear"):
        assert flops.get(parent) is None, parent
    counted = {n: f for n, f in flops.items() if f}
    assert s.efficiency.flops_total == pytest.approx(sum(counted.values()))
    m = s.memory
    totals = [
        e["args"]["Total Allocated"] for e in doc["traceEvents"] if e.get("name") == "[memory]"
    ]
    assert m is not None and m.peak_allocated_mb == pytest.approx(max(totals) / 2**20)
