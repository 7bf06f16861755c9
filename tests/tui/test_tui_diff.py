"""The Diff view as a person uses it: mark a session, diff another, read the rows, swap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import SAMPLES, filled, sample_session, settle, static_text, until
from textual.pilot import Pilot

from tui_prof.profiles.diff import diff_summaries
from tui_prof.profiles.load import summarize_session
from tui_prof.render.diff import fmt_delta
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.diff import DiffRowsTable, DiffScreen
from tui_prof.tui.widgets.profile_tree import ProfileTree


async def _mark_and_diff(app: Any, pilot: Pilot[Any], a_dir: Path, b_dir: Path) -> None:
    """`m` on A, `d` on B, as a user does, until the Diff screen is up."""
    await _go_to(pilot, a_dir)
    await pilot.press("m")
    tree = app.screen.query_one(ProfileTree)
    await until(pilot, lambda: "A▸" in str(getattr(tree.cursor_node, "label", "")))
    await _go_to(pilot, b_dir)
    await pilot.press("d")
    await until(pilot, lambda: isinstance(app.screen, DiffScreen))


async def _go_to(pilot: Pilot[Any], target: Path) -> None:
    tree = pilot.app.screen.query_one(ProfileTree)
    for _ in range(60):  # j until the cursor is on the session, as a user would
        node = tree.cursor_node
        if node is not None and getattr(node.data, "path", None) == target:
            break
        await pilot.press("j")
    await settle(pilot)


def _cell(app: Any, row: int, column: int) -> str | None:
    """A cell of the diff's table as text; None while the table is not (yet) there or redrawn."""
    tables = list(app.screen.query("#diff-ops").results(DiffRowsTable))
    if not tables or row >= tables[0].row_count:
        return None
    return str(tables[0].get_row_at(row)[column])


async def test_mark_then_diff_shows_every_op_in_the_diffs_order() -> None:
    a_dir, b_dir = sample_session("keras_fit_float32"), sample_session("keras_fit_mixed")
    expected = diff_summaries(summarize_session(a_dir), summarize_session(b_dir))
    app = TuiprofApp(SAMPLES)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")  # nothing marked yet: the key is off, no diff
        await settle(pilot)
        assert not isinstance(app.screen, DiffScreen)
        await _mark_and_diff(app, pilot, a_dir, b_dir)
        await settle(pilot)
        table = await filled(pilot, "#diff-ops", DiffRowsTable)
        assert table.row_count == len(expected.ops)
        first = table.get_row_at(0)
        assert str(first[3]) == fmt_delta(expected.ops[0].delta_ms)
        new = next(i for i, r in enumerate(expected.ops) if r.name in expected.only_in_b)
        assert str(table.get_row_at(new)[-1]) == "new"
        header = static_text(app, "#diff-header")
        assert "keras_fit_float32" in header and "Step time" in header
        # The selected row's full name, wherever the table cut it.
        assert expected.ops[0].name in static_text(app, "#diff-detail").replace("\n", "")
        await pilot.press("down")
        await until(
            pilot,
            lambda: expected.ops[1].name in static_text(app, "#diff-detail").replace("\n", ""),
        )

        await pilot.press("s")  # B against A: every change turns round
        await until(pilot, lambda: _cell(app, new, -1) == "gone")
        await settle(pilot)
        table = app.screen.query_one("#diff-ops", DiffRowsTable)
        assert str(table.get_row_at(0)[3]) == fmt_delta(-expected.ops[0].delta_ms)

        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DiffScreen))


async def test_experiment_variants_diff_from_the_experiments_view() -> None:
    app = TuiprofApp(SAMPLES / "experiment_mixed_precision")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen))
        await filled(pilot, "#diff-ops", DiffRowsTable)
        header = static_text(app, "#diff-header")
        assert "float32 (5 of 5 runs)" in header and "mixed (5 of 5 runs)" in header
        assert "± SE" in [
            str(c.label) for c in app.screen.query_one("#diff-ops", DiffRowsTable).columns.values()
        ]


async def test_the_no_spread_caveat_is_in_sight_at_80x24() -> None:
    """Two GPU traces: with device ops, kernels and an MFU line the header has 11 lines, the
    narrow screen shows 7, and the "One profile per side … may be noise" caveat came last, out
    of sight. It now follows the step time."""
    from textual.geometry import Region
    from textual.widgets import Static

    a_dir, b_dir = (
        next((SAMPLES / name).glob("*.pt.trace.json.gz"))
        for name in ("torch_cuda_autocast", "torch_cuda_float32")
    )
    app = TuiprofApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await _mark_and_diff(app, pilot, a_dir, b_dir)
        await filled(pilot, "#diff-ops", DiffRowsTable)
        await settle(pilot)
        header = app.screen.query_one("#diff-header", Static)
        assert 0 < header.size.height <= 7
        seen = " ".join(
            s.text for s in header.render_lines(Region(0, 0, header.size.width, header.size.height))
        )
        assert "Step time" in seen and "One profile per side" in seen, seen
