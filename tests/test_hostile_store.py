"""No user file or result lost: tuiprof never writes over a file it did not create, refuses paths
that break its one-line output, and validates what every run would fail on before any runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from tui_prof.experiments.commands import save_spec, spec_from_commands
from tui_prof.experiments.spec import SpecError, load_spec


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip


def test_output_into_a_users_directory_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "spec.toml").write_text("my own notes\n")
    r = _cli("run", "--headless", "--output", str(mine), "--variant", "a=true")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "not empty" in r.stderr, r.stderr
    assert (mine / "spec.toml").read_text() == "my own notes\n"
    assert sorted(p.name for p in mine.iterdir()) == ["spec.toml"]


def test_save_spec_never_replaces_unasked(tmp_path: Path) -> None:
    spec = spec_from_commands(["a=true"])
    target = tmp_path / "spec.toml"
    target.write_text("mine\n")
    with pytest.raises(SpecError, match="exists; not replaced"):
        save_spec(spec, target)
    assert target.read_text() == "mine\n"
    save_spec(spec, target, replace=True)  # what the TUI does once the user said so
    assert load_spec(target).name == spec.name


async def test_save_spec_as_asks_in_the_tui(tmp_path: Path) -> None:
    from textual.widgets import Input, Static

    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.screens.start_dialog import StartDialog

    target = tmp_path / "keep.toml"
    target.write_text("mine\n")
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = StartDialog("")
        await app.push_screen(dialog)
        await pilot.pause()
        dialog.query_one("#variants").text = "a=true"
        dialog.query_one("#save", Input).value = str(target)
        dialog._submit()
        await pilot.pause()
        error = str(dialog.query_one(dialog.ERROR, Static).render())
        assert "exists; Start again to replace it" in error, error
        assert target.read_text() == "mine\n"
        dialog._submit()  # the second Start: the user's answer
        await pilot.pause()
        assert "name =" in target.read_text()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[variants.a]\nenv = { "A=B" = "1" }\n', "without '=' or NUL"),
        ('[variants.a]\nenv = { "" = "1" }\n', "must be non-empty"),
        ('[variants.a]\nenv = { X = "a\\u0000b" }\n', "a value without NUL"),
        ('[variants.a]\nargs = ["a\\u0000b"]\n', "NUL byte"),
        ('output = "out\\nput"\n[variants.a]\n', "on one line"),
    ],
)
def test_what_every_run_would_fail_on_is_refused_up_front(
    tmp_path: Path, text: str, why: str
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('name = "x"\ncommand = ["true"]\n' + text)
    with pytest.raises(SpecError, match=why):
        load_spec(spec)
    r = _cli("run", "--headless", str(spec))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


def test_output_with_a_newline_is_refused(tmp_path: Path) -> None:
    r = _cli("run", "--headless", "--output", str(tmp_path / "a\nb"), "--variant", "a=true")
    assert r.returncode != 0 and "line break" in r.stderr and not (tmp_path / "a\nb").exists()
