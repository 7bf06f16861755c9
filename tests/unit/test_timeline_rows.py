"""The timeline's rows made inside the Collector's own loop (what the TUI's summary indexes as it
reads) equal those made one event at a time by the rules below: the same rows in the same order
in the spill file, the same names and input texts, so the same store, on every sample and
shared PyTorch trace and on a batch of the odd events real traces hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from conftest import SAMPLES, SHARED_TRACES

from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.events import PHASES, Args, Event, Kind, kind_of, raw_list
from tui_prof.profiles.kineto.roles import COMM_OPS, STEP_PREFIX, is_dataloader
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.timeline import kineto_rows as kr
from tui_prof.profiles.timeline.kineto import Names, RankRows

TRACES = [
    *(SAMPLES / d for d in ("torch_cuda_float32", "torch_float32", "torch_cuda_wide_autocast")),
    SHARED_TRACES / "kineto_tb_plugin",
    *sorted((SHARED_TRACES / "kineto").glob("*.json.gz")),
]
_DEVICE = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
_KEPT = (Kind.OP, Kind.ANNOTATION, Kind.RUNTIME, Kind.RUNTIME_2021, Kind.DATALOADER, *_DEVICE)


def _drawn(kind: Kind, name: str) -> bool:
    if kind not in _KEPT:
        return False
    if kind == Kind.ANNOTATION:  # ProfilerStep#N is the step; other annotations nest ops
        return is_dataloader(name) or name in COMM_OPS
    return not (kind == Kind.OP and name.startswith(STEP_PREFIX))


def reference_rows(batch: list[Event]) -> kr.PartRows:
    """One event at a time: its track (host thread or device stream), its name (numbered where
    first met, timed or not), its input text, launch ids and category."""
    keys: list[kr.TrackKey] = []
    names: list[str] = []
    infos: list[str] = []
    name_ids: dict[tuple[Kind, str], int | None] = {}
    comm_ext: set[int] = set()
    rows = []
    for e in batch:
        if e.ph != "X":
            continue
        kind = kind_of(e.cat)
        if (kind, e.name) not in name_ids:
            name_ids[kind, e.name] = len(names) if _drawn(kind, e.name) else None
            if name_ids[kind, e.name] is not None:
                names.append(e.name)
        nid = name_ids[kind, e.name]
        ts, dur = e.ts, e.dur
        if nid is None or ts is None or dur is None or ts != ts or dur != dur:
            continue
        key = (kind in _DEVICE, e.pid, e.tid)
        if key not in keys:
            keys.append(key)
        cat = kr.category(kind, e.name)
        info = corr = ext = -1
        a = e.args
        if a is not None and kind in (Kind.OP, Kind.ANNOTATION):
            text = kr.shapes_text(raw_list(a.input_dims), a.input_type)
            if text:
                if text not in infos:
                    infos.append(text)
                info = infos.index(text)
            x = a.external_id if a.external_id is not None else a.external_id_2021
            if cat == kr.COLLECTIVES and x is not None:
                comm_ext.add(x)
        elif a is not None and kind != Kind.DATALOADER:
            corr = -1 if a.correlation is None else a.correlation
            if kind == Kind.KERNEL:
                x = a.external_id if a.external_id is not None else a.external_id_2021
                ext = -1 if x is None else x
        end = ts + max(dur, 0.0)
        rows.append((keys.index(key), ts, end, nid, cat, ext, corr, info))
    out = np.array(rows, dtype=np.float64).reshape(-1, len(kr.COLUMNS))
    by_track = np.argsort(out[:, kr.TRACK], kind="stable")
    return kr.PartRows(out[by_track], keys, names, infos, comm_ext)


def _collected(batches: list[list[Event]]) -> list[kr.PartRows]:
    """The rows as the summary's read makes them: one Collector, each batch in its own loop."""
    c = Collector(index=True)
    made = []
    for b in batches:
        c.add(b)
        made.append(c.take_rows())
    return made


def _spill(tmp: Path, name: str, parts: list[kr.PartRows]) -> tuple[Names, RankRows, bytes]:
    names = Names()
    rows = RankRows(names, tmp / name)
    for p in parts:
        rows.add(p)
    rows.file.flush()
    return names, rows, (tmp / name).read_bytes()


def _same(tmp: Path, batches: list[list[Event]]) -> int:
    """Both ways spilled as a rank's read spills them; how many rows."""
    n_a, a, bytes_a = _spill(tmp, "ref.rows", [reference_rows(b) for b in batches])
    n_b, b, bytes_b = _spill(tmp, "new.rows", _collected(batches))
    try:
        assert n_b.names == n_a.names and n_b.infos == n_a.infos
        assert b.keys == a.keys and b.pieces == a.pieces and b.comm_ext == a.comm_ext
        assert bytes_b == bytes_a  # every row, bit for bit, in the same place
        for ta, tb in zip(a.tracks(set()), b.tracks(set()), strict=True):
            assert (ta.name, ta.kind, ta.group) == (tb.name, tb.kind, tb.group)
            for col in ("start", "end", "nid", "cat", "corr", "info"):
                assert np.array_equal(getattr(ta, col), getattr(tb, col)), (ta.name, col)
        return a.rows
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("where", TRACES, ids=[p.name[:24] for p in TRACES])
def test_the_collectors_rows_equal_the_rows_made_event_by_event(
    where: Path, tmp_path: Path
) -> None:
    if not where.exists():
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    path = where if where.is_file() else next(where.glob("*.json*"))
    batches = list(TraceStream(path, chunk_bytes=512 * 1024).batches())
    assert _same(tmp_path, batches) > 0


def _event(cat: str, name: str, ts: float | None, dur: float | None, **k: Any) -> Event:
    pid, tid = k.pop("pid", 1), k.pop("tid", 7)
    return Event(cat=cat, name=name, ts=ts, dur=dur, pid=pid, tid=tid, args=Args(**k))


@pytest.mark.parametrize("bits", [kr._SHIFT, 2], ids=["one-key", "lexsort"])
def test_the_odd_events_of_real_traces_too(
    bits: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names first met on an untimed event, negative durations, a `ProfilerStep#` that is no
    step, a kernel named as an op, both runtime vocabularies, DataLoader and collective spans,
    copies between kernels on one stream, other phases and ignored categories; with `bits`
    too few for a batch's places, they are sorted the long way."""
    monkeypatch.setattr(kr, "_SHIFT", bits)
    dims = msgspec.Raw(b"[[8, 3], []]")
    hostile = [
        _event("cpu_op", "aten::mm", None, 5.0),  # untimed: its name still comes first
        _event("cuda_runtime", "cudaLaunchKernel", 10.0, float("nan"), correlation=1),
        _event("cpu_op", "aten::relu", 10.0, 4.0, input_dims=dims, input_type=("float", "")),
        _event("cpu_op", "aten::mm", 11.0, -3.0, input_type=("c10::Half",)),
        _event("cpu_op", "ProfilerStep#x", 9.0, 30.0),  # not a step: kept by the summary only
        _event("user_annotation", "ProfilerStep#4", 9.0, 30.0),
        _event("user_annotation", "nccl:all_reduce", 12.0, 6.0, external_id=77),
        _event("user_annotation", "Optimizer.step#SGD.step", 13.0, 2.0),
        _event("user_annotation", "enumerate(DataLoader)#_Iter.__next__", 1.0, 3.0),
        _event("DataLoader", "enumerate(DataLoader)#_Iter.__next__", 1.5, 1.0, pid=2),
        _event("cuda_runtime", "cudaLaunchKernel", 14.0, 1.0, correlation=5),
        _event("Runtime", "cudaLaunchKernel", 14.5, 1.0, correlation=6),
        _event("cuda_driver", "cuStreamSynchronize", 15.0, 1.0),
        _event("kernel", "aten::relu", 16.0, 2.0, correlation=5, external_id_2021=9, tid=21),
        _event("gpu_memcpy", "Memcpy HtoD", 18.0, 1.0, correlation=6, device=0, tid=21),
        _event("kernel", "ncclKernel_AllReduce", 19.0, 4.0, correlation=7, external_id=77, tid=22),
        _event("gpu_memset", "Memset", 19.5, 0.5, tid=21),
        _event("gpu_user_annotation", "ProfilerStep#4", 9.0, 30.0, tid=21),
        _event("python_function", "train.py(10): step", 9.0, 1.0),  # ignored category
        PHASES["i"](cat="cpu_op", name="aten::empty", ts=20.0, dur=0.0),
        _event("cpu_op", "aten::relu", 21.0, 1.0, input_dims=dims, input_type=("float", ""), tid=8),
    ]
    # as one batch, and cut in three (a name first met in an earlier batch comes again)
    assert _same(tmp_path, [hostile]) == 13
    assert _same(tmp_path, [hostile[:7], hostile[7:15], hostile[15:]]) == 13
