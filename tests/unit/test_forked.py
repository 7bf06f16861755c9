"""A helper process forked instead of started anew: the same pipes, exit statuses and hygiene
as a `python -m` child, and the fresh start where a fork is not safe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from conftest import REPO

from tui_prof.profiles import forked

# The same work as a fresh interpreter's entry point, for the path that does not fork.
ECHO = (
    "import os, sys\n"
    "line = sys.stdin.readline()\n"
    "sys.stdout.write(line.upper() + ' '.join(sorted(os.listdir('/proc/self/fd'))) + '\\n')\n"
    "sys.exit(3)\n"
)

# The fork path, in a fresh interpreter: this test process may run other tests' threads (then
# no fork is made, rightly), and the checks must see a fork.
FORKS = """
import json, os, signal, subprocess, sys
from tui_prof.profiles import forked

def echo():
    line = sys.stdin.readline()
    sys.stdout.write(line.upper() + " ".join(sorted(os.listdir("/proc/self/fd"))) + "\\n")
    sys.stdout.flush()
    return 3

def crash():
    os.kill(os.getpid(), signal.SIGSEGV)
    return 0

def exits():
    sys.exit(7)

def raises():
    raise RuntimeError("boom")

out = {"can_fork": forked.can_fork()}
r, w = os.pipe()  # an unrelated descriptor of ours: the child must not keep it open
child = forked.start(echo, ["-c", "pass"], stdin=True, stdout=True)
out["popen"] = isinstance(child, subprocess.Popen)
child.stdin.write(b"hello\\n")
child.stdin.close()
out["lines"] = child.stdout.read().decode().splitlines()
out["echo"] = child.wait(timeout=30)
out["poll"] = child.poll()
out["crash"] = forked.start(crash, ["-c", "pass"], stdin=False, stdout=False).wait(30)
out["exits"] = forked.start(exits, ["-c", "pass"], stdin=False, stdout=False).wait(30)
out["raises"] = forked.start(raises, ["-c", "pass"], stdin=False, stdout=False).wait(30)
print(json.dumps(out))
"""


# A thread started by C code (libc's pthread_create running sleep(30)), unknown to `threading`,
# as a library's thread pool is.
NATIVE = """
import ctypes, os, threading
from tui_prof.profiles import forked
print(forked.can_fork(), threading.active_count())
libc = ctypes.CDLL(None)
tid = ctypes.c_ulong()
sleep = ctypes.cast(libc.sleep, ctypes.c_void_p)
assert libc.pthread_create(ctypes.byref(tid), None, sleep, ctypes.c_void_p(30)) == 0
print(forked.can_fork())
os._exit(0)
"""


def _talk(child: forked.Child) -> list[str]:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(b"hello\n")
    child.stdin.close()
    out = child.stdout.read().decode().splitlines()
    assert child.wait(timeout=30) == 3
    return out


def _fresh_interpreter(source: str) -> subprocess.CompletedProcess[str]:
    """Run `source` in a new Python (forking is allowed there): it must end cleanly."""
    run = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "TUIPROF_NO_FORK": ""},
    )
    assert run.returncode == 0, run.stderr
    return run


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_forked_child_has_its_pipes_its_status_and_nothing_else_of_ours() -> None:
    run = _fresh_interpreter(FORKS)
    out = json.loads(run.stdout.splitlines()[-1])  # one line: a child never returned into it
    assert out["can_fork"] and not out["popen"], out
    assert out["lines"][0] == "HELLO" and out["echo"] == 3 and out["poll"] == 3
    # 0, 1, 2 and the descriptor listdir itself held: nothing inherited
    fds = out["lines"][1].split()
    assert len(fds) == 4 and {"0", "1", "2"} <= set(fds), out
    assert out["crash"] == -11  # killed by SIGSEGV reads as Popen says it
    assert out["exits"] == 7 and out["raises"] == 1  # and neither returned into the parent


def test_no_fork_where_another_thread_runs_or_where_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forked.can_fork()  # a fork copies no other thread: a lock it held stays held
        child = forked.start(lambda: 0, ["-c", ECHO], stdin=True, stdout=True)
        assert isinstance(child, subprocess.Popen)
        assert _talk(child)[0] == "HELLO"
    finally:
        stop.set()
        t.join()
    monkeypatch.setenv("TUIPROF_NO_FORK", "1")
    assert not forked.can_fork()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_no_fork_where_a_native_thread_runs() -> None:
    """A library's own thread is invisible to `threading` but would be missing in a fork, with
    any lock it held: no fork then."""
    run = _fresh_interpreter(NATIVE)
    assert run.stdout.split() == ["True", "1", "False"], run.stdout
