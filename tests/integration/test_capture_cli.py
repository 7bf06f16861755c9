"""`tuiprof capture` as scripts use it: exit codes, one line on stderr, the session dir last.

The successful captures (a real TensorFlow job) are in test_capture.py, which has to run them
inside a network namespace; these cases need no job and touch 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from capture_helpers import CliRun, SilentListener, free_port, timed_cli


@pytest.fixture
def silent() -> Iterator[SilentListener]:
    listener = SilentListener()
    yield listener
    listener.close()


def test_capture_is_a_registered_subcommand() -> None:
    r = timed_cli(["capture", "--help"])
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
    r = timed_cli(["capture", address, "--logdir", str(tmp_path)])
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
    r = timed_cli(["capture", "localhost:6009", "--logdir", str(tmp_path), *args])
    assert r["rc"] == 2
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r["stderr"]


def test_no_server_fails_fast_with_one_clear_line(tmp_path: Path) -> None:
    port = free_port()
    r = timed_cli(
        ["capture", f"127.0.0.1:{port}", "--duration-ms", "1000", "--logdir", str(tmp_path)]
    )
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1, r["stderr"]
    assert f"no profiler server at 127.0.0.1:{port}" in lines[0]
    assert r["end"] - r["start"] < 10
    assert not list(tmp_path.rglob("*.xplane.pb"))


def test_no_server_in_a_series_ends_it_with_one_line(tmp_path: Path) -> None:
    port = free_port()
    r = timed_cli(
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


def test_timeout_option_bounds_a_hung_server(silent: SilentListener, tmp_path: Path) -> None:
    r = timed_cli(
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
    # The 2 s limit, not the default (duration + 35 s); above it, two Pythons start (tuiprof and
    # its capture child), which a loaded machine can stretch to several seconds.
    assert r["end"] - r["start"] < 15


@pytest.mark.slow
def test_silent_server_is_no_server_after_the_connect_timeout(
    silent: SilentListener, tmp_path: Path
) -> None:
    r = timed_cli(
        ["capture", f"127.0.0.1:{silent.port}", "--duration-ms", "500", "--logdir", str(tmp_path)]
    )
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and "no profiler server answered" in lines[0], r["stderr"]
    assert r["end"] - r["start"] < 40


class _RudeListener:
    """Accepts TCP connections on 127.0.0.1 and answers with `reply` (nothing: just closes):
    something that is not a profiler server on the port, refusing before any capture began."""

    def __init__(self, reply: bytes) -> None:
        import socket
        import threading

        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn = self.sock.accept()[0]
            except OSError:
                return
            with conn:
                if self.reply:
                    conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


def _cli_in(tmpdir: Path, args: list[str]) -> CliRun:
    """`tuiprof ARGS` with its temporary files in tmpdir, to see what it leaves behind."""
    import os

    r = timed_cli(args, TMPDIR=str(tmpdir))
    os.sync()
    return r


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (b"", "closed the connection before any capture began"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "not a profiler server"),
    ],
    ids=["closes", "http1"],
)
def test_a_port_that_is_not_a_profiler_server_is_said_so(
    reply: bytes, says: str, tmp_path: Path
) -> None:
    listener = _RudeListener(reply)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    try:
        r = _cli_in(
            tmpdir,
            ["capture", f"127.0.0.1:{listener.port}", "--retries", "0", "--logdir", str(tmp_path)],
        )
    finally:
        listener.close()
    assert r["rc"] == 1
    lines = r["stderr"].strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r["stderr"]
    assert "went away during the capture" not in lines[0]  # no capture had begun
    assert "within 20 s" not in lines[0]  # it took well under a second
    assert r["end"] - r["start"] < 10
    assert "client log" not in lines[0] and not list(tmpdir.glob("tuiprof-capture-*")), list(
        tmpdir.iterdir()
    )  # the line says it all: no log file left behind


def test_failed_captures_leave_no_logs_behind(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    r = _cli_in(tmpdir, ["capture", f"127.0.0.1:{free_port()}", "--logdir", str(tmp_path)])
    assert r["rc"] == 1 and "no profiler server at" in str(r["stderr"])
    assert "client log" not in str(r["stderr"])
    assert not list(tmpdir.glob("tuiprof-capture-*")), list(tmpdir.iterdir())
