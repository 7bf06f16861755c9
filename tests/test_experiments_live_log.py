"""The Experiments screen's live log: every line of a quiet run, a bounded tail of a flooding one."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from textual.widgets import RichLog

from tui_prof.experiments.spec import load_spec
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.experiments import LIVE_LINES_PER_FLUSH
from tui_prof.tui.screens.start_dialog import StartRequest


def _spec(tmp_path: Path, lines: int) -> Path:
    job = f"import time\nfor i in range({lines}):\n    print(f'line {{i + 1}}')\ntime.sleep(1.5)\n"
    spec = tmp_path / "spec.toml"
    argv = [sys.executable, "-c", job]
    spec.write_text(
        f'name = "log"\ncommand = {json.dumps(argv)}\nrepeats = 1\noutput = "{tmp_path / "out"}"\n'
    )
    return spec


async def _log_after_run(tmp_path: Path, lines: int) -> list[str]:
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app._start(StartRequest(load_spec(_spec(tmp_path, lines))))
        runner = next(iter(app.runners.values()))
        deadline = time.monotonic() + 30
        while not runner.done and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert runner.done
        await pilot.pause(0.3)  # the last flush
        return [
            s.text.rstrip()
            for s in app.get_screen("experiments").query_one("#run-log", RichLog).lines
        ]


async def test_a_quiet_run_shows_every_line(tmp_path: Path) -> None:
    shown = await _log_after_run(tmp_path, 12)
    assert [s for s in shown if s.startswith("line ")] == [f"line {i}" for i in range(1, 13)]
    assert not any("not shown" in s for s in shown)


async def test_a_flood_shows_its_last_lines_and_says_what_it_skipped(tmp_path: Path) -> None:
    shown = await _log_after_run(tmp_path, 20000)
    assert shown[-1] == "line 20000"
    assert any("not shown" in s for s in shown)
    assert len([s for s in shown if s.startswith("line ")]) <= 3 * LIVE_LINES_PER_FLUSH
