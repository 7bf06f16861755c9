"""The TUI on XLA profiles: choosing the steps' program with `P`, and a session without steps."""

from __future__ import annotations

from pathlib import Path

from conftest import filled, settle, shown, static_text, until
from textual.widgets import OptionList, TabPane
from xla_profiles import gpu_job, tpu_job

from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.program_dialog import ProgramDialog
from tui_prof.tui.widgets.summary_tables import StepBreakdownTable


async def test_p_picks_the_program_whose_runs_are_the_steps(tmp_path: Path) -> None:
    gpu_job(tmp_path)
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert "'jit_train_step'" in static_text(app, "#source")  # the Steps: line
        await pilot.press("P")
        options = await shown(pilot, OptionList)
        assert isinstance(app.screen, ProgramDialog)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert labels[0].startswith("Automatic")
        assert any(label.startswith("jit_metrics") for label in labels)
        await pilot.press(*["down"] * labels.index(next(x for x in labels if "metrics" in x)))
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, ProgramDialog))
        await settle(pilot)
        source = static_text(app, "#source")
        assert "'jit_metrics'" in source and "named with --step-program" in source
        await pilot.press("2")  # a table is drawn when its tab shows it
        assert (await filled(pilot, StepBreakdownTable)).row_count == 4
        await pilot.press("P")  # back to automatic
        await shown(pilot, OptionList)
        await pilot.press("home", "enter")
        await until(pilot, lambda: not isinstance(app.screen, ProgramDialog))
        await settle(pilot)
        assert "'jit_train_step'" in static_text(app, "#source")


async def test_a_session_without_steps_shows_what_the_devices_did(tmp_path: Path) -> None:
    tpu_job(tmp_path)
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "No steps found" in static_text(app, "#headline")
        bars = static_text(app, "#bars")
        assert "No step-time breakdown" in bars and "TPU duty cycle 28.6%" in bars
        assert "jit_f" in static_text(app, "#averages")  # the programs, not an empty table
        assert "StepTraceAnnotation" in static_text(app, "#advice")
        assert app.screen.query_one("#tab-steps", TabPane).disabled
