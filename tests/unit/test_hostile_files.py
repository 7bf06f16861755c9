"""Hostile files: each is one line naming the file, never a crash, a traceback or a NaN in JSON.

Each generator is a few lines; the XSpace ones damage a real sample profile."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli, sample_session

from tui_prof.profiles.xplane.proto import XSpace

TF22_SESSION = REPO / "tests" / "data" / "legacy_tf22" / "plugins" / "profile" / "GPU-input-bound"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def _one_line(r: subprocess.CompletedProcess[str], name: str, why: str) -> None:
    assert r.returncode in (1, 2), (r.returncode, r.stderr)  # diff: 2, as for any bad input
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert name in r.stderr and why in r.stderr, r.stderr


def _xspace(tmp: Path, damage: Callable[[Any], None]) -> Path:  # an XLine (built at run time)
    src = next(sample_session("keras_fit_float32").glob("vm.xplane.pb"))
    space = XSpace()
    space.ParseFromString(src.read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            damage(line)
    d = tmp / "run" / "plugins" / "profile" / "s"
    d.mkdir(parents=True)
    (d / "vm.xplane.pb").write_bytes(space.SerializeToString())
    return d


def _negate(line: Any) -> None:
    for e in line.events:
        e.offset_ps = -e.offset_ps


def test_a_file_that_crashes_the_converter_is_one_line(tmp_path: Path) -> None:
    """Negated offsets make xprof's native code segfault: its process dies, tuiprof does not."""
    d = _xspace(tmp_path, _negate)
    for args in (["summary"], ["summary", "--fallback"], ["summary", "--json"], ["diff"]):
        extra = [str(sample_session("keras_fit_float32"))] if args == ["diff"] else []
        r = _cli(*args, str(d), *extra)
        _one_line(r, "vm.xplane.pb", "converter crashed reading it (killed by SIGSEGV)")


def test_a_timestamp_of_2_to_the_62(tmp_path: Path) -> None:
    d = _xspace(tmp_path, lambda line: setattr(line, "timestamp_ns", 2**62))
    for args in (["summary"], ["summary", "--fallback"]):
        _one_line(_cli(*args, str(d)), "vm.xplane.pb", "timestamp of 4611686018427387904 ns")


def _trace(tmp: Path, event: str) -> Path:
    path = tmp / "w.pt.trace.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + event + "]}")
    return path


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (
            '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 2, '
            '"args": ' + "[" * 200_000 + "]" * 200_000 + "}",
            "nested too deeply",
        ),
        (
            '{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1, '
            '"dur": "Infinity"}',
            "damaged times",
        ),
        (
            '{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1, '
            '"dur": 1e300}',
            "damaged times",
        ),
    ],
    ids=["deep", "infinity", "absurd"],
)
def test_bad_numbers_and_nesting_in_a_pytorch_trace(tmp_path: Path, event: str, why: str) -> None:
    path = _trace(tmp_path, event)
    for args in (["summary"], ["summary", "--json"], ["diff", str(path)]):
        _one_line(_cli(*args, str(path)), "w.pt.trace.json", why)


def test_a_legacy_overview_with_nan_step_times(tmp_path: Path) -> None:
    from xprof.protobuf import input_pipeline_pb2, overview_page_pb2

    d = tmp_path / "plugins" / "profile" / "s"
    shutil.copytree(TF22_SESSION, d)
    page = overview_page_pb2.OverviewPage()
    page.ParseFromString((d / "localhost.overview_page.pb").read_bytes())
    for packed in page.input_analysis.step_details:
        step = input_pipeline_pb2.PerGenericStepDetails()
        packed.Unpack(step)
        step.step_time_ms = float("nan")
        packed.Pack(step)
    (d / "localhost.overview_page.pb").write_bytes(page.SerializeToString())
    _one_line(_cli("summary", str(d)), "localhost.overview_page.pb", "a step of nan ms")


def test_json_is_strict() -> None:
    """Python's json parses NaN; a strict parser does not. No token of the kind may appear."""
    r = _cli("summary", "--json", str(sample_session("keras_fit_float32")))
    assert r.returncode == 0
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON: {c}"))


def test_a_spec_nested_100k_deep_is_one_line(tmp_path: Path) -> None:
    from tui_prof.experiments.spec import SpecError, load_spec

    spec = tmp_path / "deep.toml"
    spec.write_text('name = "x"\ncommand = ["true"]\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(SpecError, match="nested too deeply"):  # what the `r` dialog shows too
        load_spec(spec)
    r = _cli("run", "--headless", str(spec))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nested too deeply" in r.stderr


def _experiment(tmp: Path, value: float) -> Path:
    (tmp / "job.py").write_text(
        "import json, os\n"
        "with open(os.environ['TUIPROF_METRICS_FILE'], 'a') as f:\n"
        f"    f.write(json.dumps({{'metric': 'big', 'value': {value!r}}}) + '\\n')\n"
    )
    out = tmp / "out"
    job = f"{sys.executable} {tmp / 'job.py'}"
    r = _cli("run", "--headless", "--repeats", "2", "--output", str(out), "--variant",
             f"a={job}", "--variant", f"b={job}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out


def test_a_metric_of_1e308_is_left_out_of_compare(tmp_path: Path) -> None:
    out = _experiment(tmp_path, 1e308)
    for fmt in ([], ["--json"], ["--markdown"]):
        r = _cli("compare", *fmt, str(out))
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "non-finite big, or one beyond" in r.stdout


def test_a_damaged_row_in_the_store(tmp_path: Path) -> None:
    import sqlite3

    out = _experiment(tmp_path, 1.0)
    with sqlite3.connect(out / "experiment.sqlite") as db:
        db.execute("UPDATE runs SET metrics = '{bad' WHERE run_id = 'a-r0'")
    r = _cli("compare", str(out))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    r = _cli("run", "--resume", str(out))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    from tui_prof.experiments.store import load_experiment

    runs = {x.run_id: x for x in load_experiment(out).runs}
    assert runs["a-r0"].status == "finished" and runs["a-r0"].metrics["big"] == 1.0  # run again


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--log", "/"], "is a directory"),
        (["--log", "/nonexistent-dir/x.log"], "no such directory"),
        (["--timeout", "nan"], "--timeout must be positive (seconds), got nan"),
        (["--every", "nan"], "--every must be positive (seconds), got nan"),
    ],
)
def test_capture_options_are_checked_first(args: list[str], why: str) -> None:
    r = _cli("capture", "127.0.0.1:1", *args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


def test_diff_limit_cannot_be_negative() -> None:
    r = _cli("diff", "--limit", "-5", "a", "b")
    assert r.returncode == 2 and "--limit must be 0" in r.stderr


def test_inflating_stops_at_the_bound_and_says_so(tmp_path: Path) -> None:
    """A gzip bomb: ~60 MB of events from a file of a few hundred KB. With the bound at 16 MB
    (as on a machine with 48 MB free) reading stops there, in bounded memory, with one line."""
    import gzip

    from kineto_factory import two_steps

    from tui_prof.model import ProfileError
    from tui_prof.profiles.kineto import stream

    event = (
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 5, "dur": 1},'
    )
    doc = two_steps().write(tmp_path / "t.json").read_text()
    head, tail = doc.split('"traceEvents": [', 1)
    bomb = tmp_path / "w.pt.trace.json.gz"
    with gzip.open(bomb, "wt", compresslevel=1) as f:
        f.write(head + '"traceEvents": [')
        f.writelines(event for _ in range(600_000))
        f.write(tail)
    assert bomb.stat().st_size < 2_000_000
    s = stream.TraceStream(bomb, max_unpacked=16 * 2**20)
    with pytest.raises(ProfileError, match=r"more than 16.0 MB of JSON \(unpacked\); stopped"):
        for _ in s.batches():
            pass
    assert s.unpacked <= 16 * 2**20 + stream.READ_BYTES
    assert stream.unpack_limit() >= stream.MIN_UNPACK_LIMIT


def test_a_category_longer_than_its_step_draws_a_bar_of_the_width() -> None:
    """A damaged legacy overview can hold 17,708,812 ms of input in a 0.001 ms step: the bar
    was millions of cells long (the memory went); it is the console's width."""
    import io

    from rich.console import Console

    from tui_prof.model import StepBreakdown
    from tui_prof.render.summary import BreakdownBars

    out = io.StringIO()
    console = Console(file=out, width=80)
    console.print(BreakdownBars([StepBreakdown(1, 0.001, {"input": 17_708_812.0})]))
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80


def test_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    shutil.copytree(
        sample_session("keras_fit_float32"), tmp_path / "run" / "plugins" / "profile" / "s"
    )
    (tmp_path / "loopA").symlink_to("loopB")
    (tmp_path / "loopB").symlink_to("loopA")
    r = _cli("summary", str(tmp_path))
    assert r.stderr.count("symbolic links") == 1, r.stderr


def test_a_file_the_converter_refuses_leaves_the_next_files_answers_in_step(
    tmp_path: Path,
) -> None:
    """The converter's tools are asked for at once; where one fails, the answers to the others
    are still read, so the next file gets its own."""
    from tui_prof.model import ProfileError
    from tui_prof.profiles.xplane import converter

    good = sorted(sample_session("keras_fit_step_markers").glob("*.xplane.pb"))
    before = converter.convert(good)
    bad = tmp_path / "junk.xplane.pb"
    bad.write_bytes(b"\x0a\x03abc" * 100)  # a protobuf field, but no XSpace in it
    with pytest.raises(ProfileError):
        converter.convert([bad])
    assert converter.convert(good) == before
