"""Bad input gets one clear line, never a traceback, and the rest stays usable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, sample_session
from xla_profiles import damaged_line

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


@pytest.mark.parametrize("fmt", ["--json", "--markdown"])
def test_damaged_line_in_the_streaming_reader_is_that_sessions_one_line(
    tmp_path: Path, fmt: str
) -> None:
    """TUIPROF_LARGE_MB=0 sends every session to the streaming reader (as ≥ 200 MB ones are)."""
    _session(tmp_path, "a_damaged", "h", damaged_line(next(GOOD.glob("*.xplane.pb"))))
    good = tmp_path / "b_good" / "plugins" / "profile"
    good.mkdir(parents=True)
    shutil.copytree(GOOD, good / GOOD.name)
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(tmp_path), fmt],
        capture_output=True,
        text=True,
        env={**os.environ, "TUIPROF_LARGE_MB": "0"},
    )
    assert "Traceback" not in r.stderr and "BufferError" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "a_damaged" in lines[0] and "damaged line" in lines[0], r.stderr
    if fmt == "--json":
        doc = json.loads(r.stdout)
        assert [Path(s["path"]).parts[-4] for s in doc["sessions"]] == ["b_good"]
        assert doc["sessions"][0]["steps"]
        assert [Path(e["path"]).parts[-4] for e in doc["errors"]] == ["a_damaged"]
        assert "damaged line" in doc["errors"][0]["error"]
    else:
        assert "b_good" in r.stdout and "a_damaged" not in r.stdout


def test_damaged_line_leaves_the_file_closed_and_raises_profile_error(tmp_path: Path) -> None:
    from tui_prof.profiles.xplane.steps import find_steps

    d = _session(tmp_path, "r", "h", damaged_line(next(GOOD.glob("*.xplane.pb"))))
    with pytest.raises(ProfileError, match="damaged line") as info:
        find_steps(list(d.glob("*.xplane.pb")))
    assert "\n" not in str(info.value)


def test_cli_missing_path_and_empty_dir(tmp_path: Path) -> None:
    r = _cli("summary", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr
    r = _cli("summary", str(tmp_path))
    assert r.returncode == 2 and "no profile sessions" in r.stderr
    r = _cli(str(tmp_path / "missing"))  # the TUI entry checks the path before starting
    assert r.returncode == 2 and "no such file" in r.stderr


AS_NOBODY = """
import json, os, sys
from tui_prof.cli.main import main
from tui_prof.cli import summary
from tui_prof.profiles import load
from tui_prof.profiles.xplane import convert_worker, converter, reader
# nobody cannot read root's Python install: import everything first, and start the converter's
# process (it imports xprof) while still root
convert_worker.process().start()
if os.getuid() == 0:  # root reads everything: drop to nobody, so chmod 000 means unreadable
    os.setgid(65534); os.setuid(65534)
sys.exit(main(["summary", *sys.argv[1:]]))
"""


def test_unreadable_file_and_directory_say_permission_denied_and_are_errors() -> None:
    # Not under pytest's basetemp: other pytest runs reset that to 0700, unreadable to nobody.
    with tempfile.TemporaryDirectory(prefix="tuiprof-perm-") as tmp:
        base = Path(tmp)
        os.chmod(base, 0o755)
        good = base / "a_good" / "plugins" / "profile"
        good.mkdir(parents=True)
        shutil.copytree(GOOD, good / GOOD.name)
        small = _session(base, "b_file", "h", next(GOOD.glob("*.xplane.pb")).read_bytes()[:900])
        unlistable = _session(base, "c_dir", "h", next(GOOD.glob("*.xplane.pb")).read_bytes())
        for d in base.rglob("*"):
            os.chmod(d, 0o755 if d.is_dir() else 0o644)
        os.chmod(small / "h.xplane.pb", 0o000)
        os.chmod(unlistable, 0o000)
        try:
            r = subprocess.run(
                [sys.executable, "-c", AS_NOBODY, str(base), "--json", "--no-cache"],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO), "TUIPROF_CACHE_DIR": tmp + "/cache"},
            )
        finally:
            os.chmod(unlistable, 0o755)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [Path(s["path"]).parts[-4] for s in doc["sessions"]] == ["a_good"]
    errors = {Path(e["path"]).relative_to(base).parts[0]: e["error"] for e in doc["errors"]}
    assert set(errors) == {"b_file", "c_dir"}, doc["errors"]
    assert all("permission denied" in e for e in errors.values()), errors
    assert "not an XSpace profile" not in errors["b_file"]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and all("permission denied" in line for line in lines), r.stderr


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
