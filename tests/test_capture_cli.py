"""`tuiprof capture` as scripts use it: exit codes, one line on stderr, the session dir last.

The successful captures (a real TensorFlow job) are in test_capture.py, which has to run them
inside a network namespace; these cases need no job and touch 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_capture import _cli, _free_port, _SilentListener


@pytest.fixture
def silent() -> Iterator[_SilentListener]:
    listener = _SilentListener()
    yield listener
    listener.close()


def test_capture_is_a_registered_subcommand() -> None:
    r = _cli(["capture", "--help"])
    assert r["rc"] == 0
    for flag in (
        "--duration-ms",
        "--logdir",
        "--host-tracer-level",
        "--retries",
        "--every",
        "--count",
        "--timeout",
    ):
        assert flag in r["stdout"], flag


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("nonsense", "bad address 'nonsense'"),
        ("localhost:99999", "ports are 1 to 65535"),
        ("localhost:0", "ports are 1 to 65535"),
        ("localhost:6009,:7", "bad address ':7'"),
        ("http://localhost:6009", "bad address"),
    ],
)
def test_bad_address_is_refused_before_trying(address: str, says: str, tmp_path: Path) -> None:
    r = _cli(["capture", address, "--logdir", str(tmp_path)])
    assert r["rc"] == 2
    assert r["stdout"] == ""
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r["stderr"]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--duration-ms", "0"], "--duration-ms must be positive"),
        (["--count", "3"], "--count needs --every"),
        (["--every", "0"], "--every must be positive"),
        (["--retries", "-1"], "cannot be negative"),
        (["--timeout", "0"], "--timeout must be positive"),
    ],
)
def test_bad_options_are_refused_before_trying(args: list[str], says: str, tmp_path: Path) -> None:
    r = _cli(["capture", "localhost:6009", "--logdir", str(tmp_path), *args])
    assert r["rc"] == 2
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r["stderr"]


def test_no_server_fails_fast_with_one_clear_line(tmp_path: Path) -> None:
    port = _free_port()
    r = _cli(["capture", f"127.0.0.1:{port}", "--duration-ms", "1000", "--logdir", str(tmp_path)])
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1, r["stderr"]
    assert f"no profiler server at 127.0.0.1:{port}" in lines[0]
    assert r["end"] - r["start"] < 10
    assert not list(tmp_path.rglob("*.xplane.pb"))


def test_no_server_in_a_series_ends_it_with_one_line(tmp_path: Path) -> None:
    port = _free_port()
    r = _cli(
        [
            "capture",
            f"127.0.0.1:{port}",
            "--every",
            "0.5",
            "--count",
            "3",
            "--duration-ms",
            "200",
            "--logdir",
            str(tmp_path),
        ]
    )
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and "no profiler server" in lines[0], r["stderr"]
    assert r["stdout"] == ""


def test_timeout_option_bounds_a_hung_server(silent: _SilentListener, tmp_path: Path) -> None:
    r = _cli(
        [
            "capture",
            f"127.0.0.1:{silent.port}",
            "--duration-ms",
            "500",
            "--timeout",
            "2",
            "--logdir",
            str(tmp_path),
        ]
    )
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and "within the time limit" in lines[0], r["stderr"]
    assert r["end"] - r["start"] < 8


@pytest.mark.slow
def test_silent_server_is_no_server_after_the_connect_timeout(
    silent: _SilentListener, tmp_path: Path
) -> None:
    r = _cli(
        ["capture", f"127.0.0.1:{silent.port}", "--duration-ms", "500", "--logdir", str(tmp_path)]
    )
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and "no profiler server answered" in lines[0], r["stderr"]
    assert r["end"] - r["start"] < 40
