"""Bad input gets one clear line, never a traceback, and the rest stays usable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sample_session

from tui_prof.model import ProfileError
from tui_prof.profiles.load import summarize_session

GOOD = sample_session("custom_loop")


def _session(root: Path, name: str, host: str, data: bytes) -> Path:
    d = root / name / "plugins" / "profile" / "s1"
    d.mkdir(parents=True)
    (d / f"{host}.xplane.pb").write_bytes(data)
    return d


def _bad_logdir(root: Path) -> Path:
    good_bytes = next(GOOD.glob("*.xplane.pb")).read_bytes()
    _session(root, "empty", "h", b"")
    _session(root, "random", "h", os.urandom(4096))
    _session(root, "truncated", "h", good_bytes[: len(good_bytes) // 3])
    good = root / "good" / "plugins" / "profile"
    good.mkdir(parents=True)
    shutil.copytree(GOOD, good / GOOD.name)
    return root


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (os.urandom(4096), "could not read"),
        (b"\x0a\xff\xff\xff\x0f", "could not read"),
    ],
)
def test_bad_files_raise_one_line_profile_error(tmp_path: Path, data: bytes, message: str) -> None:
    d = _session(tmp_path, "r", "h", data)
    with pytest.raises(ProfileError, match=message) as info:
        summarize_session(d)
    assert "\n" not in str(info.value)


def test_truncated_file(tmp_path: Path) -> None:
    data = next(GOOD.glob("*.xplane.pb")).read_bytes()
    d = _session(tmp_path, "r", "h", data[: len(data) // 2])
    with pytest.raises(ProfileError):
        summarize_session(d)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"},
    )


def test_cli_reports_each_bad_session_and_prints_the_good_one(tmp_path: Path) -> None:
    root = _bad_logdir(tmp_path)
    r = _cli("summary", str(root), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [Path(s["path"]).parts[-4] for s in doc["sessions"]] == ["good"]
    assert len(doc["errors"]) == 3
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3, r.stderr  # one line per bad session, no native log noise
    assert "Traceback" not in r.stderr
    assert any("empty file" in line for line in lines)


def test_cli_missing_path_and_empty_dir(tmp_path: Path) -> None:
    r = _cli("summary", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr
    r = _cli("summary", str(tmp_path))
    assert r.returncode == 2 and "no profile sessions" in r.stderr
    r = _cli(str(tmp_path / "missing"))  # the TUI entry checks the path before starting
    assert r.returncode == 2 and "no such file" in r.stderr


def test_markup_and_invalid_utf8_names_are_printed_as_text(tmp_path: Path) -> None:
    host = b"[bold]w\xff"  # "/" cannot be in a file name; an unclosed tag is markup enough
    d = tmp_path / "[red]run" / "plugins" / "profile" / "s"
    d.mkdir(parents=True)
    shutil.copyfile(
        next(GOOD.glob("*.xplane.pb")), os.path.join(os.fsencode(d), host + b".xplane.pb")
    )
    r = _cli("summary", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "[red]run" in r.stdout
    r = _cli("summary", str(tmp_path), "--json")
    doc = json.loads(r.stdout)
    assert doc["sessions"][0]["hosts"][0].startswith("[bold]w")
    r = _cli("summary", str(tmp_path), "--markdown")
    assert "[bold]w" in r.stdout
