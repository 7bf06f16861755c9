"""The TUI as a person uses it: open, wait for the analysis, read the numbers on screen."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, filled, sample_session, settle, shown, static_text, until
from textual.widgets import DataTable, Input, TabbedContent
from textual.widgets.data_table import ColumnKey

from tui_prof.profiles.load import summarize_session
from tui_prof.render.summary import fmt_ms
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.browse import BrowseScreen
from tui_prof.tui.screens.experiments import ExperimentsScreen
from tui_prof.tui.screens.help import HelpScreen
from tui_prof.tui.widgets.profile_tree import ProfileTree
from tui_prof.tui.widgets.summary_tables import StepBreakdownTable

_settle = settle


async def test_opens_first_session_and_shows_its_numbers() -> None:
    expected = summarize_session(sample_session("custom_loop"))
    app = TuiprofApp(SAMPLES)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        headline = static_text(app, "#headline")
        assert expected.average is not None
        assert f"{fmt_ms(expected.average.step_time_ms)} ms" in headline
        assert "official step markers" in static_text(app, "#source")  # the overview's top
        await pilot.press("2")  # a table is drawn when its tab shows it
        table = await filled(pilot, StepBreakdownTable)
        assert table.row_count == len(expected.steps)
        first = table.get_row_at(0)
        assert first[1] == fmt_ms(expected.steps[0].step_time_ms)


async def test_navigating_with_j_and_tabs_loads_another_session() -> None:
    expected = summarize_session(sample_session("input_bound"))
    app = TuiprofApp(SAMPLES)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        tree = app.screen.query_one(ProfileTree)
        assert app.focused is tree
        target = sample_session("input_bound")
        for _ in range(40):  # j until the cursor is on input_bound's session, as a user would
            node = tree.cursor_node
            if node is not None and getattr(node.data, "path", None) == target:
                break
            await pilot.press("j")
        await _settle(pilot)
        assert "Input-bound" in static_text(app, "#headline")
        await pilot.press("2")
        table = await filled(pilot, StepBreakdownTable)
        assert app.screen.query_one("#tabs", TabbedContent).active == "tab-steps"
        col = list(table.columns).index(ColumnKey("input"))
        assert table.get_row_at(0)[col] == fmt_ms(expected.steps[0].breakdown_ms["input"])


async def test_help_opens_and_closes() -> None:
    app = TuiprofApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_bad_file_shows_error_and_the_rest_stays_browsable(tmp_path: Path) -> None:
    bad = tmp_path / "a_bad" / "plugins" / "profile" / "s"
    bad.mkdir(parents=True)
    (bad / "[bold]host.xplane.pb").write_bytes(b"\x00garbage")
    good = tmp_path / "b_good" / "plugins" / "profile"
    good.mkdir(parents=True)
    src = sample_session("custom_loop")
    shutil.copytree(src, good / src.name)
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        status = static_text(app, "#status")
        assert "could not read" in status
        assert app.screen.query_one("#status").has_class("error")
        await pilot.press("j", "j")
        await _settle(pilot)
        assert "official step markers" in static_text(app, "#source")
        assert not app.screen.query_one("#status").has_class("error")


async def test_empty_directory_names_sample_traces(tmp_path: Path) -> None:
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        assert "sample_traces" in static_text(app, "#status")


async def test_op_names_with_markup_are_shown_as_text(tmp_path: Path) -> None:
    """A real session's summary with its top op renamed to hold Rich markup, served through the
    summary cache the app reads: the brackets must reach the screen as typed (160 columns: the
    Type column shows beside the name, "% of side" and Side)."""
    import dataclasses

    from tui_prof.profiles import cache
    from tui_prof.profiles.load import session_of

    src = sample_session("custom_loop")
    shutil.copytree(src, tmp_path / "run" / "plugins" / "profile" / src.name)
    session = session_of(tmp_path / "run" / "plugins" / "profile" / src.name)
    real = summarize_session(session)
    assert real.top_ops, "the sample has op statistics"
    name, op_type = "[bold]MatMul[/]", "[red]Fused[/red]"
    marked = dataclasses.replace(real.top_ops[0], name=name, op_type=op_type)
    cache.store(
        cache.cache_key(session), dataclasses.replace(real, top_ops=(marked, *real.top_ops[1:]))
    )
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await _settle(pilot)
        await pilot.press("3")
        ops = await filled(pilot, "#ops", DataTable)
        assert ops.row_count == len(real.top_ops)
        shown = "\n".join(ops.render_line(y).text for y in range(ops.size.height))
        # As typed, not bold or red: the name whole, the type (cut to its column) with its brackets.
        assert name in shown and "[red]Fu…[/red]" in shown, shown


async def test_followed_logdir_shows_a_new_session_without_restart(tmp_path: Path) -> None:
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        assert "No profiles" in static_text(app, "#status")
        src = sample_session("custom_loop")
        dst = tmp_path / "job" / "plugins" / "profile" / src.name
        dst.mkdir(parents=True)
        data = next(src.glob("*.xplane.pb")).read_bytes()
        target = dst / "vm.xplane.pb"
        with open(target, "wb") as f:  # written in two halves, as a copy in progress would be
            f.write(data[: len(data) // 2])
            f.flush()
            await pilot.pause(1.0)
            f.write(data[len(data) // 2 :])
        await until(pilot, lambda: "official step markers" in static_text(app, "#source"))


async def test_r_starts_an_experiment_and_rows_turn_finished(tmp_path: Path) -> None:
    import sys

    from tui_prof.tui.widgets.run_table import RunTable

    job = tmp_path / "job.py"
    job.write_text(
        "import json, os\n"
        "with open(os.environ['TUIPROF_METRICS_FILE'], 'a') as f:\n"
        "    f.write(json.dumps({'metric': 'score', 'value': 1.0}) + '\\n')\n"
    )
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "tiny"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 2\n'
        f'output = "{tmp_path / "out"}"\n'
        '[variants.a]\n[variants.b]\nenv = { X = "1" }\n'
    )
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await pilot.press("r")
        spec_input = await shown(pilot, "#spec", Input)
        spec_input.value = str(spec)
        await pilot.click("#start")
        await until(pilot, lambda: isinstance(app.screen, ExperimentsScreen))
        table = await shown(pilot, RunTable)
        await until(
            pilot,
            lambda: (
                len(table.runs) == 4 and all(r.status == "finished" for r in table.runs.values())
            ),
            timeout=60,
        )
        await until(pilot, lambda: "score" in static_text(app, "#comparison"), timeout=20)


async def test_prefetched_first_session_is_shown_without_a_second_analysis() -> None:
    """launch() analyses the first session before Textual loads; the screen uses that result."""
    from tui_prof.profiles.prefetch import Prefetch

    pre = Prefetch(SAMPLES).start()
    pre.analysed.wait(30)
    assert pre.summary is not None
    app = TuiprofApp(SAMPLES, prefetch=pre)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        assert pre.used and pre.listing_used
        assert pre.summary.average is not None
        assert f"{fmt_ms(pre.summary.average.step_time_ms)} ms" in static_text(app, "#headline")


async def test_a_cold_start_shows_the_step_time_while_the_rest_is_read() -> None:
    """The analysis child reports the step time first; the screen shows it until the summary
    comes, then the headline says the same."""
    from tui_prof.profiles.discover import discover
    from tui_prof.profiles.prefetch import Prefetch

    pre = Prefetch(SAMPLES)  # as the launcher leaves it: listed, the child still at work
    pre.discovery = discover(SAMPLES)
    pre.session = pre.discovery.sessions[0]
    pre.progress = (0.4, "21.3 ms per step (5 steps); reading ops, kernels and memory …")
    pre.listed.set()
    app = TuiprofApp(SAMPLES, prefetch=pre)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "21.3 ms per step (5 steps)" in static_text(app, "#status"))
        assert static_text(app, "#headline").strip() == ""
        pre.summary = summarize_session(pre.session)
        pre.analysed.set()
        assert pre.summary.average is not None
        step = f"{fmt_ms(pre.summary.average.step_time_ms)} ms"
        await until(pilot, lambda: step in static_text(app, "#headline"), timeout=20)


async def test_capture_dialog_rejects_a_bad_address_in_one_line_and_stays_open(
    tmp_path: Path,
) -> None:
    from tui_prof.tui.screens.capture_dialog import CaptureDialog

    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        await pilot.press("a")
        (await shown(pilot, "#address", Input)).value = "not an address"
        assert isinstance(app.screen, CaptureDialog)
        await pilot.press("enter")
        await until(pilot, lambda: "bad address" in static_text(app, "#capture-error"))
        assert isinstance(app.screen, CaptureDialog)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CaptureDialog))


async def test_capture_with_no_server_says_so(tmp_path: Path) -> None:
    """A port nothing listens on (127.0.0.1 only): the Captures view reports it, nothing crashes."""
    import socket

    from tui_prof.tui.screens.captures import CapturesScreen

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        await pilot.press("a")
        (await shown(pilot, "#address", Input)).value = f"127.0.0.1:{port}"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CapturesScreen))
        await until(
            pilot, lambda: "no profiler server" in static_text(app, "#capture-status"), timeout=40
        )


async def test_an_experiment_writing_outside_the_open_path_joins_the_tree(tmp_path: Path) -> None:
    """Each run's profile appears in the browse tree, wherever the spec puts its output."""
    import sys

    from tui_prof.tui.widgets.run_table import RunTable

    browse_root = tmp_path / "logs"
    browse_root.mkdir()
    src = next(sample_session("custom_loop").glob("*.xplane.pb"))
    job = tmp_path / "job.py"
    job.write_text(  # a job that "profiles" by copying a real profile into its run dir
        "import os, shutil\n"
        "d = os.path.join(os.environ['TUIPROF_RUN_DIR'], 'plugins', 'profile', 's1')\n"
        "os.makedirs(d, exist_ok=True)\n"
        f"shutil.copyfile({str(src)!r}, os.path.join(d, 'vm.xplane.pb'))\n"
    )
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "outside"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 1\n'
        f'output = "{tmp_path / "elsewhere"}"\n[variants.a]\n'
    )
    app = TuiprofApp(browse_root)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await pilot.press("r")
        (await shown(pilot, "#spec", Input)).value = str(spec)
        await pilot.click("#start")
        await until(pilot, lambda: isinstance(app.screen, ExperimentsScreen))
        table = await shown(pilot, RunTable)
        await until(
            pilot,
            lambda: table.runs and all(r.status == "finished" for r in table.runs.values()),
            timeout=60,
        )
        browse = app.get_screen("browse")
        assert isinstance(browse, BrowseScreen)
        await until(
            pilot, lambda: browse.discovery is not None and len(browse.discovery.sessions) == 1
        )
        assert browse.discovery is not None
        assert browse.discovery.runs[0].name.endswith("runs/a-r0")


async def test_damaged_line_in_the_streaming_reader_shows_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xla_profiles import damaged_line

    monkeypatch.setenv("TUIPROF_LARGE_MB", "0")  # every session through the streaming reader
    src = sample_session("custom_loop")
    bad = tmp_path / "a_bad" / "plugins" / "profile" / "s"
    bad.mkdir(parents=True)
    (bad / "h.xplane.pb").write_bytes(damaged_line(next(src.glob("*.xplane.pb"))))
    good = tmp_path / "b_good" / "plugins" / "profile"
    good.mkdir(parents=True)
    shutil.copytree(src, good / src.name)
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        status = static_text(app, "#status")
        assert "damaged line" in status and "unexpected error" not in status, status
        tree = app.screen.query_one(ProfileTree)
        target = good / src.name
        for _ in range(20):  # j until the cursor is on the good session, as a user would
            node = tree.cursor_node
            if node is not None and getattr(node.data, "path", None) == target:
                break
            await pilot.press("j")
        await _settle(pilot)
        await until(pilot, lambda: "ms" in static_text(app, "#headline"))
        assert not app.screen.query_one("#status").has_class("error")
