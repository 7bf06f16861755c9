"""The Timeline tab (key 5): its keys move what they should, on a real PyTorch trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, settle, shown, until
from textual.pilot import Pilot

from tui_prof.profiles.timeline.load import load_timeline
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.widgets.timeline_view import TimelineView

TRACE = SAMPLES / "torch_cuda_autocast"


async def _timeline_tab(pilot: Pilot[Any]) -> TimelineView:
    """Key 5, then the tab's view once it has read the session (or said why not) and has the
    keys. The view is mounted, then reads in a worker, over several frames: a settle could end
    before the worker began on a loaded machine."""
    await pilot.press("5")
    view = await shown(pilot, TimelineView)
    await until(
        pilot,
        lambda: (
            (view.step_tl is not None or view.message.plain.startswith("No timeline"))
            and pilot.app.focused is view
        ),
    )
    await settle(pilot)
    return view


async def test_timeline_tab_keys_move_step_zoom_pan_and_cursor() -> None:
    tl = load_timeline(TRACE)
    nums = tl.step_numbers()
    app = TuiprofApp(Path(TRACE))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = await _timeline_tab(pilot)
        assert app.focused is view
        st = view.step_tl
        assert st is not None and st.step == tl.slowest()  # the slowest step first
        assert (view.view.lo, view.view.hi) == (0.0, st.duration_us)
        await pilot.press("right", "right")
        assert view.event == 2 and view.cursor == float(st.tracks[view.track].start[2])
        await pilot.press("plus")
        w = view.view.hi - view.view.lo
        assert w == st.duration_us / 2 and view.view.lo <= view.cursor <= view.view.hi
        lo = view.view.lo
        await pilot.press("full_stop")
        assert view.view.lo == min(lo + w / 4, st.duration_us - w)
        await pilot.press("z")
        assert (view.view.lo, view.view.hi) == (0.0, st.duration_us)
        await pilot.press("down")
        assert view.track == 1
        await pilot.press("right_square_bracket")
        k = nums.index(st.step)
        assert view.step_tl is not None
        assert view.step_tl.step == nums[min(k + 1, len(nums) - 1)]
        # M from the slowest step: `]` already went to the next one, here the median too
        await pilot.press("s")
        assert view.step_tl.step == tl.slowest() != tl.median()
        await pilot.press("M")
        assert view.step_tl.step == tl.median()
        await pilot.press("s")
        assert view.step_tl.step == tl.slowest()
        for _ in range(60):  # to a kernel on the GPU stream, then to the call that launched it
            if st.tracks[view.track].kind == "device":
                break
            await pilot.press("down")
        await pilot.press("right")
        dev_track, kernel = view.track, view.event
        assert kernel is not None
        await pilot.press("p")
        assert view.track != dev_track and st.tracks[view.track].kind == "host"
        call = st.tracks[view.track]
        assert view.event is not None
        assert call.corr[view.event] == st.tracks[dev_track].corr[kernel] >= 0
        await pilot.press("up")  # the host thread above the GPU stream: collapse its host
        group = st.tracks[view.track].group
        members = sum(1 for t in st.tracks if t.group == group)
        rows = len(view.step_tl.tracks)
        await pilot.press("g")
        merged = view.step_tl.tracks[view.track]
        assert merged.group == group and len(view.step_tl.tracks) == rows - members + 1
        assert len(merged.start) == sum(len(t.start) for t in st.tracks if t.group == group)
        await pilot.press("g")
        assert len(view.step_tl.tracks) == rows
        await pilot.press("v")  # the slowest beside the median step
        assert view.versus and view.step_tl.step == tl.slowest()
        drawn = view.render()
        assert "against the median step" in "".join(
            t.plain for t in getattr(drawn, "renderables", [])
        )
        await pilot.press("v")
        assert not view.versus
        await pilot.press("slash")  # find: the first aten::addmm on any track
        await pilot.press(*"addmm", "enter")
        await settle(pilot)
        assert app.focused is view and view.query_text == "addmm"
        st = view.step_tl
        assert st is not None and view.event is not None
        t = st.tracks[view.track]
        assert "addmm" in st.event_name(int(t.nid[view.event]))
        first = view.cursor
        await pilot.press("n")
        assert view.cursor > first
        assert "addmm" in st.event_name(int(st.tracks[view.track].nid[view.event]))


async def test_legacy_session_says_it_has_no_events() -> None:
    legacy = Path(__file__).parents[1] / "data" / "legacy_tf22"
    app = TuiprofApp(legacy)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = await _timeline_tab(pilot)
        assert view.step_tl is None
        assert "no events" in view.message.plain


async def test_h_cycles_ranks_of_a_multi_rank_session(tmp_path: Path) -> None:
    from kineto_factory import write_rank

    run = tmp_path / "run"
    write_rank(run / "host_11.1700000000000.pt.trace.json.gz", 0, 1.0)
    write_rank(run / "host_12.1700000000013.pt.trace.json.gz", 1, 1.5)
    app = TuiprofApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = await _timeline_tab(pilot)
        assert view.step_tl is not None and view.step_tl.source == "host_12"
        slow = view.step_tl.duration_us
        await pilot.press("h")
        assert view.source == "host_11" and view.step_tl.source == "host_11"
        assert view.step_tl.duration_us * 1.5 == pytest.approx(slow)
        await pilot.press("h", "h")
        assert view.source is None and view.step_tl.source == "host_12"


async def test_detail_shows_shapes_and_p_goes_from_op_to_kernel_and_back() -> None:
    app = TuiprofApp(SAMPLES / "torch_cuda_float32")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = await _timeline_tab(pilot)
        await pilot.press("slash", *"aten::mm", "enter")
        await settle(pilot)
        st = view.step_tl
        assert st is not None and view.event is not None
        op_track, op = view.track, view.event
        detail = view._detail(120).plain
        assert "aten::mm" in detail and "float[" in detail and "launched (p):" in detail
        kernels = st.launched(op_track, op)
        assert kernels
        await pilot.press("p")
        assert (view.track, view.event) == kernels[0]
        assert st.tracks[view.track].kind == "device"
        detail = view._detail(120).plain
        assert "launched by (p): aten::mm → cu" in detail  # cuLaunchKernel, cudaLaunchKernel
        await pilot.press("p")  # back to the runtime call inside the op
        call = st.tracks[view.track]
        assert view.track == op_track and view.event is not None
        assert (
            st.tracks[op_track].start[op] <= call.start[view.event] <= st.tracks[op_track].end[op]
        )


async def test_at_80x24_the_detail_and_tracks_fit_the_tab() -> None:
    """A long kernel name selected at 80×24: the view's lines fit its height and width, and the
    partner line (the last) is among them, with at least two track rows above."""
    app = TuiprofApp(SAMPLES / "torch_cuda_float32")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        view = await _timeline_tab(pilot)
        st = view.step_tl
        assert st is not None
        while st.tracks[view.track].kind != "device":
            await pilot.press("down")
        await pilot.press("right")
        width, height = view.size.width, view.size.height
        drawn = view.render()
        lines = [
            piece
            for part in getattr(drawn, "renderables", [])
            for piece in part.wrap(app.console, width)
        ]
        assert len(lines) <= height, [x.plain for x in lines]
        assert all(x.cell_len <= width for x in lines)
        assert lines[-1].plain.startswith("launched by (p): ")
        assert sum("│" in x.plain[:30] for x in lines) >= 2


async def test_timeline_tab_on_a_two_host_tpu_profile(tmp_path: Path) -> None:
    """A TPU profile of two hosts (XProf's lines per core): the tab shows each core's lines
    grouped, `h` picks a host, `g` folds a core's lines into one row, and `v` names the core
    whose collective grew."""
    from xla_profiles import tpu_steps_job

    tpu_steps_job(tmp_path, hosts=2)
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = await _timeline_tab(pilot)
        st = view.step_tl
        assert st is not None and st.step == 2
        assert [t.name for t in st.tracks if t.group == "TPU 1"] == [
            "TPU 1 Steps",
            "TPU 1 XLA Modules",
            "TPU 1 XLA Ops",
            "TPU 1 XLA TraceMe",
        ]
        await pilot.press("h", "h")
        assert view.source == "tpuhost1" and view.step_tl is not None
        assert view.step_tl.source == "tpuhost1"
        while view.step_tl.tracks[view.track].group != "TPU 0":
            await pilot.press("down")
        rows = len(view.step_tl.tracks)
        await pilot.press("g")
        assert len(view.step_tl.tracks) == rows - 3
        assert view.step_tl.tracks[view.track].name == "▸ TPU 0 (4)"
        await pilot.press("g", "v")
        drawn = "".join(t.plain for t in getattr(view.render(), "renderables", []))
        assert "against the median step" in drawn and "TPU 1 XLA Ops  (comm +0.05 ms)" in drawn
