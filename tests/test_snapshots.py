"""How the browse screen looks, at an SSH terminal's 80×24 and at 120×40 (SVG snapshots).

Regenerate after an intended change: `python -m pytest tests/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, sample_session, settle

from tui_prof.tui.app import TuiprofApp

_settle = settle


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths on screen are relative to the working directory: the same in every clone."""
    monkeypatch.chdir(REPO)


def _rel(path: Path) -> Path:
    return path.relative_to(REPO)


def test_browse_80x24(snap_compare) -> None:
    assert snap_compare(
        TuiprofApp(_rel(sample_session("input_bound"))), terminal_size=(80, 24), run_before=_settle
    )


def test_browse_120x40_steps_tab(snap_compare) -> None:
    async def steps_tab(pilot) -> None:
        await _settle(pilot)
        await pilot.press("2")
        await pilot.pause()

    assert snap_compare(
        TuiprofApp(_rel(SAMPLES / "custom_loop")), terminal_size=(120, 40), run_before=steps_tab
    )


def test_experiments_80x24(snap_compare) -> None:
    async def experiments(pilot) -> None:
        await _settle(pilot)
        await pilot.press("e")
        await _settle(pilot)

    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=(80, 24), run_before=experiments)
