"""Keys that apply: the footer offers x, X and s only where they act; help lists every binding."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from conftest import SAMPLES, settle, until
from textual.binding import Binding
from textual.keys import format_key
from textual.widgets._footer import FooterKey

from tui_prof.tui.app import TuiprofApp


def _footer(app: TuiprofApp) -> set[str]:
    return {k.key for k in app.screen.query(FooterKey)}


def test_help_lists_every_binding_of_every_view() -> None:
    from tui_prof.tui.screens.browse import BrowseScreen
    from tui_prof.tui.screens.captures import CapturesScreen
    from tui_prof.tui.screens.experiments import ExperimentsScreen
    from tui_prof.tui.screens.help import help_markdown
    from tui_prof.tui.widgets.profile_tree import ProfileTree

    text = help_markdown()
    for cls in (TuiprofApp, BrowseScreen, ExperimentsScreen, CapturesScreen, ProfileTree):
        for b in Binding.make_bindings(cls.BINDINGS):
            assert b.description in text, f"{cls.__name__}: {b.key} ({b.description}) missing"
            key = b.key_display or format_key(b.key)
            assert key in text, f"{cls.__name__}: key {key} missing"


async def test_the_view_shown_leaves_its_own_key_out_of_the_footer() -> None:
    app = TuiprofApp(SAMPLES)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "b" not in _footer(app) and {"e", "r", "a", "q"} <= _footer(app)
        await pilot.press("e")
        await until(pilot, lambda: "b" in _footer(app))  # Experiments' footer, however slow
        await settle(pilot)
        assert "e" not in _footer(app)
        assert not {"x", "X"} & _footer(app)  # nothing of this session's is running
        await until(pilot, lambda: "d" in _footer(app))  # the sample's two variants


async def test_x_and_X_show_while_this_sessions_runs_do(tmp_path: Path) -> None:
    from tui_prof.experiments.spec import load_spec
    from tui_prof.tui.screens.start_dialog import StartRequest

    job = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.02)\n"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'name = "keys"\ncommand = {json.dumps([sys.executable, "-c", job])}\nrepeats = 1\n'
        f'workdir = "{tmp_path}"\noutput = "{tmp_path / "out"}"\n'
    )
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app._start(StartRequest(load_spec(spec)))
        await until(pilot, lambda: bool(app.runners) and app.screen is app.experiments)
        runner = next(iter(app.runners.values()))
        await until(pilot, lambda: bool(runner.active))
        await until(pilot, lambda: {"x", "X"} <= _footer(app))
        (tmp_path / "go").touch()
        await until(pilot, lambda: runner.done)
        await until(pilot, lambda: not {"x", "X"} & _footer(app))
        assert "d" not in _footer(app)  # one variant: nothing to diff it with


async def test_s_shows_only_while_a_capture_runs(tmp_path: Path) -> None:
    """A server that accepts and never answers keeps a capture waiting: s shows, then stops it."""
    from tui_prof.tui.screens.capture_dialog import CaptureRequest

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        app = TuiprofApp(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("c")
            await until(
                pilot,
                lambda: (
                    app.is_screen_installed("captures") and app.screen is app.get_screen("captures")
                ),
            )
            await settle(pilot)
            assert "s" not in _footer(app)
            app._capture(CaptureRequest((address,), str(tmp_path), 5000, None, None))
            await until(pilot, lambda: "s" in _footer(app))
            await pilot.press("s")
            await until(pilot, lambda: "s" not in _footer(app))
