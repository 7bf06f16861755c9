"""The timeline's nesting (the innermost event wins a cell) and the selected event's detail:
its recorded shapes and dtypes, and its partner (the kernel an op launched, the op that launched
a kernel), on real traces."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared

from tui_prof.cli.main import main
from tui_prof.model import CATEGORIES
from tui_prof.profiles.timeline.bins import bin_track
from tui_prof.profiles.timeline.load import load_timeline
from tui_prof.profiles.timeline.model import make_track
from tui_prof.profiles.timeline.nesting import parents

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
PLUGIN_TRACE = SHARED_TRACES / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"
INPUT = CATEGORIES.index("input")
HOST = CATEGORIES.index("host_compute")


def test_parents_of_nested_events() -> None:
    # a step [0, 100] > a loader call [0, 40] > two ops [5, 10], [10, 30]; a sibling [50, 90]
    start = np.array([0.0, 0.0, 5.0, 10.0, 50.0])
    end = np.array([100.0, 40.0, 10.0, 30.0, 90.0])
    assert parents(start, end).tolist() == [-1, 0, 1, 1, 0]


def test_events_are_ordered_by_start_then_longest_first_then_as_read() -> None:
    """nesting.order sorts only the events that share a start by their end; its order is the
    plain two-key sort's, on shuffled, nearly sorted and tied events (every track's build)."""
    from tui_prof.profiles.timeline.nesting import order

    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 300, 5000):
        start = rng.integers(0, max(1, n // 3), n).astype(np.float64)
        for end in (start + rng.integers(0, 4, n), start.copy()):
            for s in (start, np.sort(start), np.sort(start)[::-1].copy()):
                assert order(s, end).tolist() == np.lexsort((-end, s)).tolist(), n


def test_parents_equal_a_stack_walk_on_random_nested_events() -> None:
    """The vectorised parents of properly nested events of some length (ties of start and end
    included, as µs-rounded traces have them) are those of the plain walk: the innermost open
    enclosing event."""
    from tui_prof.profiles.timeline.nesting import order

    rng = np.random.default_rng(7)
    for _ in range(300):
        spans: list[tuple[float, float]] = []

        def nest(
            lo: float, hi: float, depth: int, spans: list[tuple[float, float]] = spans
        ) -> None:
            t = lo
            while t < hi and depth < 6 and rng.random() < 0.8:
                a = t + float(rng.integers(0, 3))
                b = min(hi, a + float(rng.integers(1, 12)))
                if a >= b:
                    break
                spans.append((a, b))
                nest(a, b, depth + 1, spans)
                t = b + float(rng.integers(0, 2))

        nest(0.0, 100.0, 0)
        start = np.array([a for a, _ in spans], dtype=np.float64)
        end = np.array([b for _, b in spans], dtype=np.float64)
        o = order(start, end)
        start, end = start[o], end[o]
        want: list[int] = []
        stack: list[int] = []
        for i in range(len(start)):
            while stack and end[stack[-1]] < end[i]:
                stack.pop()
            while stack and start[i] >= end[stack[-1]]:
                stack.pop()
            want.append(stack[-1] if stack else -1)
            stack.append(i)
        assert parents(start, end).tolist() == want, spans


def test_the_innermost_event_wins_its_cells() -> None:
    """A host op [0, 100] with a data-loader call [20, 60] inside: the call's cells show input,
    though the op covers them as fully (counting both levels, the op won every cell)."""
    t = make_track(
        "t",
        "host",
        "g",
        np.array([0.0, 20.0]),
        np.array([100.0, 60.0]),
        np.arange(2, dtype=np.int32),
        np.array([HOST, INPUT]),
    )
    bins = bin_track(t, 0.0, 100.0, 10)
    assert bins.tolist() == [HOST] * 2 + [INPUT] * 4 + [HOST] * 4


@needs_shared
def test_data_loader_shows_under_profiler_step_on_a_2021_trace() -> None:
    """The plugin's V100 sample: `ProfilerStep#N` is an `Operator` spanning the whole main
    thread; the `enumerate(DataLoader)#…` call inside it must own its cells."""
    tl = load_timeline(PLUGIN_TRACE)
    for n in tl.step_numbers():
        st = tl.step(n)
        main_thread = max((t for t in st.tracks if t.kind == "host"), key=lambda t: len(t.start))
        loader = [
            i
            for i in range(len(main_thread.start))
            if st.event_name(int(main_thread.nid[i])).startswith("enumerate(DataLoader)")
        ]
        assert loader, n
        assert not any(st.event_name(int(x)).startswith("ProfilerStep#") for x in main_thread.nid)
        bins = bin_track(main_thread, 0.0, st.duration_us, 100)
        load_us = float(sum(main_thread.end[i] - main_thread.start[i] for i in loader))
        # input cells lie under the loader's calls, most of their share (ops inside a call
        # win where they run longest)
        cell = st.duration_us / 100
        under = [
            any(
                main_thread.start[i] < (c + 1) * cell and main_thread.end[i] > c * cell
                for i in loader
            )
            for c in np.flatnonzero(bins == INPUT)
        ]
        assert all(under), n
        assert len(under) >= 0.8 * 100 * load_us / st.duration_us, n


def test_kineto_shapes_and_dtypes_are_the_recorded_args() -> None:
    """Each aten::mm's detail is its `Input type` and `Input Dims` side by side, as the file
    records them."""
    path = next((SAMPLES / "torch_cuda_float32").rglob("*.pt.trace.json*"))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        raw = json.load(f)["traceEvents"]
    want = {
        ", ".join(
            f"{t}[{', '.join(map(str, d))}]"
            for t, d in zip(a["Input type"], a["Input Dims"], strict=True)
        )
        for e in raw
        if e.get("name") == "aten::mm" and (a := e.get("args", {})).get("Input Dims")
    }
    assert want
    tl = load_timeline(SAMPLES / "torch_cuda_float32")
    seen = set()
    for n in tl.step_numbers():
        st = tl.step(n)
        for k, t in enumerate(st.tracks):
            for i in np.flatnonzero([st.event_name(int(x)) == "aten::mm" for x in t.nid]):
                seen.add(st.info(k, int(i)))
    assert seen and seen <= want
    assert all(re.fullmatch(r"float\[\d+, \d+\], float\[\d+, \d+\]", s) for s in seen)


@pytest.mark.parametrize("path", [SAMPLES / "torch_cuda_float32", SAMPLES / "jax_cuda_float32"])
def test_a_kernel_knows_its_launch_and_op_and_the_op_its_kernels(path: Path) -> None:
    tl = load_timeline(path)
    st = tl.step(tl.slowest())
    checked = 0
    for k, t in enumerate(st.tracks):
        if t.kind != "device":
            continue
        for i in range(len(t.start)):
            by = st.launched_by(k, i)
            if by is None:
                continue
            (h, call), op = by
            host = st.tracks[h]
            assert host.corr[call] == t.corr[i]
            if op is None:
                continue
            # the op encloses the call, and lists this kernel among those it launched
            assert host.start[op] <= host.start[call] and host.end[call] <= host.end[op]
            assert (k, i) in st.launched(h, op)
            checked += 1
    assert checked >= 5


def test_json_events_carry_inputs_and_launch_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(SAMPLES / "torch_cuda_float32"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    events = [e for t in doc["tracks"] for e in t["events"]]
    assert any(e["name"] == "aten::mm" and "float[" in e.get("inputs", "") for e in events)
    host = {
        e["launch_id"]
        for t in doc["tracks"]
        if t["kind"] == "host"
        for e in t["events"]
        if "launch_id" in e
    }
    device = {
        e["launch_id"]
        for t in doc["tracks"]
        if t["kind"] == "device"
        for e in t["events"]
        if "launch_id" in e
    }
    assert device and device <= host


@needs_shared
def test_tf_kernels_name_their_op() -> None:
    """The 2020 TF 8-GPU profile: a kernel's `level 0` annotation names its TF op."""
    tl = load_timeline(SHARED_TRACES / "tf_gpu_multi_worker")
    st = tl.step(tl.slowest())
    infos = [
        st.info(k, i)
        for k, t in enumerate(st.tracks)
        if t.kind == "device"
        for i in range(len(t.start))
    ]
    named = [s for s in infos if s.startswith("op replica_")]
    assert len(named) >= 0.5 * len(infos)


@pytest.mark.parametrize("width", [40, 53, 80, 120])
@pytest.mark.parametrize("name", ["jax_cuda_float32", "torch_cuda_float32"])
def test_narrow_views_keep_tracks_and_glyphs_apart(name: str, width: int) -> None:
    """At 80×24 the tab is ~53 cells wide: two tracks never read the same, and every glyph
    drawn is in the legend."""
    from tui_prof.render.timeline import timeline_lines

    tl = load_timeline(SAMPLES / name)
    st = tl.step(tl.slowest())
    lines = [t.plain for t in timeline_lines(st, width)]
    rows = lines[1 : 1 + len(st.tracks)]
    labels = [r.split("│")[0] for r in rows]
    assert len(set(labels)) == len(labels), labels
    drawn = {ch for r in rows for ch in r.split("│", 1)[1]} - {" "}
    legend = lines[-1]
    assert all(g in legend for g in drawn), (drawn, legend)
    assert all(len(line) <= width for line in lines)


@needs_shared
def test_compare_median_names_the_category_that_grew(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The V100 sample's slowest step against its median: the main thread grew by its input
    (the DataLoader), by as much as the input's own time there grew."""
    from tui_prof.profiles.timeline.compare import compare_median, own_time

    tl = load_timeline(PLUGIN_TRACE)
    c = compare_median(tl)
    top = c.tracks[0]
    assert top.kind == "host" and top.category == "input" and top.category_delta_us > 0
    slow = next(t for t in c.slow.tracks if t.name == top.name)
    median = next(t for t in c.median.tracks if t.name == top.name)
    assert top.category_delta_us == pytest.approx(
        float(own_time(slow)[INPUT] - own_time(median)[INPUT])
    )
    assert main(["timeline", str(PLUGIN_TRACE), "--compare-median", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert f"{top.name}  (input +{top.category_delta_us / 1000:.2f} ms)" in out
    assert all(len(line) <= 100 for line in out.splitlines())


# Track names as the profiles here write them: XLA's streams on AMD and NVIDIA GPUs (a use after
# the number), Kineto's streams and threads, host threads with long ids, a TPU core's lines.
TRACK_NAMES = [
    "GPU 0 Stream #16(Kernel)",
    "GPU 0 Stream #17(Kernel)",
    "GPU 6 Stream #143(MemcpyH2D)",
    "GPU 6 Stream #144(MemcpyD2H)",
    "GPU 6 Stream #142",
    "GPU 0 stream 7",
    "GPU 0 stream 13",
    "Stream #14(Compute)",
    "tf_pjrt_client_thread/1829982129071201",
    "Host Threads/1083",
    "Host Threads/1565",
    "py_xla_execute/904895758363866",
    "thread 575",
    "TPU 0 XLA Ops",
    "TPU 0 XLA Modules",
    "TPU 1 XLA Ops",
    "TPU 1 XLA TraceMe",
]


@pytest.mark.parametrize("cells", [8, 10, 13, 16, 22])
def test_track_labels_fit_and_never_read_the_same(cells: int) -> None:
    """At 80 columns the AMD JAX profile's two streams read `GPU 0…Kernel)` both: the number
    that tells them apart sat before a `(Kernel)` the cut kept instead."""
    from tui_prof.render.timeline import track_label

    labels = [track_label(n, cells) for n in TRACK_NAMES]
    assert all(len(x) <= cells for x in labels)
    assert len(set(labels)) == len(labels), labels
    assert track_label("GPU 0 Stream #16(Kernel)", 13) == "GPU 0 #16"
