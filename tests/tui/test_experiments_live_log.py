"""The Experiments screen's live log: every line of a quiet run, a bounded tail of a flooding one.

Each job waits for a go-file before it prints, and the test writes that file only once the screen
is in the state the test is about (the run selected before its output, or after it): which path
draws the log no longer depends on how fast the machine is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import until
from textual.widgets import RichLog, Static

from tui_prof.experiments.spec import load_spec
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.experiments import LIVE_LINES_PER_FLUSH, LOG_TAIL_LINES
from tui_prof.tui.screens.start_dialog import StartRequest
from tui_prof.tui.widgets.run_table import RunTable


def _spec(tmp_path: Path, lines: int, repeats: int = 1) -> Path:
    """Repeat k waits for `go{k}`, prints `lines` lines (repeat 0 only) and exits."""
    job = (
        "import os, time\n"
        f"go = os.path.join({str(tmp_path)!r}, 'go' + os.environ['TUIPROF_REPEAT'])\n"
        "while not os.path.exists(go):\n"
        "    time.sleep(0.01)\n"
        "if os.environ['TUIPROF_REPEAT'] == '0':\n"
        f"    for i in range({lines}):\n"
        "        print(f'line {i + 1}')\n"
    )
    spec = tmp_path / "spec.toml"
    argv = [sys.executable, "-c", job]
    spec.write_text(
        f'name = "log"\ncommand = {json.dumps(argv)}\nrepeats = {repeats}\n'
        f'output = "{tmp_path / "out"}"\n'
    )
    return spec


def _shown(app: TuiprofApp) -> list[str]:
    return [s.text.rstrip() for s in app.experiments.query_one("#run-log", RichLog).lines]


def _log_shows(app: TuiprofApp, run_id: str) -> bool:
    """Whether the log pane is the run's (its title names it): the screen has taken the row's
    highlight, which on a loaded machine comes some frames after the table's cursor moved."""
    variant, repeat = run_id.rsplit("-r", 1)
    title = str(app.experiments.query_one("#log-title", Static).content)
    return title.startswith(f"Log: {variant} #{int(repeat) + 1} ")


def _selected(app: TuiprofApp) -> str | None:
    if not app.is_screen_installed("experiments") or not app.experiments.is_mounted:
        return None
    run = app.experiments.query_one(RunTable).selected_run
    return None if run is None else run.run_id


async def _log_of_a_run_selected_before_its_output(tmp_path: Path, lines: int) -> list[str]:
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app._start(StartRequest(load_spec(_spec(tmp_path, lines))))
        await until(pilot, lambda: bool(app.runners) and _selected(app) == "default-r0")
        await until(pilot, lambda: _log_shows(app, "default-r0"))
        (tmp_path / "go0").touch()  # the run is selected and its log shown: now it may print
        runner = next(iter(app.runners.values()))
        await until(pilot, lambda: runner.done)
        # The last flush comes a timer's tick later (later still on a loaded machine): wait for
        # the job's last line, not for a guessed time.
        await until(pilot, lambda: _shown(app)[-1:] == [f"line {lines}"])
        return _shown(app)


async def test_a_quiet_run_shows_every_line(tmp_path: Path) -> None:
    shown = await _log_of_a_run_selected_before_its_output(tmp_path, 12)
    assert [s for s in shown if s.startswith("line ")] == [f"line {i}" for i in range(1, 13)]
    assert not any("not shown" in s for s in shown)


async def test_a_flood_shows_its_last_lines_and_says_what_it_skipped(tmp_path: Path) -> None:
    shown = await _log_of_a_run_selected_before_its_output(tmp_path, 20000)
    assert shown[-1] == "line 20000"
    assert any("not shown" in s for s in shown)
    assert len([s for s in shown if s.startswith("line ")]) <= 3 * LIVE_LINES_PER_FLUSH


async def test_a_flood_selected_afterwards_shows_its_kept_tail_and_says_what_it_skipped(
    tmp_path: Path,
) -> None:
    """The other path: the run printed while another row was selected; selecting it draws the
    lines this session kept of it (its last LOG_TAIL_LINES), after a line saying what is not."""
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app._start(StartRequest(load_spec(_spec(tmp_path, 20000, repeats=2))))
        await until(pilot, lambda: bool(app.runners) and _selected(app) == "default-r0")
        table = app.experiments.query_one(RunTable)
        table.focus()
        await pilot.press("down")
        await until(pilot, lambda: _selected(app) == "default-r1")
        await until(pilot, lambda: _log_shows(app, "default-r1"))
        (tmp_path / "go0").touch()
        await until(pilot, lambda: table.runs["default-r0"].status == "finished")
        await pilot.pause(0.3)
        assert not any(s.startswith("line ") for s in _shown(app))  # r1's log: nothing yet
        await pilot.press("up")
        await until(pilot, lambda: _selected(app) == "default-r0")
        await until(pilot, lambda: _shown(app)[-1:] == ["line 20000"])  # its log drawn
        shown = _shown(app)
        (tmp_path / "go1").touch()
        await until(pilot, lambda: next(iter(app.runners.values())).done)
    assert shown[-1] == "line 20000"
    assert "not shown here" in shown[0]
    assert len([s for s in shown if s.startswith("line ")]) <= LOG_TAIL_LINES
