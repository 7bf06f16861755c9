"""A Kineto session's timeline is built by its summary's own read: the store the summary writes
holds the same events as the timeline's own read, whether the parts were decoded here or in the
worker processes (a bad cut included), and the Timeline then opens without reading the file."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, SHARED_TRACES
from kineto_factory import Trace

from tui_prof.model import ProfileError
from tui_prof.profiles.discover import Session
from tui_prof.profiles.kineto import reader as kreader
from tui_prof.profiles.kineto import workers
from tui_prof.profiles.kineto.rank import analyse_file
from tui_prof.profiles.kineto.stream import TraceStream
from tui_prof.profiles.load import session_of, summarize_session
from tui_prof.profiles.timeline import INDEX_ENV, kineto, store
from tui_prof.profiles.timeline.load import load_timeline
from tui_prof.profiles.timeline.model import Timeline

TRACES = [
    SAMPLES / "torch_cuda_float32",
    SAMPLES / "torch_float32",
    SHARED_TRACES / "kineto_tb_plugin",
    SHARED_TRACES / "kineto" / "a100_rank0.json.gz",
    SHARED_TRACES / "kineto" / "mi250_minitoy_train.json.gz",
]


@pytest.fixture(autouse=True)
def _index_every_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The TUI's summaries index traces of 64 MB of JSON or more; here, every one."""
    monkeypatch.setenv(INDEX_ENV, "1")
    monkeypatch.setattr(kreader, "INDEX_FROM", 0)


def _same(a: Timeline, b: Timeline) -> None:
    assert a.names == b.names and a.infos == b.infos
    assert [s.name for s in a.sources] == [s.name for s in b.sources]
    for sa, sb in zip(a.sources, b.sources, strict=True):
        assert sa.steps == sb.steps
        assert [(t.name, t.kind, t.group, t.longest) for t in sa.tracks] == [
            (t.name, t.kind, t.group, t.longest) for t in sb.tracks
        ]
        for ta, tb in zip(sa.tracks, sb.tracks, strict=True):
            for col in store.COLUMNS:
                assert np.array_equal(getattr(ta, col), getattr(tb, col)), (ta.name, col)


def _own_read(session: Session) -> Timeline:
    """The timeline as its own read makes it (in this process: a small file)."""
    tl = kineto.read_session(session)
    assert tl is None  # stored
    kept = store.load(session)
    assert kept is not None
    shutil.rmtree(store._dir(session))
    return kept


def _read_in_workers(session: Session, path: Path, chunk: int) -> Timeline:
    """The summary's rank read with its parts decoded by two worker processes."""
    build = kineto.SessionRows(session)
    rows = build.rank()
    r = analyse_file(path, "r", workers=2, parallel_from=0, chunk_bytes=chunk, rows=rows)
    build.add_rank(session.hosts[0].host, rows, r.steps)
    assert build.finish() is None
    kept = store.load(session)
    assert kept is not None
    return kept


@pytest.mark.parametrize("where", TRACES, ids=[p.name[:24] for p in TRACES])
def test_the_summary_stores_the_timeline_its_own_read_would(where: Path) -> None:
    if not where.exists():
        pytest.skip(f"public traces not found at {SHARED_TRACES}")
    session = session_of(where)
    own = _own_read(session)
    assert not store.exists(session)
    summarize_session(session)
    assert store.exists(session)
    from_summary = store.load(session)
    assert from_summary is not None and own.sources[0].tracks
    _same(from_summary, own)
    shutil.rmtree(store._dir(session))
    _same(_read_in_workers(session, session.hosts[0].path, 256 * 1024), own)


def test_a_bad_cut_starts_the_rows_over_with_the_read(tmp_path: Path) -> None:
    """A part cut inside a name sends the read back to this process: the rows the workers
    had made are dropped, and the store equals a read that never used workers."""
    t = Trace()
    for n in range(120):
        t.step(n, n * 1000.0, 900.0)
        for i in range(15):
            t.op("aten::f({x}, {y})", n * 1000.0 + i * 50, 40.0)
    t.write(tmp_path / "w.1.pt.trace.json")
    session = session_of(tmp_path)
    own = _own_read(session)
    restarts: list[object] = []
    real = TraceStream

    def counted(*a: object, **k: object) -> object:
        restarts.append(1)
        return real(*a, **k)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers, "TraceStream", counted)
        got = _read_in_workers(session, session.hosts[0].path, 4096)
    assert restarts, "no part was cut inside a name: the test tests nothing"
    assert len(own.sources[0].steps) == 120
    _same(got, own)


def test_the_timeline_opens_from_the_summarys_store_without_reading_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = session_of(SAMPLES / "torch_cuda_float32")
    summarize_session(session)

    def no_read(*a: object, **k: object) -> None:
        raise AssertionError("read the trace again")

    monkeypatch.setattr(kineto, "read_session", no_read)
    tl = load_timeline(session)
    st = tl.step(tl.slowest())
    assert isinstance(tl.sources[0].tracks[0].start, np.memmap)
    assert any(t.kind == "device" for t in st.tracks) and st.duration_us > 0
    assert not list(store._dir(session).glob("*.rows"))  # the spill files are gone


def test_no_store_where_a_rank_cannot_be_read_or_markers_are_ignored(tmp_path: Path) -> None:
    """A timeline without one of its ranks, or with other steps than the timeline's, is not
    stored: the Timeline tab reads the session itself (and says what is wrong)."""
    run = tmp_path / "run"
    run.mkdir()
    src = next((SAMPLES / "torch_cuda_float32").glob("*.pt.trace.json.gz"))
    shutil.copy(src, run / "a.1.pt.trace.json.gz")
    (run / "b.2.pt.trace.json").write_text('{"traceEvents": [')
    session = session_of(run)
    assert len(session.hosts) == 2
    summary = summarize_session(session)
    assert any("Could not read" in w for w in summary.warnings)
    assert not store.exists(session)
    assert not list(store._dir(session).parent.glob("*.tmp"))  # nothing half-written left
    with pytest.raises(ProfileError):
        load_timeline(session)
    one = session_of(SAMPLES / "torch_float32")
    summarize_session(one, force_fallback=True)
    assert not store.exists(one)


def test_a_large_xspace_summary_stores_the_timeline_with_its_own_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session read by the streaming reader (large: here every session, by the threshold)
    writes the timeline with the steps it just found; the tab then neither finds them again
    nor reads the file, and has the events the timeline's own read has."""
    from tui_prof.profiles.timeline import xspace

    session = session_of(SAMPLES / "jax_cuda_float32")
    tl = xspace.read_session(session)
    assert tl is None
    own = store.load(session)
    assert own is not None
    shutil.rmtree(store._dir(session))
    monkeypatch.setenv("TUIPROF_LARGE_MB", "0.001")
    summary = summarize_session(session)
    assert summary.steps and store.exists(session)

    def no_read(*a: object, **k: object) -> None:
        raise AssertionError("read the profile again")

    monkeypatch.setattr(xspace, "find_steps", no_read)
    monkeypatch.setattr(xspace, "_file_tracks", no_read)
    got = load_timeline(session)
    _same(got, own)
    assert [s.step for s in summary.steps] == got.step_numbers()


def test_no_xspace_store_where_the_steps_are_a_named_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUIPROF_LARGE_MB", "0.001")
    session = session_of(SAMPLES / "jax_program_runs")
    summary = summarize_session(session, step_program="jit_train_step")
    assert summary.steps  # steps found, from the program's runs: not the timeline's
    assert not store.exists(session)


def test_small_traces_are_left_to_the_tab_by_their_json_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below INDEX_FROM bytes of JSON the summary writes no store (the tab reads a small
    session in about a second); a gzip file is measured by its JSON, not its compressed size."""
    session = session_of(SAMPLES / "torch_cuda_float32")
    path = session.hosts[0].path
    json_size = len(gzip.decompress(path.read_bytes()))
    assert kreader._json_bytes(session) == json_size > 3 * path.stat().st_size
    monkeypatch.setattr(kreader, "INDEX_FROM", json_size + 1)
    summarize_session(session)
    assert not store.exists(session)
    monkeypatch.setattr(kreader, "INDEX_FROM", json_size)  # over the compressed size
    summarize_session(session)
    assert store.exists(session)


def test_a_multi_rank_summary_stores_every_rank_with_shared_names(tmp_path: Path) -> None:
    """Ranks read one after another into one store: a source per rank, names shared, the same
    events as the timeline's own read."""
    from kineto_factory import write_rank

    run = tmp_path / "run"
    write_rank(run / "host_11.1700000000000.pt.trace.json.gz", 0, 1.0)
    write_rank(run / "host_12.1700000000013.pt.trace.json.gz", 1, 1.5)
    session = session_of(run)
    own = _own_read(session)
    summarize_session(session)
    stored = store.load(session)
    assert stored is not None and stored.source_names() == ["host_11", "host_12"]
    _same(stored, own)


def test_leaving_the_session_while_the_index_is_written_stops_it(tmp_path: Path) -> None:
    """Cancelled after the read, while the tracks are written: the summary stops (Cancelled)
    and leaves neither a store nor its temporary files."""
    import threading

    from tui_prof.model import Cancelled

    session = session_of(SAMPLES / "torch_cuda_float32")
    cancel = threading.Event()

    def progress(_f: float, what: str) -> None:
        if what == "indexing the timeline":
            cancel.set()

    with pytest.raises(Cancelled):
        summarize_session(session, cancel=cancel, progress=progress)
    assert cancel.is_set() and not store.exists(session)
    assert not list(store._dir(session).parent.glob(f"{store.TMP_PREFIX}*"))


def test_headless_summaries_index_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the TUI's INDEX_ENV (`tuiprof summary`, an experiment's runs), neither a PyTorch
    trace nor a large XSpace session is indexed: no time or disk for a view not opened."""
    monkeypatch.delenv(INDEX_ENV)
    monkeypatch.setenv("TUIPROF_LARGE_MB", "0.001")
    for name in ("torch_cuda_float32", "jax_cuda_float32"):
        session = session_of(SAMPLES / name)
        assert summarize_session(session).steps
        assert not store.exists(session), name
    monkeypatch.setenv(INDEX_ENV, "1")
    for name in ("torch_cuda_float32", "jax_cuda_float32"):
        session = session_of(SAMPLES / name)
        summarize_session(session)
        assert store.exists(session), name
