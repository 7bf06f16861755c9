"""Following a logdir while another process writes into it: real files, real file watching.

The writer is a separate process (this file run as a script) that writes real profiles from
sample_traces the ways jobs and copies do: in one go, in small chunks, and half now, half later.
It logs when each file became complete; the tests check the follower reported each one soon
after that moment and never before it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import REPO, script_env

if TYPE_CHECKING:
    from tui_prof.live.follow import FollowEvent


def _sample_xplane() -> Path:
    found = sorted((REPO / "sample_traces").rglob("*.xplane.pb"))
    if not found:
        pytest.skip("no sample profile under sample_traces/")
    return found[0]


# ---------------------------------------------------------------- the writer process


def writer(root: Path, sample: Path, log_path: Path) -> None:
    """Write runs, sessions, metrics and event files into root, logging each completion."""
    data = sample.read_bytes()
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - line-buffered for the whole run

    def done(what: str, path: Path) -> None:
        log.write(json.dumps({"t": time.time(), "what": what, "path": str(path)}) + "\n")

    def session(run: str, name: str) -> Path:
        d = root / run / "plugins" / "profile" / name
        d.mkdir(parents=True, exist_ok=True)
        return d / "host.xplane.pb"

    time.sleep(1.0)
    one_go = session("run1", "2026_01_01_00_00_01")
    one_go.write_bytes(data)  # what the job's profiler server does
    done("profile", one_go)

    time.sleep(1.0)
    metrics = root / "run1" / "metrics.jsonl"
    with open(metrics, "a") as text:
        text.write(json.dumps({"step": 1, "loss": 0.5}) + "\n")
    done("metrics", metrics)

    time.sleep(1.0)
    half = session("run2", "2026_01_01_00_00_02")
    cut = len(data) // 2
    with open(half, "wb") as fh:
        fh.write(data[:cut])
        fh.flush()
        done("half", half)
        time.sleep(3.0)  # much longer than the follower's settle time
        fh.write(data[cut:])
    done("profile", half)

    time.sleep(0.5)
    events = root / "run3" / "events.out.tfevents.1700000000.host"
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_bytes(b"\x00" * 64)
    done("tfevents", events)

    time.sleep(0.5)
    chunked = session("run1", "2026_01_01_00_00_03")
    with open(chunked, "wb") as fh:  # a slow copy: 64 KiB every 0.1 s
        for i in range(0, len(data), 65536):
            fh.write(data[i : i + 65536])
            fh.flush()
            time.sleep(0.1)
    done("profile", chunked)
    log.close()


# ---------------------------------------------------------------- tests


@dataclass(frozen=True)
class Followed:
    """What each side recorded: the follower's events (when seen) and the writer's log."""

    root: Path
    seen: list[tuple[float, FollowEvent]]
    writes: list[dict[str, Any]]
    stopped_in: float
    alive: bool


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> Followed:
    """Follow an empty logdir while the writer process fills it; what each side recorded."""
    from tui_prof.live.follow import LogdirFollower

    root = tmp_path_factory.mktemp("logdir")
    log_path = root.parent / f"{root.name}-writer.jsonl"
    seen: list[tuple[float, FollowEvent]] = []
    stop = threading.Event()
    follower = LogdirFollower(root, lambda evs: seen.extend((time.time(), e) for e in evs))
    worker = threading.Thread(target=follower.run, args=(stop,))  # as a Textual thread worker
    worker.start()
    time.sleep(0.5)
    proc = subprocess.run(
        [sys.executable, __file__, "writer", str(root), str(_sample_xplane()), str(log_path)],
        timeout=120,
        capture_output=True,
        text=True,
        env=script_env(),
    )
    time.sleep(2.0)
    t0 = time.monotonic()
    stop.set()
    worker.join(5)
    stopped_in = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    writes = [json.loads(line) for line in log_path.read_text().splitlines()]
    return Followed(root, seen, writes, stopped_in, worker.is_alive())


def _first(seen: list[tuple[float, FollowEvent]], kind: str, path: Path) -> float | None:
    return next((t for t, e in seen if e.kind == kind and e.path == path), None)


def test_each_complete_file_is_reported_within_two_seconds(followed: Followed) -> None:
    seen = followed.seen
    for w in followed.writes:
        if w["what"] == "half":
            continue
        t = _first(seen, w["what"], Path(w["path"]))
        assert t is not None, f"never reported: {w}"
        assert w["t"] - 0.05 <= t <= w["t"] + 2.0, (w, t - w["t"])


def test_half_written_profile_is_not_reported_until_complete(followed: Followed) -> None:
    from tui_prof.live.follow import PROFILE

    half = next(w for w in followed.writes if w["what"] == "half")
    done = next(w for w in followed.writes if w["what"] == "profile" and w["path"] == half["path"])
    times = [t for t, e in followed.seen if e.kind == PROFILE and str(e.path) == half["path"]]
    assert times and min(times) >= done["t"] - 0.05, (times, done["t"])
    assert len(times) == 1, "reported twice"


def test_runs_and_sessions_are_announced_once_before_their_profiles(followed: Followed) -> None:
    from tui_prof.live.follow import PROFILE, RUN, SESSION

    root = followed.root
    events = [e for _, e in followed.seen]
    runs = [e.path for e in events if e.kind == RUN]
    assert sorted(runs) == [root / "run1", root / "run2", root / "run3"]
    sessions = [e.path for e in events if e.kind == SESSION]
    assert len(sessions) == len(set(sessions)) == 3
    for i, e in enumerate(events):
        if e.kind == PROFILE:
            before = events[:i]
            assert any(b.kind == SESSION and b.path == e.path.parent for b in before)
            assert any(b.kind == RUN and b.path == e.run_dir for b in before)
    assert not [e for e in events if e.path.name.endswith(".op_stats_v2.pb")]


def test_follower_stops_promptly(followed: Followed) -> None:
    assert not followed.alive
    assert followed.stopped_in < 2.0


def test_framing_check_spots_every_truncation(tmp_path: Path) -> None:
    from tui_prof.live.follow import xplane_framing_complete

    data = _sample_xplane().read_bytes()
    path = tmp_path / "x.xplane.pb"
    path.write_bytes(data)
    assert xplane_framing_complete(path)
    for k in range(1, 40):
        path.write_bytes(data[: len(data) * k // 40])
        assert not xplane_framing_complete(path), k
    path.write_bytes(b"")
    assert not xplane_framing_complete(path)
    assert not xplane_framing_complete(tmp_path / "missing.xplane.pb")


def _collect(
    root: Path, since: float | None = None
) -> tuple[list[FollowEvent], list[str], threading.Event, threading.Thread]:
    from tui_prof.live.follow import LogdirFollower

    seen: list[FollowEvent] = []
    errors: list[str] = []
    stop = threading.Event()
    f = LogdirFollower(root, lambda evs: seen.extend(evs), on_error=errors.append, since=since)
    t = threading.Thread(target=f.run, args=(stop,), daemon=True)
    t.start()
    return seen, errors, stop, t


def _wait_for(pred: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Wait for what normally comes in about a second; generous for a loaded machine (it ends as
    soon as `pred` holds)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_existing_files_are_baseline_and_removals_are_reported(tmp_path: Path) -> None:
    from tui_prof.live.follow import PROFILE, REMOVED

    old = tmp_path / "run" / "plugins" / "profile" / "s1" / "h.xplane.pb"
    old.parent.mkdir(parents=True)
    shutil.copyfile(_sample_xplane(), old)
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    seen, _errors, stop, t = _collect(tmp_path)
    try:
        time.sleep(1.5)
        assert not seen, "files that were there before following began are the caller's"
        new = old.parent.parent / "s2" / "h.xplane.pb"
        new.parent.mkdir()
        shutil.copyfile(_sample_xplane(), new)
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == new for e in seen))
        old.unlink()
        assert _wait_for(lambda: any(e.kind == REMOVED and e.path == old for e in seen))
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_a_file_written_before_the_watch_is_in_place_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follower walks the logdir, then starts the OS watch: a profile written in between
    raised no event and was never reported (a loaded machine widens that moment). Here it is
    written at that moment, every time: just before the real watch starts."""
    import watchfiles

    from tui_prof.live.follow import PROFILE

    late = tmp_path / "run" / "plugins" / "profile" / "s" / "h.xplane.pb"
    real_watch = watchfiles.watch

    def watch_after_a_write(*args: Any, **kwargs: Any) -> Any:
        if not late.exists():
            late.parent.mkdir(parents=True)
            shutil.copyfile(_sample_xplane(), late)
        return real_watch(*args, **kwargs)

    monkeypatch.setattr(watchfiles, "watch", watch_after_a_write)  # follow calls it by module
    seen, _errors, stop, t = _collect(tmp_path)
    try:
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == late for e in seen), 10)
    finally:
        stop.set()
        t.join(5)


def test_since_reports_files_written_between_listing_and_following(tmp_path: Path) -> None:
    from tui_prof.live.follow import METRICS, PROFILE

    listed_at = time.time() - 0.01
    between = tmp_path / "run" / "plugins" / "profile" / "s" / "h.xplane.pb"
    between.parent.mkdir(parents=True)
    shutil.copyfile(_sample_xplane(), between)
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n')
    seen, _errors, stop, t = _collect(tmp_path, since=listed_at)
    try:
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == between for e in seen))
        assert any(e.kind == METRICS and e.path == metrics for e in seen)
    finally:
        stop.set()
        t.join(5)


def test_missing_or_vanishing_root_never_crashes(tmp_path: Path) -> None:
    from tui_prof.live.follow import PROFILE

    root = tmp_path / "later"
    seen, errors, stop, t = _collect(root)
    try:
        assert _wait_for(lambda: bool(errors))
        assert "not there" in errors[0]
        first = root / "r" / "plugins" / "profile" / "s" / "h.xplane.pb"
        first.parent.mkdir(parents=True)
        shutil.copyfile(_sample_xplane(), first)
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == first for e in seen))
        shutil.rmtree(root)
        time.sleep(1.5)
        assert t.is_alive()
        again = root / "r2" / "plugins" / "profile" / "s" / "h.xplane.pb"
        again.parent.mkdir(parents=True)
        shutil.copyfile(_sample_xplane(), again)
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == again for e in seen))
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


UNPRIVILEGED_FOLLOWER = """
import os, sys, threading
from pathlib import Path
from tui_prof.live.follow import iter_changes
import platform  # watchfiles imports it lazily; nobody cannot read root's Python install
if os.getuid() == 0:  # root reads everything: drop to nobody so the directory is unreadable
    os.setgid(65534); os.setuid(65534)
stop = threading.Event()
backstop = threading.Timer(float(sys.argv[2]), stop.set)
backstop.start()
print("READY", flush=True)
for events in iter_changes(sys.argv[1], stop=stop, on_error=lambda m: print("ERROR", m, flush=True)):
    for e in events:
        print(e.kind, e.path, flush=True)
        if e.kind == "profile":  # what the test waits for: done
            stop.set()
backstop.cancel()
print("END", flush=True)
"""


def test_unreadable_directory_is_skipped_not_fatal() -> None:
    # Not under pytest's basetemp: other pytest runs reset that to 0700, unreadable to nobody.
    with tempfile.TemporaryDirectory(prefix="tuiprof-follow-") as tmp:
        _unreadable_case(Path(tmp))


def _unreadable_case(base: Path) -> None:
    os.chmod(base, 0o755)
    bad = base / "bad" / "plugins" / "profile" / "s"
    bad.mkdir(parents=True)
    shutil.copyfile(_sample_xplane(), bad / "h.xplane.pb")
    os.chmod(base / "bad", 0o000)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        # It follows until it reports a profile, or 60 s: a fixed 5 s left a loaded machine
        # too little time to start watching, see the new file and let it settle.
        [sys.executable, "-c", UNPRIVILEGED_FOLLOWER, str(base), "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(1.5)
        ok = base / "ok" / "plugins" / "profile" / "s" / "h.xplane.pb"
        ok.parent.mkdir(parents=True)
        shutil.copyfile(_sample_xplane(), ok)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.chmod(base / "bad", 0o755)
    assert proc.returncode == 0, err
    assert f"profile {ok}" in out.splitlines(), out
    assert out.strip().endswith("END") and "Traceback" not in err


if __name__ == "__main__":
    if sys.argv[1:2] == ["writer"]:
        writer(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))


def test_pytorch_traces_appearing_are_reported_once_whole(tmp_path: Path) -> None:
    """The live view refreshed only for XPlane files: a PyTorch trace written into the logdir
    went unnoticed. A half-written JSON trace waits for its closing brace."""
    from kineto_factory import two_steps

    from tui_prof.live.follow import PROFILE

    seen, _errors, stop, t = _collect(tmp_path)
    try:
        time.sleep(0.5)
        data = two_steps().write(tmp_path / "src.json").read_bytes()
        (tmp_path / "src.json").unlink()
        trace = tmp_path / "run" / "host.1.pt.trace.json"
        trace.parent.mkdir()
        trace.write_bytes(data[: len(data) // 2])
        time.sleep(2.0)
        assert not any(e.path == trace for e in seen), "half a trace is not a profile yet"
        trace.write_bytes(data)
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == trace for e in seen))
        packed = tmp_path / "run2" / "host.2.pt.trace.json.gz"
        two_steps().write(packed)
        assert _wait_for(lambda: any(e.kind == PROFILE and e.path == packed for e in seen))
    finally:
        stop.set()
        t.join(5)
