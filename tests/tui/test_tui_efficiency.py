"""`T` in the TUI: MFU against the user's peak (the TUI's `--peak-tflops`), and back to the table's."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import SAMPLES, settle, shown, static_text, until
from textual.pilot import Pilot
from textual.widgets import Input

from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import load_summary
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.peak_dialog import PeakDialog, parse_peak

AUTOCAST = SAMPLES / "torch_cuda_autocast"  # H100: the table's fp16 dense peak
CPU = SAMPLES / "torch_float32"  # a CPU: no peak in the table


def test_parse_peak() -> None:
    assert parse_peak(" 989.5 ") == 989.5 and parse_peak("") is None
    for bad in ("0", "-3", "inf", "nan", "fast"):
        with pytest.raises(ValueError):
            parse_peak(bad)


async def _typing_into(pilot: Pilot[Any]) -> Input:
    """The dialog's field once it has the keys: typed at once, on a loaded machine the letters
    went to the screen below (where `a` opens the capture dialog)."""
    field = await shown(pilot, Input)
    await until(pilot, lambda: pilot.app.focused is field)
    return field


async def test_t_sets_the_peak_mfu_divides_by() -> None:
    e = load_summary(discover(AUTOCAST).sessions[0], use_cache=False).efficiency
    assert e is not None and e.achieved_tflops is not None and e.peak_tflops == 989.5
    app = TuiprofApp(AUTOCAST)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "of NVIDIA H100 SXM fp16 dense 989.5 TFLOP/s" in static_text(app, "#precision")
        await pilot.press("T")
        field = await _typing_into(pilot)
        assert isinstance(app.screen, PeakDialog)
        await pilot.press(*"abc")  # a number field: letters do not go in
        assert field.value == ""
        await pilot.press(*"10", "enter")
        await until(pilot, lambda: not isinstance(app.screen, PeakDialog))
        await settle(pilot)
        assert app.peak_tflops == 10.0
        mfu = 100 * e.achieved_tflops / 10.0  # by hand, against the given peak
        text = static_text(app, "#precision")
        assert f"MFU {mfu:.2g}% of 10 TFLOP/s (--peak-tflops)" in text
        await pilot.press("T")
        assert (await _typing_into(pilot)).value == "10"
        await pilot.press("ctrl+a", "ctrl+k", "enter")  # empty: the table's peak again
        await until(pilot, lambda: not isinstance(app.screen, PeakDialog))
        await settle(pilot)
        assert app.peak_tflops is None
        assert "989.5 TFLOP/s" in static_text(app, "#precision")


async def test_a_cpu_says_it_has_no_peak_and_how_to_give_one() -> None:
    app = TuiprofApp(CPU)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = static_text(app, "#precision")
        assert "MFU n/a: the hardware table has no dense peak for a CPU (T: give one)" in text
        await pilot.press("T")
        await _typing_into(pilot)
        await pilot.press(*"2.5", "enter")
        await until(pilot, lambda: not isinstance(app.screen, PeakDialog))
        await settle(pilot)
        assert "of 2.5 TFLOP/s (--peak-tflops)" in static_text(app, "#precision")


async def test_a_peak_given_on_the_command_line() -> None:
    app = TuiprofApp(CPU, peak_tflops=2.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "of 2.5 TFLOP/s (--peak-tflops)" in static_text(app, "#precision")


def test_the_tuis_command_line_takes_a_peak() -> None:
    from tui_prof.cli.main import build_tui_parser

    assert build_tui_parser().parse_args(["logs", "--peak-tflops", "2.5"]).peak_tflops == 2.5
    assert build_tui_parser().parse_args(["logs"]).peak_tflops is None
    with pytest.raises(SystemExit):
        build_tui_parser().parse_args(["logs", "--peak-tflops", "0"])
