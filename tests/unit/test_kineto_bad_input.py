"""Bad PyTorch traces: one clear line each, and the other sessions still shown."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kineto_factory import SGEMM, two_steps

from tui_prof.model import ProfileError
from tui_prof.profiles.kineto.stream import decode_events
from tui_prof.profiles.load import summarize_session


def _fails(path: Path, match: str) -> str:
    with pytest.raises(ProfileError, match=match) as info:
        summarize_session(path)
    message = str(info.value)
    assert "\n" not in message and path.name in message
    return message


def test_truncated_gzip(tmp_path: Path) -> None:
    good = two_steps().write(tmp_path / "good.json.gz").read_bytes()
    bad = tmp_path / "w.1.pt.trace.json.gz"
    bad.write_bytes(good[: len(good) // 2])
    _fails(bad, "truncated gzip")


def test_truncated_plain_json(tmp_path: Path) -> None:
    good = two_steps().write(tmp_path / "good.json").read_bytes()
    bad = tmp_path / "w.1.pt.trace.json"
    bad.write_bytes(good[: len(good) // 2])
    _fails(bad, "truncated: the JSON ends")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "empty file"),
        (os.urandom(2048), "not valid JSON|not a valid gzip"),
        (b'{"learning_rate": 0.1, "epochs": 3}', "JSON, but not a trace"),
        (b"[1, 2, 3]", "JSON, but not a trace"),
        (b'{"traceEvents": {"ph": "X"}}', "traceEvents is not a list"),
        (gzip.compress(b"not json at all"), "not valid JSON"),
        (b"\x1f\x8b" + os.urandom(100), "not a valid gzip"),
    ],
    ids=["empty", "random", "json-object", "json-list", "events-not-a-list", "gz-text", "bad-gz"],
)
def test_not_a_trace(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(content)
    _fails(path, match)


def test_a_trace_of_one_enormous_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = two_steps()
    for i in range(20000):  # ~2.5 MB on one line, read in many parts
        t.op(f"aten::op{i % 50}", 30000 + i * 10, 5)
    path = t.write(tmp_path / "one_line.json", one_line=True)
    assert path.read_bytes().count(b"\n") == 0
    from tui_prof.profiles.kineto import stream

    reference = summarize_session(path)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 64 * 1024)  # many parts, all cut mid-line
    chunked = summarize_session(path)
    assert [s.step_time_ms for s in chunked.steps] == [s.step_time_ms for s in reference.steps]
    assert chunked.top_ops == reference.top_ops


def test_events_with_missing_or_malformed_fields(tmp_path: Path) -> None:
    t = two_steps()
    junk: list[Any] = [  # not only bad events: things that are not events at all
        {"ph": "X", "cat": "kernel", "name": SGEMM, "pid": 0, "tid": 7},  # no ts, no dur
        {"ph": "X", "cat": "cpu_op", "ts": 100},  # no name, no dur
        {"ph": "X", "cat": "cpu_op", "name": "aten::bad", "ts": "later", "dur": 5},  # wrong type
        {"ph": "X", "cat": "kernel", "name": SGEMM, "ts": 100, "dur": 5, "args": 7},  # args: int
        {"ph": "X"},
        {"name": "no phase"},
        "not an event",
        42,
    ]
    t.events += junk
    s = summarize_session(t.write(tmp_path / "messy.json"))
    assert [st.step for st in s.steps] == [1, 2]
    assert s.steps[0].step_time_ms == pytest.approx(10.0)
    assert any("skipped" in w and "missing or malformed" in w for w in s.warnings)


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "salvaged"])
def test_flow_events_are_dropped_and_any_other_phase_kept(typed: bool) -> None:
    """Events decode by their phase: flow events (40% of a Kineto trace, read by nothing) are
    not built and not counted as skipped; instants (memory events), other and unknown phases
    and events with no phase are kept as before, whether the part decodes typed or, with a
    malformed event in it, one event at a time."""
    memory = {"ph": "i", "name": "[memory]", "ts": 5, "pid": 1, "tid": 1, "args": {"Bytes": 64}}
    events: list[Any] = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1},
        {"ph": "s", "id": 3, "cat": "ac2g", "name": "ac2g", "ts": 1, "pid": 1, "tid": 1},
        {"ph": "f", "id": 3, "cat": "ac2g", "name": "ac2g", "ts": 2, "pid": 0, "tid": 7, "bp": "e"},
        {"ph": "t", "id": 3, "name": "step"},
        memory,
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "Z", "name": "a phase no format has"},
        {"name": "no phase"},
    ]
    if not typed:
        events.append({"ph": "X", "ts": "not a number"})
    got, skipped = decode_events(json.dumps(events).encode())
    assert [(e.ph, e.name) for e in got] == [
        ("X", "aten::mm"),
        ("i", "[memory]"),
        ("M", "process_name"),
        ("", "a phase no format has"),
        ("", "no phase"),
    ]
    assert skipped == (0 if typed else 1)
    assert got[1].args is not None and got[1].args.nbytes == 64
    assert pickle.loads(pickle.dumps(got)) == got  # as a worker process sends them back


def test_negative_and_overlapping_durations(tmp_path: Path) -> None:
    t = two_steps()
    t.op("aten::negative", 500, -300)
    # ranges on one thread that intersect without nesting (the plugin warns about these)
    t.op("aten::overlap_a", 30000, 1000)
    t.op("aten::overlap_b", 30500, 1000)
    t.x("kernel", SGEMM, 1300, -50, 0, 7)
    s = summarize_session(t.write(tmp_path / "neg.json"))
    assert any("negative durations" in w for w in s.warnings)
    assert all(o.total_self_time_us >= 0 for o in s.top_ops)
    assert all(v >= 0 for st in s.steps for v in st.breakdown_ms.values())
    host = {o.name: o.total_self_time_us for o in s.top_ops if o.where == "Host"}
    assert host["aten::overlap_a"] == pytest.approx(500)  # less the part b overlaps
    assert host["aten::overlap_b"] == pytest.approx(1000)


def _peak_rss_mb(code: str) -> tuple[subprocess.CompletedProcess[str], float]:
    # VmHWM is this process's own peak: ru_maxrss would also count the pages the child shared
    # with the (large) pytest process that forked it, until its exec.
    probe = code + textwrap.dedent(
        """
        import resource
        try:
            with open("/proc/self/status") as f:
                kb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        except (OSError, StopIteration):
            kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("PEAK", kb / 1024)
        """
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    peak = float(r.stdout.rsplit("PEAK", 1)[1]) if "PEAK" in r.stdout else -1.0
    return r, peak


def test_a_2gb_file_that_is_not_json_fails_fast_in_bounded_memory(tmp_path: Path) -> None:
    """A sparse 2 GB file: a trace's head, then zeros (no disk space used)."""
    path = tmp_path / "huge.pt.trace.json"
    with open(path, "wb") as f:
        f.write(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a"}, ')
        f.truncate(2 * 2**30)
    code = textwrap.dedent(
        f"""
        from tui_prof.model import ProfileError
        from tui_prof.profiles.load import summarize_session
        try:
            summarize_session({str(path)!r})
        except ProfileError as exc:
            print("ERROR", exc)
        """
    )
    r, peak = _peak_rss_mb(code)
    assert "ERROR" in r.stdout and "not valid JSON" in r.stdout, r.stdout + r.stderr
    assert 0 < peak < 600, f"peak RSS {peak:.0f} MB"


def _write_2gb_gzip(path: Path) -> int:
    """A real 2 GB trace, cheaply: one compressed block of events, written as repeated gzip
    members (a gzip file may hold many; readers unpack them as one stream)."""
    long_name = SGEMM + "<" + "float, " * 200 + ">"  # template kernel names run this long
    events = []
    for i in range(2000):
        ts = 1000 + i * 10
        events.append(
            {"ph": "X", "cat": "kernel", "name": long_name, "pid": 0, "tid": 7, "ts": ts, "dur": 5}
        )
    block = json.dumps(events)[1:-1].encode() + b","
    head = (
        json.dumps(
            {
                "schemaVersion": 1,
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": "ProfilerStep#1",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 50000,
                    }
                ],
            }
        ).encode()[:-2]
        + b","
    )
    tail = b'{"ph": "i", "name": "end", "ts": 1}]}'
    copies = (2 * 2**30) // len(block) + 1
    packed = gzip.compress(block, compresslevel=1)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(copies):
            f.write(packed)
        f.write(gzip.compress(tail))
    return copies * len(block)


@pytest.mark.slow
def test_a_2gb_trace_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.pt.trace.json.gz"
    unpacked = _write_2gb_gzip(path)
    assert unpacked >= 2 * 2**30
    code = textwrap.dedent(
        f"""
        from tui_prof.profiles.load import summarize_session
        s = summarize_session({str(path)!r})
        print("STEPS", len(s.steps), s.kernels[0].occurrences)
        """
    )
    r, peak = _peak_rss_mb(code)
    assert "STEPS 1" in r.stdout, r.stdout + r.stderr
    assert peak < 0.75 * unpacked / 2**20, f"peak RSS {peak:.0f} MB for {unpacked / 2**20:.0f} MB"


def test_cli_prints_the_good_sessions_and_one_line_per_bad_one(tmp_path: Path) -> None:
    two_steps().write(tmp_path / "good" / "w.1700000000000.pt.trace.json.gz")
    good = two_steps().write(tmp_path / "x.json.gz").read_bytes()
    for name in ("bad1", "bad2"):
        (tmp_path / name).mkdir()
    (tmp_path / "bad1" / "w.1700000000000.pt.trace.json.gz").write_bytes(good[:500])
    (tmp_path / "bad2" / "v.1700000000000.pt.trace.json").write_text('{"not": "a trace"}')
    (tmp_path / "x.json.gz").unlink()
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(tmp_path), "--json", "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [Path(s["path"]).parent.name for s in doc["sessions"]] == ["good"]
    assert len(doc["errors"]) == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in r.stderr
    assert any("truncated gzip" in line for line in lines)
    assert any("not a trace" in line for line in lines)


def test_a_bad_rank_does_not_hide_the_others(tmp_path: Path) -> None:
    run = tmp_path / "run"
    two_steps().write(run / "w0.1700000000000.pt.trace.json")
    (run / "w1.1700000000001.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [')
    from tui_prof.profiles.discover import discover

    session = discover(run).sessions[0]
    assert len(session.hosts) == 2
    s = summarize_session(session)
    assert [st.step for st in s.steps] == [1, 2]
    assert any(w.startswith("Could not read") and "w1" in w for w in s.warnings)
    (run / "w0.1700000000000.pt.trace.json").write_text("{}")
    with pytest.raises(ProfileError, match=r"no rank could be read: w0\..*; w1\."):
        summarize_session(session)
