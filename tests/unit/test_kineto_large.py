"""Large PyTorch traces: streamed in small parts equals read whole, decoded in worker processes
equals decoded here, the realistic generator's copies are steps of their own, and leaving a
session stops a large read at once."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import io
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO, SAMPLES, SHARED_TRACES, settle
from kineto_factory import SGEMM, Trace, two_steps
from rich.console import Console
from textual.widgets import Static

from tui_prof.profiles.discover import Session
from tui_prof.profiles.kineto import workers
from tui_prof.profiles.kineto.columns import Host
from tui_prof.profiles.kineto.ops import _climb, _roots, _tree_order
from tui_prof.profiles.kineto.ranges import Ranges, partition, spans_union, union
from tui_prof.profiles.kineto.rank import RankResult, analyse_file
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.load import summarize_session
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.widgets.profile_tree import ProfileTree

TRACES = sorted(SAMPLES.glob("torch*/*.pt.trace.json.gz")) + sorted(
    SHARED_TRACES.glob("kineto*/*.json.gz")
)
A100 = SHARED_TRACES / "kineto" / "a100_rank0.json.gz"


def _facts(r: RankResult) -> dict[str, object]:
    d = dataclasses.asdict(r)
    d["ops"] = (r.ops.ops, r.ops.kernels, r.ops.compute_us, r.ops.compute_16bit_us)
    return d


@pytest.mark.parametrize("path", TRACES, ids=[p.parent.name + "/" + p.name[:24] for p in TRACES])
def test_a_trace_streamed_in_small_parts_equals_it_read_whole(path: Path) -> None:
    """Every number, to the bit: parts of 64 kB (hundreds of them) vs one part of the whole file."""
    whole = analyse_file(path, "r", chunk_bytes=2**31)
    parts = analyse_file(path, "r", chunk_bytes=64 * 1024)
    assert whole.breakdowns and _facts(parts) == _facts(whole)


@pytest.mark.parametrize("path", TRACES, ids=[p.parent.name + "/" + p.name[:24] for p in TRACES])
def test_a_trace_decoded_in_worker_processes_equals_it_decoded_here(path: Path) -> None:
    """Every number, to the bit: 256 kB parts decoded by two worker processes (every part but
    the first and last) vs all of them in this process."""
    here = analyse_file(path, "r", workers=0)
    spawned: list[int] = []
    real = workers._Pool.__init__

    def pool(self: workers._Pool, *a: object) -> None:
        real(self, *a)  # type: ignore[arg-type]
        spawned.extend(p.pid for p in self.procs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers._Pool, "__init__", pool)
        there = analyse_file(path, "r", workers=2, parallel_from=0, chunk_bytes=256 * 1024)
    assert len(spawned) == 2 and here.breakdowns and _facts(there) == _facts(here)
    for pid in spawned:  # killed and reaped when the read ended
        assert not Path(f"/proc/{pid}").exists()


def test_pieces_go_to_the_workers_as_they_came_not_copied_into_the_buffer() -> None:
    """Past the parts read here, each inflated piece is cut at its last event boundary and
    handed over with the previous part's tail in front (no copy of the piece into the part
    buffer, which was a third of the reading thread's CPU): most parts go that way, with the
    same result as a read in this process."""
    path = TRACES[0]
    here = analyse_file(path, "r", workers=0)
    handed: list[int] = []
    real = TraceStream._piece_part

    def counted(self: TraceStream, piece: bytes, close: int, comma: int) -> Any:
        handed.append(len(piece))
        return real(self, piece, close, comma)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TraceStream, "_piece_part", counted)
        stream_parts: list[int] = []
        init = TraceStream.__init__

        def kept(self: TraceStream, *a: Any, **k: Any) -> None:
            init(self, *a, **k)
            stream_parts.append(id(self))

        mp.setattr(TraceStream, "__init__", kept)
        there = analyse_file(path, "r", workers=2, parallel_from=0, chunk_bytes=256 * 1024)
    assert len(stream_parts) == 1, "the read started over in this process"
    assert len(handed) >= 4 and _facts(there) == _facts(here)


def test_a_cut_inside_a_name_sends_the_read_back_to_this_process(tmp_path: Path) -> None:
    """Op names with `}, {` in them: the last such pair in a part is often not between two
    events; the worker that gets it fails to decode it, and the read starts over here, with
    the same result as a read that never used workers."""
    t = Trace()
    for n in range(120):  # 0.4 MB: past the 256 kB read before the first part
        t.step(n, n * 1000.0, 900.0)
        for i in range(15):
            t.op("aten::f({x}, {y})", n * 1000.0 + i * 50, 40.0)
    path = t.write(tmp_path / "w.1.pt.trace.json")
    streams: list[object] = []

    class Counted(TraceStream):  # the class workers.py starts, counted
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            streams.append(self)

    here = analyse_file(path, "r", workers=0, chunk_bytes=4096)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers, "TraceStream", Counted)
        there = analyse_file(path, "r", workers=2, parallel_from=0, chunk_bytes=4096)
    assert len(streams) == 1, "no part was cut inside a name: the test tests nothing"
    assert len(there.breakdowns) == 120 and _facts(there) == _facts(here)


def test_a_part_or_result_is_handed_over_without_waiting_for_the_other_side_to_read_it() -> None:
    """What keeps the workers busy: sending 8 MB returns while nobody reads (through a pipe it
    waited 64 kB at a time for the reader, and two workers used one core between them), and
    what arrives is what was sent, in order."""
    mine, theirs = socket.socketpair()
    with mine, theirs:
        parts = [bytes(range(256)) * (2**15 + k) for k in range(3)]  # 8 MB and a little
        done = threading.Event()

        def send() -> None:
            for p in parts:
                workers._send(mine, [p[:100], memoryview(p)[100:]])
            done.set()

        threading.Thread(target=send, daemon=True).start()
        assert done.wait(10), "a send waited for the reader"
        for p in parts:
            got = workers._receive(theirs)
            assert got is not None
            with got:
                assert got[:] == p
        mine.close()
        assert workers._receive(theirs) is None  # the other side ended


@pytest.mark.parametrize("python", ["/nonexistent/python", "/bin/false"])
def test_workers_that_cannot_start_or_end_at_once_leave_the_read_to_this_process(
    python: str,
) -> None:
    """No interpreter to start, or one that exits before reading its part: the same result,
    read in this process."""
    path = TRACES[0]
    here = analyse_file(path, "r", workers=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "executable", python)
        there = analyse_file(path, "r", workers=2, parallel_from=0, chunk_bytes=256 * 1024)
    assert here.breakdowns and _facts(there) == _facts(here)


def test_the_union_of_spans_without_their_array_equals_union_to_the_bit() -> None:
    """spans_union (the lean one the role split uses for runtime calls: spans sorted in place
    as complex numbers, equal starts in any order) against union on thousands of random sets:
    nested, touching, zero-length, repeated and unsorted spans, epoch-sized times shifted by a
    base, every subset a mask picks (copied first, or picked by spans_union itself)."""
    rng = np.random.default_rng(7)
    for _ in range(3000):
        n = int(rng.integers(0, 50))
        base = 1.7e15 + float(rng.integers(0, 1000))
        start = base + np.round(rng.uniform(0, 1e5, n), int(rng.integers(0, 3)))
        dur = np.round(rng.exponential(rng.choice([0.5, 5.0, 3000.0]), n), 1) * (
            rng.random(n) > 0.2
        )
        rows = np.column_stack([start, start + dur])
        if rng.random() < 0.3:
            rows = rows[np.argsort(rows[:, 0], kind="stable")]
        where = rng.random(n) < 0.6
        assert np.array_equal(union(rows - base), spans_union(rows[:, 0], rows[:, 1], base))
        x = rows[where] - base
        assert np.array_equal(union(x), spans_union(rows[where, 0], rows[where, 1], base))
        assert np.array_equal(union(x), spans_union(rows[:, 0], rows[:, 1], base, where))


def _split_by_search(roles: list[Ranges], steps: Ranges) -> Ranges:
    """The role split as it was written first: each range's bounds found by binary search."""
    k, r = len(steps), len(roles)
    out = np.zeros((k, r + 1))
    bounds = np.unique(np.concatenate([steps.ravel(), *(x.ravel() for x in roles)]))
    m = len(bounds)
    seg = np.diff(bounds)
    owner = np.full(m - 1, r, dtype=np.int64)
    free = np.ones(m - 1, dtype=bool)
    for i, x in enumerate(roles):
        if len(x):
            lo, hi = np.searchsorted(bounds, x[:, 0]), np.searchsorted(bounds, x[:, 1])
            depth = np.cumsum(np.bincount(lo, minlength=m) - np.bincount(hi, minlength=m))[:-1]
            owner[free & (depth > 0)] = i
            free &= depth <= 0
    first, last = np.searchsorted(bounds, steps[:, 0]), np.searchsorted(bounds, steps[:, 1])
    for j in range(k):
        if last[j] > first[j]:
            out[j] = np.bincount(
                owner[first[j] : last[j]], weights=seg[first[j] : last[j]], minlength=r + 1
            )
    return out


def test_the_role_split_equals_its_binary_search_form_to_the_bit() -> None:
    """partition finds where each range's start and end lie from np.unique's inverse: the same
    split as searching the bounds for them, on random roles (empty, touching, nested, zero-length,
    across windows of steps) and steps, including steps that share a bound."""
    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(1, 40))
        starts = np.sort(np.round(rng.uniform(0, 1e4, n), int(rng.integers(0, 2))))
        steps = np.column_stack([starts, starts + np.round(rng.exponential(300, n))])
        roles = []
        for _ in range(int(rng.integers(0, 6))):
            m = int(rng.integers(0, 60))
            at = np.round(rng.uniform(-100, 1.2e4, m), int(rng.integers(0, 2)))
            roles.append(union(np.column_stack([at, at + rng.choice([0.0, 1.0, 50.0], m)])))
        window = int(rng.choice([1, 3, 16]))
        want = np.zeros((n, len(roles) + 1))
        for g in range(0, n, window):  # what partition gives each window: pieces inside it
            part = steps[g : g + window]
            a, b = float(part[:, 0].min()), float(part[:, 1].max())
            pieces = [np.clip(u[(u[:, 1] > a) & (u[:, 0] < b)], a, b) for u in roles]
            want[g : g + window] = _split_by_search(pieces, part)
        assert np.array_equal(partition(roles, steps, window), want)


def test_the_op_trees_row_order_equals_lexsort_to_the_row() -> None:
    """_tree_order (stable sorts by start and thread, then only tied rows by end and name)
    against np.lexsort of the four keys on random host rows: nearly sorted or shuffled, with
    many equal starts, equal ends and equal names, few threads or many."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(0, 400))
        ts = np.round(np.cumsum(rng.exponential(2.0, n)) * rng.choice([1.0, 0.1]), 0) + 1.7e15
        if rng.random() < 0.5:  # a few rows out of place, or all of them
            k = n if rng.random() < 0.3 else int(rng.integers(0, 5))
            at = rng.integers(0, max(n, 1), k)
            ts[at] = rng.permutation(ts[at])
        h = Host(
            thread=rng.integers(0, int(rng.choice([1, 3, 50])), n).astype(np.int32),
            ts=ts,
            end=ts + rng.choice([0.0, 1.0, 5.0, 7.5], n),
            nid=rng.integers(0, 6, n).astype(np.int32),
            flags=rng.choice(np.array([0, 1, 4, 5], dtype=np.int8), n),
            corr=np.full(n, -1.0),
        )
        want = np.lexsort((h.nid * 16 + h.flags, -h.end, h.ts, h.thread))
        assert np.array_equal(_tree_order(h), want)


def test_ops_found_to_have_no_parent_before_the_climb_have_none_after_it() -> None:
    """_roots gives -1 to the ops no earlier op on their thread is open at; the climb from there
    ends where the climb alone does, op by op, on random threads of nested, touching and
    overlapping spans (sorted as the op tree sorts them)."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 300))
        thread = np.sort(rng.integers(0, int(rng.choice([1, 2, 5])), n))
        ts = np.round(rng.uniform(0, rng.choice([50.0, 1000.0]), n))
        end = ts + np.round(rng.exponential(rng.choice([2.0, 30.0, 300.0]), n)) * (
            rng.random(n) > 0.1
        )
        order = np.lexsort((-end, ts, thread))
        thread, ts, end = thread[order], ts[order], end[order]
        start = np.arange(n, dtype=np.int32) - 1
        start[0] = -1
        start[1:][thread[1:] != thread[:-1]] = -1
        alone, rooted = start.copy(), start.copy()
        _climb(alone, alone, end, ts)
        _roots(rooted, end, ts)
        _climb(rooted, rooted, end, ts)
        assert np.array_equal(rooted, alone)


def test_the_sample_and_shared_traces_are_all_here() -> None:
    assert len([p for p in TRACES if p.is_relative_to(SAMPLES)]) >= 4
    if not A100.exists():
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    assert len(TRACES) >= 10


@pytest.mark.skipif(not A100.exists(), reason=f"public traces not found at {SHARED_TRACES}")
def test_realistic_generator_repeats_a_real_trace_as_steps_of_their_own(tmp_path: Path) -> None:
    out = tmp_path / "a100_x3.json.gz"
    r = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "make_realistic_kineto.py"),
            "--size-gb",
            str(3 * 25.7 / 1024),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "3 copies" in r.stdout, r.stdout
    assert out.read_bytes()[8] == 0  # gzip's "XFL" for levels 2-8: level 6, as the source
    ratio = len(gzip.decompress(out.read_bytes())) / out.stat().st_size
    assert 15 < ratio < 25  # compresses like a real trace, not like the 100:1 synthetic one
    one, three = summarize_session(A100), summarize_session(out)
    assert len(three.steps) == 3 * len(one.steps)
    assert [s.step for s in three.steps[:6]] == [550, 551, 552, 553, 554, 555]
    for k, s in enumerate(three.steps):  # each copy's steps: the source's, to rounding
        src = one.steps[k % len(one.steps)]
        assert s.step_time_ms == pytest.approx(src.step_time_ms, abs=1e-6)
    assert three.average is not None and one.average is not None
    assert three.average.breakdown_ms == pytest.approx(one.average.breakdown_ms, rel=1e-3)
    top1, top3 = one.top_ops[0], three.top_ops[0]
    assert (top3.name, top3.occurrences) == (top1.name, 3 * top1.occurrences)


def _write_big_gzip(path: Path, unpacked: int) -> None:
    """A large trace cheaply: one compressed block of kernel events as repeated gzip members."""
    events = [
        {"ph": "X", "cat": "kernel", "name": SGEMM + "<" + "float, " * 100 + ">", "pid": 0,
         "tid": 7, "ts": 1000 + i * 10, "dur": 5}
        for i in range(2000)
    ]  # fmt: skip
    block = json.dumps(events)[1:-1].encode() + b","
    head = b'{"schemaVersion": 1, "traceEvents": ['
    packed = gzip.compress(block, compresslevel=1)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(unpacked // len(block) + 1):
            f.write(packed)
        f.write(gzip.compress(b'{"ph": "i", "name": "end", "ts": 1}]}'))


def _inflating() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("inflate ")]


def _workers() -> list[int]:
    """This process's reading processes (workers.py) still alive (not yet reaped)."""
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
            cmd = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if f"PPid:\t{os.getpid()}\n" in text and b"kineto.workers" in cmd:
            out.append(int(status.parent.name))
    return out


async def test_leaving_a_large_session_stops_its_read_at_once(tmp_path: Path) -> None:
    """The read of a 1 GB trace (many seconds) stops within a moment of selecting another
    session: its thread and its worker processes are gone and the other session's numbers show."""
    big = tmp_path / "a_big" / "w.1700000000000.pt.trace.json.gz"
    big.parent.mkdir()
    _write_big_gzip(big, 2**30)
    two_steps().write(tmp_path / "b_small" / "w.1700000000001.pt.trace.json.gz")
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 30
        while not _inflating():  # the big session opens first and starts reading
            assert time.monotonic() < deadline, "the large read never started"
            await asyncio.sleep(0.05)
        while not _workers():  # past its first 64 MB: worker processes decode the rest
            assert time.monotonic() < deadline, "no worker process started"
            await asyncio.sleep(0.05)
        assert _inflating(), "1 GB was read at once: the file is too small to test"
        tree = app.screen.query_one(ProfileTree)
        for _ in range(10):  # j until the small session is selected
            await pilot.press("j")
            node = tree.cursor_node
            if (
                node is not None
                and isinstance(node.data, Session)
                and "b_small" in str(node.data.path)
            ):
                break
        # Timed from the selection, not from the first key: the keys themselves took 2-3 s on
        # a loaded machine (the stop itself, about 10 ms).
        left = time.monotonic()
        while _inflating() or _workers():
            assert time.monotonic() - left < 5, "the large read went on after leaving it"
            await asyncio.sleep(0.02)
        stopped = time.monotonic() - left
        await settle(pilot)
        w = app.screen.query_one("#headline", Static)
        console = Console(width=200, color_system=None, record=True, file=io.StringIO())
        console.print(w.content)
        headline = console.export_text()
        assert "ms per step" in headline, headline
    assert stopped < 5


def test_progress_follows_the_gzip_bytes_in_small_steps(tmp_path: Path) -> None:
    """A 100:1 file of 64 MB unpacked is 0.7 MB on disk: progress still moves in steps of the
    file's bytes (one per 4 MB unpacked), never backwards, and ends at the whole file."""
    path = tmp_path / "w.1.pt.trace.json.gz"
    _write_big_gzip(path, 64 * 2**20)
    seen: list[float] = []
    analyse_file(path, "r", progress=seen.append)
    assert len(seen) >= 16 and seen == sorted(seen)
    assert seen[0] < 0.1 and seen[-1] == 1.0
    assert max(b - a for a, b in itertools.pairwise(seen)) < 0.1


async def test_the_first_session_read_before_the_tui_shows_progress_and_stops_when_left(
    tmp_path: Path,
) -> None:
    """The launcher reads the first session in a child process before Textual loads: the screen
    shows that child's progress, and leaving the session stops it."""
    from tui_prof.profiles.prefetch import Prefetch

    big = tmp_path / "a_big" / "w.1700000000000.pt.trace.json.gz"
    big.parent.mkdir()
    _write_big_gzip(big, 2**30)
    two_steps().write(tmp_path / "b_small" / "w.1700000000001.pt.trace.json.gz")
    pre = Prefetch(tmp_path).start()
    app = TuiprofApp(tmp_path, prefetch=pre)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 30
        while pre.progress is None or pre.progress[0] <= 0:
            assert time.monotonic() < deadline, "no progress from the prefetching child"
            await asyncio.sleep(0.05)
        child = pre._child
        assert child is not None and child.poll() is None
        tree = app.screen.query_one(ProfileTree)
        for _ in range(10):
            await pilot.press("j")
            node = tree.cursor_node
            if (
                node is not None
                and isinstance(node.data, Session)
                and "b_small" in str(node.data.path)
            ):
                break
        left = time.monotonic()  # from the selection, as above
        while child.poll() is None:
            assert time.monotonic() - left < 5, "the child read on after the session was left"
            await asyncio.sleep(0.02)
        await settle(pilot)
        w = app.screen.query_one("#headline", Static)
        console = Console(width=200, color_system=None, record=True, file=io.StringIO())
        console.print(w.content)
        assert "ms per step" in console.export_text()
    assert pre.summary is None  # nothing analysed in the parent instead
