"""A file named as the path is read as its name says; sniffing (directory walks only) reads past
a large JSON head. The trace is the public A100 one, rewritten at test time to open as some
newer traces do (an H100 trace's 16 kB `metadata` object before `traceEvents`)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED_TRACES

from tui_prof.profiles.discover import discover
from tui_prof.profiles.kineto import detect

A100 = SHARED_TRACES / "kineto" / "a100_rank0.json.gz"
needs_a100 = pytest.mark.skipif(
    not A100.exists(), reason=f"public traces not found at {SHARED_TRACES}"
)


def _with_metadata_head(src: Path, dest: Path, head_bytes: int) -> Path:
    """`src` with a `metadata` object of about head_bytes put before its other keys."""
    body = gzip.decompress(src.read_bytes())
    meta = {
        "producer": "kineto",
        "hosts": [
            {"name": f"node-{i:03d}", "gpus": [f"NVIDIA H100 80GB HBM3 #{g}" for g in range(8)]}
            for i in range(head_bytes // 250 + 1)
        ],
    }
    head = b'{"metadata": ' + json.dumps(meta).encode() + b", "
    assert body.lstrip().startswith(b"{")
    dest.write_bytes(gzip.compress(head + body.lstrip()[1:], compresslevel=1))
    return dest


@needs_a100
def test_a_large_metadata_head_is_found_in_a_walk_and_read_when_named(tmp_path: Path) -> None:
    trace = _with_metadata_head(A100, tmp_path / "h100_step_trace.json.gz", 16 * 1024)
    head = detect.read_head(trace, detect.SNIFF_BYTES)
    assert b'"traceEvents"' not in head  # the first 16 kB alone cannot tell
    assert detect.sniff(trace) == (True, 0)
    (tmp_path / "config.json").write_text(json.dumps({"lr": [0.1] * 20_000}))  # big, no trace
    found = discover(tmp_path)
    assert [s.path for s in found.sessions] == [trace]

    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(trace), "--json", "--no-cache"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["sessions"][0]
    assert doc["framework"] == "pytorch" and len(doc["steps"]) == 5


def test_sniffing_reads_no_further_than_its_limit(tmp_path: Path) -> None:
    """A head that never reaches traceEvents costs at most SNIFF_LIMIT."""
    big = tmp_path / "huge.json"
    big.write_text('{"metadata": "' + "x" * (4 * detect.SNIFF_LIMIT) + '", "traceEvents": []}')
    assert len(detect.sniff_head(big)) == detect.SNIFF_LIMIT
    assert detect.sniff(big) == (False, None)
    small = tmp_path / "config.json"
    small.write_text(json.dumps({"lr": 0.1}))
    assert len(detect.sniff_head(small)) == small.stat().st_size  # one small read


def test_a_named_file_is_read_as_its_name_says(tmp_path: Path) -> None:
    """A named `*.json` is read as a trace (its reader says what is wrong, in one line); a name
    of no format tuiprof reads is 'not a profile'."""

    def cli(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tui_prof.cli", "summary", str(path)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )

    other = tmp_path / "other.json"
    other.write_text("{}")
    assert discover(other).sessions[0].format == "kineto"  # named: no sniffing
    r = cli(other)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "not a trace (no traceEvents)" in r.stderr
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    r = cli(text)
    assert r.returncode == 2 and "not a profile" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
