"""TPU busy time is the converter's duty cycle, on TPU profiles written here with the project's
XSpace writer (no public TPU profile is at hand): the official converter reads the same file and
its overview's `device_duty_cycle_percent` must be tuiprof's figure.

The profile has what moves a duty cycle away from a plain busy share: a profile span much wider
than the programs (the old rule, busy over the whole profile, read 40% where the converter reads
more), off-duty ops (infeed, outfeed, host send), two cores of one chip whose ops overlap (one
union per chip) and a chip whose programs start later than the others'.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import official_overview
from xla_profiles import Event, Space

from tui_prof.profiles.load import load_summary
from tui_prof.profiles.xplane.utilization import device_utilization

CATEGORIES = {
    "fusion.1": "loop fusion",
    "convolution.2": "convolution",
    "infeed.3": "infeed",
    "outfeed.4": "outfeed",
    "send.5": "host send",
}


def _core_details(chip: int, core: int) -> bytes:
    from xprof.protobuf import op_stats_pb2

    details: bytes = op_stats_pb2.CoreDetails(local_chip_id=chip, core_num=core).SerializeToString()
    return details


def tpu_profile(root: Path) -> Path:
    """Three TPU cores on two chips, three runs of a program each (times in µs)."""
    sp = Space("t1v-n-0-w-0")
    sp.task_environment(0, 4000)
    sp.plane(1, "/host:CPU").line(1, "python", [("train_step", 10, 3900, {})])
    for plane, (chip, core, lag) in enumerate([(0, 0, 0), (0, 1, 35), (1, 0, 600)]):
        pl = sp.plane(
            10 + plane, f"/device:TPU:{plane}", {"core_details": _core_details(chip, core)}
        )
        for name, cat in CATEGORIES.items():
            pl.event_stats(name, {"hlo_category": cat})
        modules: list[Event] = []
        ops: list[Event] = []
        for i in range(3):
            t0 = 300 + 700 * i + lag
            modules.append(("jit_train_step(17)", t0, 520, {}))
            ops += [
                ("infeed.3", t0, 60, {}),
                ("fusion.1", t0 + 60, 140, {}),
                ("convolution.2", t0 + 210, 180 + 20 * plane, {}),
                ("send.5", t0 + 420, 30, {}),
                ("outfeed.4", t0 + 460, 50, {}),
            ]
        pl.line(1, "XLA Modules", modules)
        pl.line(2, "XLA Ops", ops)
    return sp.save(root, "tpu")


def _converter_duty_cycle(paths: list[Path]) -> str:
    for table in official_overview(paths):
        p = table.get("p") or {}
        if "device_duty_cycle_percent" in p:
            return str(p["device_duty_cycle_percent"])
    pytest.skip("this converter reports no device_duty_cycle_percent")


def test_tpu_busy_time_is_the_converters_duty_cycle(tmp_path: Path) -> None:
    session = tpu_profile(tmp_path)
    paths = sorted(session.glob("*.xplane.pb"))
    u = device_utilization(paths)
    assert u is not None and u.rule == "duty_cycle"
    assert f"{u.busy_percent:.1f}%" == _converter_duty_cycle(paths)
    # by hand: of each run chip 0 is active 385 µs (its cores' fusions and convolutions,
    # [60, 235) ∪ [210, 445)), chip 1 360 µs; each chip's span runs from its first program's
    # start to its last's end (1,955 and 1,920 µs)
    chip0, chip1 = 3 * 385, 3 * 360
    assert u.busy_percent == pytest.approx(100 * (chip0 + chip1) / (1955 + 1920))
    assert [round(d.busy_percent, 2) for d in u.devices] == [
        round(100 * 3 * 320 / 1920, 2),  # each core over its own span
        round(100 * 3 * 340 / 1920, 2),
        round(100 * 3 * 360 / 1920, 2),
    ]
    s = load_summary(session, use_cache=False)
    assert s.device_utilization == u
