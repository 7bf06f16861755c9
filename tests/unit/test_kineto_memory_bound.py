"""How much memory a PyTorch trace's ops and runtime calls cost after they are read: the stages
that turn them into steps, breakdowns and op totals (rank.analyse_file after workers.read).

Measured with tracemalloc (numpy reports its arrays to it), which counts bytes, not pages: the
figure is the same on a busy machine as on a quiet one. The trace is written here in Kineto's
order (a window's host ops first, then its runtime calls and kernels) with the A100 trace's mix:
per kernel launch two nested ops, the launch and two cudaEventQuery polls; the figure is the
slope between a trace and one twice as long, so what every trace costs whatever its length
(imports, the read's buffers) drops out.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tui_prof.profiles.kineto import rank, workers

# Bytes per op or runtime call at the stages' peak, for this trace: 126 before runtime calls
# were read through masks instead of a copy kept through every stage, the op tree dropped its
# columns once used and unions were sorted in place (benchmarks/README.md, section 9), 96
# since; the columns alone are 37.
MAX_BYTES_PER_ROW = 110
LAUNCHES_PER_STEP = 20


def _write(path: Path, steps: int) -> int:
    """A one-window trace of `steps` steps; how many ops and runtime calls it has."""
    host: list[dict[str, Any]] = []
    dev: list[dict[str, Any]] = []
    t = 1_700_000_000_000.0
    corr = 0
    width = 40.0
    for n in range(steps):
        host.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1,
             "tid": 1, "ts": t, "dur": width * LAUNCHES_PER_STEP + 10}
        )  # fmt: skip
        for i in range(LAUNCHES_PER_STEP):
            a = t + 5 + width * i
            corr += 1
            for name, start, dur in (("aten::linear", a, 30.0), ("aten::addmm", a + 2, 25.0)):
                host.append(
                    {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": start,
                     "dur": dur, "args": {"External id": corr}}
                )  # fmt: skip
            dev.append(
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                 "tid": 1, "ts": a + 5, "dur": 6.0, "args": {"correlation": corr}}
            )  # fmt: skip
            dev.append(
                {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0,
                 "tid": 7, "ts": a + 20, "dur": 15.0, "args": {"correlation": corr, "device": 0}}
            )  # fmt: skip
            for k in (0, 1):
                dev.append(
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventQuery", "pid": 1,
                     "tid": 1, "ts": a + 33 + 3 * k, "dur": 1.0,
                     "args": {"correlation": 10**9 + 2 * corr + k}}
                )  # fmt: skip
        t += width * LAUNCHES_PER_STEP + 20
    with gzip.open(path, "wt", compresslevel=1) as f:
        json.dump({"schemaVersion": 1, "traceEvents": host + dev}, f)
    return steps * LAUNCHES_PER_STEP * 5


def _stages_peak(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Bytes the stages allocated, at their peak (the read's columns count once joined), and
    the steps found."""
    read = workers.read

    def then_trace(*a: Any, **k: Any) -> Any:
        out = read(*a, **k)
        tracemalloc.start()  # from here: what the stages hold (tracing the read slows it 2x)
        return out

    monkeypatch.setattr(rank, "read", then_trace)
    try:
        r = rank.analyse_file(path, "r", workers=0, chunk_bytes=2**20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, len(r.breakdowns)


def test_the_stages_after_the_read_hold_a_bounded_number_of_bytes_per_op_and_runtime_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = tmp_path / "a.pt.trace.json.gz", tmp_path / "b.pt.trace.json.gz"
    rows_small, rows_large = _write(small, 800), _write(large, 1600)
    warm = tmp_path / "w.pt.trace.json.gz"
    _write(warm, 20)
    _stages_peak(warm, monkeypatch)  # what a process allocates once (caches, compiled rules)
    peak_small, steps_small = _stages_peak(small, monkeypatch)
    peak_large, steps_large = _stages_peak(large, monkeypatch)
    assert (steps_small, steps_large) == (800, 1600)
    per_row = (peak_large - peak_small) / (rows_large - rows_small)
    assert 37 <= per_row <= MAX_BYTES_PER_ROW, f"{per_row:.1f} bytes per op or runtime call"
