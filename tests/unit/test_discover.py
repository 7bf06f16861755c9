"""Discovery lists runs → sessions → hosts from directory listings alone, whatever the layout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GPU_LOGDIR, SAMPLES, needs_shared, sample_session

from tui_prof.profiles.discover import discover


def _touch_session(root: Path, run: str, session: str, hosts: list[str]) -> Path:
    d = root / run / "plugins" / "profile" / session
    d.mkdir(parents=True)
    for h in hosts:
        (d / f"{h}.xplane.pb").write_bytes(b"x")
    return d


def test_nested_logdir_runs_sessions_hosts(tmp_path: Path) -> None:
    _touch_session(
        tmp_path, "fit/20240101-120000/train", "2024_01_01_12_00_05", ["worker0", "worker1"]
    )
    _touch_session(tmp_path, "fit/20240101-120000/train", "2024_01_01_12_01_05", ["worker0"])
    _touch_session(tmp_path, "other", "s1", ["h"])
    (tmp_path / "fit" / "events.out.tfevents.1").write_bytes(b"")
    found = discover(tmp_path)
    assert [r.name for r in found.runs] == ["fit/20240101-120000/train", "other"]
    sessions = found.runs[0].sessions
    assert [s.name for s in sessions] == ["2024_01_01_12_00_05", "2024_01_01_12_01_05"]
    assert [h.host for h in sessions[0].hosts] == ["worker0", "worker1"]
    assert not found.problems


def test_run_dir_session_dir_and_single_file_all_work() -> None:
    session_dir = sample_session("custom_loop")
    run_dir = session_dir.parent.parent.parent
    for path in (run_dir, session_dir, next(session_dir.glob("*.xplane.pb"))):
        found = discover(path)
        assert len(found.sessions) == 1, path
        assert found.sessions[0].path == session_dir


def test_every_sample_with_a_profile_file_is_listed() -> None:
    """Against the file system, found independently: each sample directory holding an xplane or a
    PyTorch trace is a run in the listing (nested experiments' runs under their head)."""
    expected = {
        d.name
        for d in SAMPLES.iterdir()
        if d.is_dir() and (any(d.rglob("*.xplane.pb")) or any(d.rglob("*.pt.trace.json*")))
    }
    assert len(expected) >= 10
    names = {r.name.split("/")[0] for r in discover(SAMPLES).runs}
    assert expected <= names, expected - names


@needs_shared
def test_shared_gpu_logdir() -> None:
    found = discover(GPU_LOGDIR)
    assert len(found.sessions) == 1
    assert found.sessions[0].hosts[0].host == "34.83.195.179_6003"


def test_missing_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        discover(tmp_path / "nope")


def test_symlink_loop_is_reported_not_followed_forever(tmp_path: Path) -> None:
    _touch_session(tmp_path, "run", "s", ["h"])
    os.symlink(tmp_path, tmp_path / "run" / "loop")
    found = discover(tmp_path)
    assert len(found.sessions) == 1
    assert any("symlink loop" in p for p in found.problems)


def test_thousand_sessions_all_listed(tmp_path: Path) -> None:
    for i in range(1000):
        _touch_session(tmp_path, f"run{i % 10}", f"session{i:04d}", ["host"])
    found = discover(tmp_path)
    assert len(found.sessions) == 1000
    assert len(found.runs) == 10


def test_unreadable_directory_is_a_problem_not_a_crash(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Runs as an unprivileged user (root reads everything), in a child process."""
    base = Path(tmp_path_factory.mktemp("perm"))
    os.chmod(base, 0o755)
    for p in base.parents:
        if str(p).startswith("/tmp/") and os.stat(p).st_uid == os.getuid():
            os.chmod(p, 0o755)
    ok = _touch_session(base, "ok", "s", ["h"])
    bad = _touch_session(base, "bad", "s", ["h"])
    os.chmod(bad.parent, 0o000)
    for d in (ok, ok.parent, ok.parent.parent, ok.parent.parent.parent, base / "bad"):
        os.chmod(d, 0o755)
    for f in ok.glob("*"):
        os.chmod(f, 0o644)
    # Import first, then drop to an unprivileged user: root's access checks would pass anyway.
    drop = "os.setgid(65534); os.setuid(65534); " if os.getuid() == 0 else ""
    code = (
        "import os; from tui_prof.profiles.discover import discover; "
        + drop
        + f"d = discover({str(base)!r}); print(len(d.sessions)); print('|'.join(d.problems))"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    finally:
        os.chmod(bad.parent, 0o755)
        shutil.rmtree(base, ignore_errors=True)
    assert out[0] == "1"
    assert "cannot list" in out[1]
