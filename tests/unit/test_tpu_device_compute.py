"""A TPU session read without the converter: its device compute is the work of the cores' "XLA
Ops" lines, as xprof reads a core's step (ConvertDeviceTraceXPlaneToStepEvents reads the op
line alone; the rest of the step is idle), not the spans of its programs' runs ("XLA Modules"),
which also cover the gaps between their ops. Several hosts' devices are named host, then device.

The profiles are tests/xla_profiles.tpu_steps_job (per core and step: a module run of 50 µs plus
the all-reduce, holding a 40 µs bf16 fusion and the all-reduce with 5 µs gaps before and between).
The expected figures are the union of the ops' own intervals, read from the files here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xla_profiles import tpu_steps_job

from tui_prof.profiles.load import summarize_session
from tui_prof.profiles.xplane.line_events import MISSING
from tui_prof.profiles.xplane.utilization import union_ps
from tui_prof.profiles.xplane.xspace import XSpaceFile, read_plane
from tui_prof.render.summary import utilization_text


def _ops_by_step(paths: list[Path], line: str) -> dict[int, dict[str, list[tuple[int, int]]]]:
    """Per step (group_id) and op kind (fusion, all-reduce), the intervals (ps) of a TPU line's
    events, over every core of every host."""
    out: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for path in paths:
        with XSpaceFile(path) as space:
            for ref in space.planes:
                if not (ref.device and ref.device[0] == "TPU"):
                    continue
                pe = read_plane(space, ref, stats=("group_id",))
                for le in pe.lines:
                    if le.name != line:
                        continue
                    for i in range(len(le.start_ps)):
                        step = int(le.ints["group_id"][i])
                        assert step != MISSING
                        name = pe.meta.event_names[int(le.metadata_id[i])]
                        kind = "all-reduce" if "all-reduce" in name.split("=")[0] else "other"
                        iv = (int(le.start_ps[i]), int(le.end_ps[i]))
                        out.setdefault(step, {}).setdefault(kind, []).append(iv)
    return out


def _union_ms(intervals: list[tuple[int, int]]) -> float:
    start = np.array([a for a, _ in intervals], dtype=np.int64)
    end = np.array([b for _, b in intervals], dtype=np.int64)
    return union_ps(start, end) / 1e9


@pytest.mark.parametrize("hosts", [1, 2])
def test_tpu_device_compute_is_the_xla_ops_not_the_modules(tmp_path: Path, hosts: int) -> None:
    tpu_steps_job(tmp_path, hosts=hosts)
    paths = sorted(tmp_path.rglob("*.xplane.pb"))
    assert len(paths) == hosts
    s = summarize_session(tmp_path, force_fallback=True)
    assert [b.step for b in s.steps] == [0, 1, 2, 3]
    ops = _ops_by_step(paths, "XLA Ops")
    modules = _ops_by_step(paths, "XLA Modules")
    for b in s.steps:
        compute = _union_ms(ops[b.step]["other"])
        collectives = _union_ms(ops[b.step]["all-reduce"])
        all_ops = _union_ms(ops[b.step]["other"] + ops[b.step]["all-reduce"])
        module = _union_ms(modules[b.step]["other"])
        assert b.breakdown_ms["device_compute"] == pytest.approx(compute, abs=1e-9)
        assert b.breakdown_ms["device_collectives"] == pytest.approx(collectives, abs=1e-9)
        assert compute + collectives == pytest.approx(all_ops, abs=1e-9)
        # what the modules' spans counted: the gaps between the ops, and the collectives
        assert b.breakdown_ms["device_compute"] < module - 0.009
        # the step still lasts as long as its longest program run: the gaps are "other"
        assert b.step_time_ms == pytest.approx(module, abs=1e-9)
        assert b.breakdown_ms["other"] == pytest.approx(module - all_ops, abs=1e-9)
    assert s.precision is not None
    assert s.precision.compute_16bit_percent == pytest.approx(100.0)  # the bf16 fusions alone


def test_several_hosts_devices_read_host_then_device(tmp_path: Path) -> None:
    tpu_steps_job(tmp_path, hosts=2)
    s = summarize_session(tmp_path, force_fallback=True)
    u = s.device_utilization
    assert u is not None and u.rule == "duty_cycle"
    names = sorted(d.name for d in u.devices)
    assert names == [f"tpuhost{h} · /device:TPU:{c}" for h in (0, 1) for c in (0, 1)]
    text = utilization_text(u).plain
    assert "tpuhost0 · TPU:1" in text and "tpuhost0TPU" not in text
    assert sorted(s.environment.device_names) == names
