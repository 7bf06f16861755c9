"""How every view and dialog looks, at an SSH terminal's 80×24 and at 120×40 (SVG snapshots).

Regenerate after an intended change: `python -m pytest tests/tui/test_snapshots.py --snapshot-update`,
then look at the SVGs (tests/tui/__snapshots__/test_snapshots/) before committing them. Snapshots
hold nothing that changes between runs or clones: paths are relative to the repository root (the
tests run from there), no clocks, no timings, and each waits for its workers to settle.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import (
    GPU_LOGDIR,
    REPO,
    SAMPLES,
    filled,
    needs_shared,
    sample_session,
    settle,
    shown,
    until,
)
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from tui_prof.tui.app import TuiprofApp

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]
Before = Callable[[Pilot[int]], Awaitable[None]]
# pytest-textual-snapshot's fixture: (app, press=, terminal_size=, run_before=) -> it matched.
SnapCompare = Callable[..., bool]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths on screen are relative to the working directory: the same in every clone."""
    monkeypatch.chdir(REPO)


def _rel(path: Path) -> Path:
    return Path(os.path.relpath(path, REPO))


def _steady(pilot: Pilot[int]) -> None:
    """Text cursors shown steadily: a blinking one is on or off depending on when the picture is
    taken (on a loaded machine the blink's half-second passes while the test settles)."""
    for field in pilot.app.screen.query(Input).results(Input):
        field.cursor_blink = False
    for area in pilot.app.screen.query(TextArea).results(TextArea):
        area.cursor_blink = False
        # Textual (8.2) keys a TextArea's cached lines on the blink phase only while it blinks:
        # the cursor's line drawn in the off phase came back from the cache without its cursor.
        area.notify_style_update()  # what a style change does: drop the cached lines
        area.refresh()


async def _still(pilot: Pilot[int]) -> None:
    """Cursors steady, then the screen unchanged over two looks 0.1 s apart. Workers done is not
    enough: the tabs a summary brings mount over several turns of the event loop, and on a loaded
    machine a picture once caught the Overview's tab with its parts not yet drawn. Animations
    (the tabs' underline) are waited for first."""
    _steady(pilot)
    # A tab switch slides its underline: on a loaded machine two looks caught it mid-slide.
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    before = pilot.app.export_screenshot()
    for _ in range(50):
        await pilot.pause(0.1)
        now = pilot.app.export_screenshot()
        if now == before:
            return
        before = now
    raise AssertionError("the screen kept changing for 5 s")


def _keys(*keys: str) -> Before:
    """Settle, press the keys, settle again; cursors steady."""

    async def run(pilot: Pilot[int]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await _still(pilot)

    return run


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(
    ("tab", "key"), [("overview", "1"), ("steps", "2"), ("top_ops", "3"), ("kernels", "4")]
)
def test_browse_sample(
    snap_compare: SnapCompare, size: tuple[int, int], tab: str, key: str
) -> None:
    """A CPU session of the samples: the tree, the headline, each tab (Kernels says why empty)."""
    app = TuiprofApp(_rel(SAMPLES))
    assert snap_compare(app, terminal_size=size, run_before=_keys(key))


@needs_shared
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("tab", "key"), [("top_ops", "3"), ("kernels", "4")])
def test_browse_gpu_profile(
    snap_compare: SnapCompare, size: tuple[int, int], tab: str, key: str
) -> None:
    """The 8-GPU profile: op scopes keep their tails, Eigen kernels read apart, the detail line."""
    app = TuiprofApp(_rel(GPU_LOGDIR))
    assert snap_compare(app, terminal_size=size, run_before=_keys(key))


@pytest.mark.parametrize("size", SIZES)
def test_browse_input_bound(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    app = TuiprofApp(_rel(sample_session("input_bound")))
    assert snap_compare(app, terminal_size=size, run_before=_keys())


@pytest.mark.parametrize("size", SIZES)
def test_experiments(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """The sample experiment: runs, the selected run's log, the comparison (columns that fit)."""
    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=_keys("e"))


@pytest.mark.parametrize("size", SIZES)
def test_captures_empty(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=_keys("c"))


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(
        TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=_keys("question_mark")
    )


@pytest.mark.parametrize("size", SIZES)
def test_start_experiment_dialog(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    async def run(pilot: Pilot[int]) -> None:
        await _keys("r")(pilot)
        # "Run in" shows the absolute working directory, which differs from clone to clone.
        pilot.app.screen.query_one("#workdir", Input).value = "/srv/project"
        await settle(pilot)
        await _still(pilot)

    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=run)


@pytest.mark.parametrize("size", SIZES)
def test_capture_dialog(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=_keys("a"))


@pytest.mark.parametrize("size", SIZES)
def test_quit_dialog(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """What quitting asks while runs are active (pushed as the app does: 1 running, 5 waiting)."""
    from tui_prof.tui.screens.quit_dialog import QuitDialog

    async def ask(pilot: Pilot[int]) -> None:
        await settle(pilot)
        await pilot.app.push_screen(QuitDialog(1, 5))
        await settle(pilot)
        await _still(pilot)

    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=ask)


@pytest.mark.parametrize("size", SIZES)
def test_command_palette(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """The palette offers the browse view's actions (typed filter: deterministic order)."""

    async def palette(pilot: Pilot[int]) -> None:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"tab")
        await settle(pilot)
        await _still(pilot)  # the filter's cursor steady too

    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=palette)


@pytest.mark.parametrize("size", SIZES)
def test_program_dialog(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """`P` on a JAX session whose steps are an XLA program's runs: which program."""
    app = TuiprofApp(_rel(SAMPLES / "jax_program_runs"))
    assert snap_compare(app, terminal_size=size, run_before=_keys("P"))


@pytest.mark.parametrize("size", SIZES)
def test_peak_dialog(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """`T` on a CPU PyTorch trace: the table has no peak for it, the dialog says so."""
    app = TuiprofApp(_rel(SAMPLES / "torch_float32"))
    assert snap_compare(app, terminal_size=size, run_before=_keys("T"))


@pytest.mark.parametrize("size", SIZES)
def test_diff_view(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """Keras float32 marked as A (`m`), mixed precision diffed against it (`d`)."""
    from tui_prof.tui.widgets.profile_tree import ProfileTree

    a, b = sample_session("keras_fit_float32"), sample_session("keras_fit_mixed")

    async def go_to(pilot: Pilot[int], target: Path) -> None:
        tree = pilot.app.screen.query_one(ProfileTree)
        for _ in range(60):  # j until the cursor is on the session, as a user would
            node = tree.cursor_node
            if node is not None and getattr(node.data, "path", None) == target:
                break
            await pilot.press("j")
        await settle(pilot)

    async def diff(pilot: Pilot[int]) -> None:
        from tui_prof.tui.screens.diff import DiffRowsTable, DiffScreen

        await settle(pilot)
        await go_to(pilot, _rel(a))
        await pilot.press("m")
        tree = pilot.app.screen.query_one(ProfileTree)
        await until(pilot, lambda: "A▸" in str(getattr(tree.cursor_node, "label", "")))
        await go_to(pilot, _rel(b))
        await pilot.press("d")
        # The Diff screen with its rows, then still: a settle alone could end before its redraw
        # on a loaded machine (the other snapshots wait the same way, in _keys).
        await until(pilot, lambda: isinstance(pilot.app.screen, DiffScreen))
        await filled(pilot, "#diff-ops", DiffRowsTable)
        await settle(pilot)
        pilot.app.clear_notifications()  # "A: …, press d" would sit over the table
        await _still(pilot)

    assert snap_compare(TuiprofApp(_rel(SAMPLES)), terminal_size=size, run_before=diff)


@pytest.mark.parametrize("size", SIZES)
def test_session_without_steps(
    snap_compare: SnapCompare,
    size: tuple[int, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TPU profile without step markers: what the devices did, the programs, no empty table."""
    from xla_profiles import tpu_job

    job = tmp_path / "tpu_job"
    tpu_job(job)
    monkeypatch.chdir(job)  # the title and paths read "." in every run
    assert snap_compare(TuiprofApp(Path(".")), terminal_size=size, run_before=_keys())


@pytest.mark.parametrize("size", SIZES)
def test_legacy_tool_files(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """An older TensorBoard session (tool files, no xplane): the steps it saved then."""
    app = TuiprofApp(_rel(REPO / "tests" / "data" / "legacy_tf22"))
    assert snap_compare(app, terminal_size=size, run_before=_keys())


@pytest.mark.parametrize("size", SIZES)
def test_timeline_tab(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    """The slowest step of a GPU trace, the cursor moved two events and zoomed in once."""
    from tui_prof.tui.widgets.timeline_view import TimelineView

    async def run(pilot: Pilot[int]) -> None:
        await settle(pilot)
        await pilot.press("5")
        # The view reads the trace in a worker that starts a frame after it is mounted: the keys
        # go to it once it has the step and the focus (a settle could end before, under load).
        view = await shown(pilot, TimelineView)
        await until(pilot, lambda: view.step_tl is not None and pilot.app.focused is view)
        await pilot.press("right", "right", "plus")
        await settle(pilot)
        await _still(pilot)

    app = TuiprofApp(_rel(SAMPLES / "torch_cuda_autocast"))
    assert snap_compare(app, terminal_size=size, run_before=run)
