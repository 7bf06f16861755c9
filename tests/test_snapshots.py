"""How the browse screen looks, at an SSH terminal's 80×24 and at 120×40 (SVG snapshots).

Regenerate after an intended change: `python -m pytest tests/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from conftest import SAMPLES, sample_session, settle

from tui_prof.tui.app import TuiprofApp

_settle = settle


def test_browse_80x24(snap_compare) -> None:
    assert snap_compare(TuiprofApp(sample_session("input_bound")), terminal_size=(80, 24), run_before=_settle)


def test_browse_120x40_steps_tab(snap_compare) -> None:
    async def steps_tab(pilot) -> None:
        await _settle(pilot)
        await pilot.press("2")
        await pilot.pause()

    assert snap_compare(TuiprofApp(SAMPLES / "custom_loop"), terminal_size=(120, 40), run_before=steps_tab)


def test_experiments_80x24(snap_compare) -> None:
    async def experiments(pilot) -> None:
        await _settle(pilot)
        await pilot.press("e")
        await _settle(pilot)

    assert snap_compare(TuiprofApp(SAMPLES), terminal_size=(80, 24), run_before=experiments)
