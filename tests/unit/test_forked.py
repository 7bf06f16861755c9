"""A helper process forked instead of started anew: the same pipes, exit statuses and hygiene
as a `python -m` child, and the fresh start where a fork is not safe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from tui_prof.profiles import forked

# The same work as a fresh interpreter's entry point, for the path that does not fork.
ECHO = (
    "import os, sys\n"
    "line = sys.stdin.readline()\n"
    "sys.stdout.write(line.upper() + ' '.join(sorted(os.listdir('/proc/self/fd'))) + '\\n')\n"
    "sys.exit(3)\n"
)


def _echo() -> int:
    line = sys.stdin.readline()
    sys.stdout.write(line.upper() + " ".join(sorted(os.listdir("/proc/self/fd"))) + "\n")
    sys.stdout.flush()
    return 3


def _talk(child: forked.Child) -> list[str]:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(b"hello\n")
    child.stdin.close()
    out = child.stdout.read().decode().splitlines()
    assert child.wait(timeout=30) == 3
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_forked_child_has_its_pipes_its_status_and_nothing_else_of_ours() -> None:
    assert forked.can_fork(), "one thread here: the fork path is the one under test"
    r, w = os.pipe()  # an unrelated descriptor of ours: the child must not keep it open
    try:
        child = forked.start(_echo, ["-c", ECHO], stdin=True, stdout=True)
        assert not isinstance(child, subprocess.Popen)
        out = _talk(child)
    finally:
        os.close(r)
        os.close(w)
    assert out[0] == "HELLO"
    # 0, 1, 2 and the descriptor listdir itself held: nothing inherited
    assert len(out[1].split()) == 4 and {"0", "1", "2"} <= set(out[1].split()), out
    assert child.returncode == 3 and child.poll() == 3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_forked_child_killed_by_a_signal_reads_as_popen_says_it() -> None:
    def crash() -> int:
        os.kill(os.getpid(), signal.SIGSEGV)
        return 0

    child = forked.start(crash, ["-c", "pass"], stdin=False, stdout=False)
    assert child.wait(timeout=30) == -signal.SIGSEGV
    child.kill()  # already gone: nothing happens


def test_no_fork_where_another_thread_runs_or_where_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forked.can_fork()  # a fork copies no other thread: a lock it held stays held
        child = forked.start(_echo, ["-c", ECHO], stdin=True, stdout=True)
        assert isinstance(child, subprocess.Popen)
        assert _talk(child)[0] == "HELLO"
    finally:
        stop.set()
        t.join()
    monkeypatch.setenv("TUIPROF_NO_FORK", "1")
    assert not forked.can_fork()
