"""The timeline store: a session read once opens again from disk, mapped, with the same events;
a changed file or a damaged store is read afresh."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from tui_prof.profiles.load import session_of
from tui_prof.profiles.timeline import store
from tui_prof.profiles.timeline.load import load_timeline
from tui_prof.profiles.timeline.model import Timeline

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _same(a: Timeline, b: Timeline) -> None:
    assert a.names == b.names and a.infos == b.infos
    assert [s.name for s in a.sources] == [s.name for s in b.sources]
    for sa, sb in zip(a.sources, b.sources, strict=True):
        assert sa.steps == sb.steps
        for ta, tb in zip(sa.tracks, sb.tracks, strict=True):
            assert (ta.name, ta.kind, ta.group, ta.longest) == (
                tb.name,
                tb.kind,
                tb.group,
                tb.longest,
            )
            for col in store.COLUMNS:
                assert np.array_equal(getattr(ta, col), getattr(tb, col)), col


def test_a_stored_timeline_opens_mapped_with_the_same_events(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "torch_cuda_float32", run)
    session = session_of(run)
    assert store.load(session) is None
    first = load_timeline(session)
    assert isinstance(first.sources[0].tracks[0].start, np.memmap)  # the read is let go
    again = store.load(session)
    assert again is not None
    _same(first, again)
    st_a, st_b = first.step(first.slowest()), again.step(again.slowest())
    assert st_a.duration_us == st_b.duration_us
    assert [len(t.start) for t in st_a.tracks] == [len(t.start) for t in st_b.tracks]
    # a host file changed (mtime): read afresh, not the old store
    trace = next(run.rglob("*.pt.trace.json*"))
    os.utime(trace, ns=(trace.stat().st_atime_ns, trace.stat().st_mtime_ns + 10**9))
    assert store.load(session_of(run)) is None


def test_a_damaged_store_is_read_afresh(tmp_path: Path) -> None:
    session = session_of(SAMPLES / "jax_cuda_float32")
    first = load_timeline(session)
    where = store._dir(session)
    (where / "index.json").write_text("{not json")
    assert store.load(session) is None
    again = load_timeline(session)
    _same(first, again)


def test_a_store_left_half_written_by_a_killed_process_is_swept(tmp_path: Path) -> None:
    """A process killed while it wrote (its spill files can be hundreds of MB) leaves its
    temporary directory; the next writer removes it once untouched for hours, not before (it
    may be another process's, still writing)."""
    old = tmp_path / f"{store.TMP_PREFIX}abc.tmp"
    fresh = tmp_path / f"{store.TMP_PREFIX}def.tmp"
    for d in (old, fresh):
        d.mkdir()
        (d / "rank1.rows").write_bytes(b"\0" * 64)
    hours_ago = old.stat().st_mtime - store.STALE_S - 60
    for p in (old, old / "rank1.rows"):
        os.utime(p, (hours_ago, hours_ago))
    (tmp_path / "other.tmp").mkdir()  # not a store's: left alone
    store.sweep(tmp_path)
    assert not old.exists() and fresh.exists() and (tmp_path / "other.tmp").exists()
