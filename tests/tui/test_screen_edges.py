"""The screens' loose ends: the Overview scrolls from the keyboard, numbers are never cut at 80
columns, and the empty screen says what counts and where to find some."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, settle, shown, until
from rich.console import Console

from tui_prof.comparison.report import build_report
from tui_prof.experiments.diff_targets import diff_targets, path_target, variant_target
from tui_prof.experiments.reading import read_experiment
from tui_prof.render.diff import diff_renderable
from tui_prof.render.stats_table import report_view, tradeoff_table
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.browse import empty_message, shipped_samples

EXPERIMENT = SAMPLES / "experiment_mixed_precision"
CUT_NUMBER = re.compile(r"[-+]?\d[\d.,]*…|\b(?:n|ne|g|go|gon)…")


def _printed(renderable: object, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


async def _focused_overview(app: Any, pilot: Any) -> Any:
    """The Overview, once it has more than a screen to scroll and Tab has given it the focus."""
    await settle(pilot)
    await until(pilot, lambda: bool(app.screen.query("#overview")))
    overview = app.screen.query_one("#overview")
    await until(pilot, lambda: overview.max_scroll_y > 0)
    for _ in range(4):
        if app.focused is overview:
            break
        await pilot.press("tab")
    assert app.focused is overview
    return overview


async def test_the_overview_scrolls_from_the_keyboard() -> None:
    """At 80x24 the advice and the 16-bit line are below the fold: Tab reaches the Overview and
    ↓, PgDn and End scroll it."""
    app = TuiprofApp(SAMPLES / "custom_loop")
    async with app.run_test(size=(80, 24)) as pilot:
        overview = await _focused_overview(app, pilot)
        await pilot.press("down")
        await until(pilot, lambda: overview.scroll_y == 1)
        await pilot.press("pagedown")
        await until(pilot, lambda: overview.scroll_y > 1)
        await pilot.press("end")
        await until(pilot, lambda: overview.scroll_y == overview.max_scroll_y)


async def test_a_table_tab_shown_after_the_overview_scrolled_has_its_rows() -> None:
    """PgDn in the Overview, then `2`: the Steps table stayed empty (Textual sent it no Resize
    after a scroll, and a table draws for the width it gets); Top ops and Kernels alike."""
    from tui_prof.tui.widgets.summary_tables import FittedTable

    app = TuiprofApp(SAMPLES / "torch_cuda_float32")
    async with app.run_test(size=(80, 24)) as pilot:
        overview = await _focused_overview(app, pilot)
        for key, table_id in (("2", "#steps"), ("3", "#ops"), ("4", "#kernels")):
            await pilot.press("1")
            overview.focus()
            await pilot.press("pagedown")
            await until(pilot, lambda: overview.scroll_y > 0)
            await pilot.press(key)
            table = app.screen.query_one(table_id, FittedTable)

            def laid_out(t: FittedTable = table) -> bool:
                return t.size.width > 0

            def drawn(t: FittedTable = table) -> bool:
                return t.row_count > 0

            await until(pilot, laid_out)
            await until(pilot, drawn, timeout=10)


@pytest.mark.parametrize("moment", ["at_once", "tabs_there", "numbers_there"])
async def test_a_tab_key_pressed_while_the_tabs_mount_shows_its_tab(moment: str) -> None:
    """`2` pressed at start-up: before the tabs were mounted the key did nothing; before their
    own first activation landed the Steps tab was active with no pane shown (an empty table,
    as a snapshot once caught on a loaded machine) or the Overview came back over it."""
    from textual.widgets import TabbedContent

    from tui_prof.tui.widgets.session_view import SessionView
    from tui_prof.tui.widgets.summary_tables import FittedTable

    app = TuiprofApp(SAMPLES / "custom_loop")
    async with app.run_test(size=(120, 40)) as pilot:
        if moment == "tabs_there":
            await until(pilot, lambda: bool(app.screen.query("#tabs")))
        elif moment == "numbers_there":
            view = app.screen.query_one(SessionView)
            await until(pilot, lambda: view.summary is not None)
        await pilot.press("2")
        await settle(pilot)
        tabs = app.screen.query_one("#tabs", TabbedContent)
        table = await shown(pilot, "#steps", FittedTable)

        def drawn() -> bool:
            return tabs.active == "tab-steps" and table.size.width > 0 and table.row_count > 0

        await until(pilot, drawn, timeout=10)
        await pilot.pause(0.3)
        assert drawn()  # and nothing took it back


@pytest.mark.parametrize("width", [64, 72, 80, 100, 120])
def test_the_diff_tables_never_cut_a_number_or_a_mark(width: int) -> None:
    diffs = [
        diff_targets(
            path_target(SAMPLES / "keras_fit_float32"), path_target(SAMPLES / "keras_fit_mixed")
        ),
        diff_targets(variant_target(EXPERIMENT, "float32"), variant_target(EXPERIMENT, "mixed")),
    ]
    for d in diffs:
        out = _printed(diff_renderable(d), width)
        cells = [c.strip() for line in out.splitlines() for c in line.split("│")[2:]]
        assert not [c for c in cells if "…" in c], out
        assert "new" in out


@pytest.mark.parametrize("width", [30, 36, 44, 56, 80])
def test_the_tradeoff_table_gives_way_by_whole_columns(width: int) -> None:
    report = build_report(read_experiment(EXPERIMENT))
    assert report.tradeoff is not None
    out = _printed(tradeoff_table(report.tradeoff), width)
    assert not CUT_NUMBER.search(out), out
    assert ("wider" in out) == (width < 56), out


def test_the_comparison_never_cuts_a_number_at_80_columns() -> None:
    out = _printed(report_view(build_report(read_experiment(EXPERIMENT))), 80)
    assert not CUT_NUMBER.search(out), out
    assert "Trade-off" in out


def test_the_empty_screen_names_every_format_and_the_samples_only_where_they_are(
    tmp_path: Path,
) -> None:
    text = empty_message(tmp_path, None)
    assert str(tmp_path) in text
    assert "*.xplane.pb" in text and "PyTorch" in text and "*.pt.trace.json" in text
    assert "sample_traces" not in text  # a wheel ships none
    assert shipped_samples() == SAMPLES  # a checkout does
    assert "sample_traces" in empty_message(tmp_path, SAMPLES).splitlines()[-1]


async def test_the_footer_shows_whole_keys_only_at_any_width() -> None:
    """Keys that do not fit are left out whole: no key letter without its word, before or after a
    resize."""
    from textual.widgets._footer import FooterKey

    from tui_prof.tui.screens.base import KeysFooter

    app = TuiprofApp(SAMPLES / "custom_loop")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for width, height in ((80, 24), (81, 24), (99, 30), (120, 40), (80, 24)):
            await pilot.resize_terminal(width, height)
            footer = app.screen.query_one(KeysFooter)
            # Laid out for the new width and the same over two looks (a fixed 0.3 s could pass
            # first on a loaded machine).
            looks: list[object] = [None]

            def steady(footer: KeysFooter = footer, width: int = width) -> bool:
                keys = footer.query(FooterKey).results(FooterKey)
                look = (footer.region, [(k.key, k.region) for k in keys])
                same, looks[0] = look == looks[0], look  # noqa: B023 - one list per width
                return same and footer.region.right == width

            await until(pilot, steady)
            keys = list(footer.query(FooterKey).results(FooterKey))
            palette = [k for k in keys if k.has_class("-command-palette")]
            edge = footer.region.right - sum(k.outer_size.width for k in palette)
            shown = [k for k in keys if not k.has_class("-command-palette")]
            assert shown, width
            assert all(k.region.right <= edge for k in shown), (width, [k.key for k in shown])
            assert (width >= 99) == any(k.key == "a" for k in shown), width  # 'a Capture'
