"""tuiprof's own step finder, proved against TensorBoard's converter where the converter finds steps.

The proof: on profiles that carry official step markers, forcing the fallback gives the
same step count and per-category averages within 5% of the converter's, or within 0.05 ms for
categories too small for a relative bound to mean anything (0.05 ms is under 1% of every sample
step here, and what a 0.1 ms-rounded overview could not show anyway). Profiles with more than 5
steps, made at test time by replicating real ones, check that both drop the first and last step.
On Keras fit profiles, which the converter finds no steps in, the fallback finds one step per
profiled batch.
"""

from __future__ import annotations

import importlib.util
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import GPU_LOGDIR, REPO, needs_shared, official_overview, sample_session

from tui_prof.model import CATEGORIES, Cancelled, ProfileError
from tui_prof.profiles.xplane.proto import XSpace
from tui_prof.profiles.xplane.steps import FoundSteps, find_steps

GPU_FILE = GPU_LOGDIR / "plugins/profile/2020_demo/34.83.195.179_6003.xplane.pb"
# The overview's per-step table columns, under our category names.
COLUMNS = {
    "deviceComputeTimeMs": "device_compute",
    "deviceToDeviceTimeMs": "device_to_device",
    "deviceCollectivesTimeMs": "device_collectives",
    "hostComputeTimeMs": "host_compute",
    "kernelLaunchTimeMs": "kernel_launch",
    "infeedTimeMs": "input",
    "outfeedTimeMs": "output",
    "compileTimeMs": "compilation",
    "otherTimeMs": "other",
}
DERIVED_LINES = range(-559038737, -559038737 + 64)


def _official(paths: list[Path]) -> list[dict[str, Any]]:
    overview = official_overview(paths)
    table = next(t for t in overview if any(c["id"] == "stepTimeMs" for c in t["cols"]))
    ids = [c["id"] for c in table["cols"]]
    return [{ids[i]: c.get("v") for i, c in enumerate(r["c"])} for r in table["rows"]]


def _assert_matches_converter(found: FoundSteps, rows: list[dict[str, Any]]) -> None:
    assert len(found.steps) == len(rows) > 0
    ours = {c: np.mean([s.breakdown_ms[c] for s in found.steps]) for c in CATEGORIES}
    theirs = {c: np.mean([r[col] for r in rows]) for col, c in COLUMNS.items()}
    ours["step_time"] = np.mean([s.step_time_ms for s in found.steps])
    theirs["step_time"] = np.mean([r["stepTimeMs"] for r in rows])
    for cat, value in theirs.items():
        assert abs(ours[cat] - value) <= max(0.05 * value, 0.05), (cat, ours[cat], value)
    for s in found.steps:  # every step's categories add up to its time
        assert abs(sum(s.breakdown_ms.values()) - s.step_time_ms) < 1e-6


@pytest.mark.parametrize("name", ["custom_loop", "input_bound", "keras_fit_step_markers"])
def test_fallback_equals_converter_on_cpu_profiles(name: str) -> None:
    paths = sorted(sample_session(name).glob("*.xplane.pb"))
    found = find_steps(paths)
    assert found.source == "step_markers"
    assert "train" in found.detail
    _assert_matches_converter(found, _official(paths))
    assert found.device_compute_16bit_percent is None


@needs_shared
def test_fallback_equals_converter_on_gpu_profile() -> None:
    found = find_steps([GPU_FILE])
    assert found.source == "xprof_groups"
    _assert_matches_converter(found, _official([GPU_FILE]))
    assert found.device_compute_16bit_percent is not None
    assert round(found.device_compute_16bit_percent, 1) == 30.5  # the README's 30.5% 16-bit


def _replicated(src: Path, out: Path, copies: int) -> Path:
    """The benchmark's replicator: `copies` shifted copies of a profile's events, one file named
    as `src` (the converter names hosts by file name)."""
    spec = importlib.util.spec_from_file_location(
        "make_large_profile", REPO / "benchmarks" / "make_large_profile.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: Path = module.replicate(src, out, copies, 0.0)["path"]
    return path


@needs_shared
@pytest.mark.parametrize("copies", [5, 7])
def test_many_gpu_steps_drop_the_edge_steps_as_the_converter_does(
    tmp_path: Path, copies: int
) -> None:
    """One step per copy of the GPU profile: above 5 steps the converter keeps all but the first
    and the last, and so does the fallback (same step numbers, same averages)."""
    path = _replicated(GPU_FILE, tmp_path, copies)
    rows = _official([path])
    found = find_steps([path])
    assert found.source == "xprof_groups"
    assert len(rows) == (copies if copies <= 5 else copies - 2)
    assert [s.step for s in found.steps] == [int(r["stepnum"]) for r in rows]
    _assert_matches_converter(found, rows)


def test_many_cpu_steps_drop_the_edge_steps_as_the_converter_does(tmp_path: Path) -> None:
    """Two copies of a 5-step custom loop: 10 marked steps, of which the converter keeps 8; so do
    the markers and, forcing the last fallback, the train-step tf.function calls."""
    src = next(sample_session("custom_loop").glob("*.xplane.pb"))
    path = _replicated(src, tmp_path, 2)
    rows = _official([path])
    assert len(rows) == 8
    found = find_steps([path])
    assert found.source == "step_markers"
    _assert_matches_converter(found, rows)
    calls = find_steps([path], prefer_official_markers=False)
    assert calls.source == "tf_function_calls"
    assert len(calls.steps) == len(rows)


def _raw_gpu_profile(tmp_path: Path) -> Path:
    """The shared GPU profile as a profiler writes it before TensorBoard's grouping: no group_id
    or step_name stats, no derived lines; the root that the converter grouped step 0 under
    (a FunctionRun) carries a step number, as a `_r=1` step marker does."""
    space = XSpace.FromString(GPU_FILE.read_bytes())
    host = space.planes[0]
    stat = {m.name: k for k, m in host.stat_metadata.items()}
    names = {k: m.name for k, m in host.event_metadata.items()}
    new_ids = iter(range(max(host.stat_metadata) + 1, max(host.stat_metadata) + 3))
    for name in ("step_num", "_r"):
        if name not in stat:
            stat[name] = next(new_ids)
            host.stat_metadata[stat[name]].id = stat[name]
            host.stat_metadata[stat[name]].name = name
    for line in host.lines:
        for e in line.events:
            if names[e.metadata_id] == "FunctionRun" and any(
                s.metadata_id == stat["group_id"] and s.int64_value == 0 for s in e.stats
            ):
                e.stats.add(metadata_id=stat["step_num"], int64_value=7)
                e.stats.add(metadata_id=stat["_r"], int64_value=1)
    for plane in space.planes:
        drop = {k for k, m in plane.stat_metadata.items() if m.name in ("group_id", "step_name")}
        kept = [ln for ln in plane.lines if ln.id not in DERIVED_LINES]
        del plane.lines[:]
        plane.lines.extend(kept)
        for line in plane.lines:
            for e in line.events:
                for s in [s for s in e.stats if s.metadata_id in drop]:
                    e.stats.remove(s)
    out = tmp_path / "host.xplane.pb"
    out.write_bytes(space.SerializeToString())
    return out


@needs_shared
def test_raw_gpu_profile_steps_follow_launches(tmp_path: Path) -> None:
    """Without the converter's groups, device kernels join the step whose host call tree launched
    them (correlation ids), and the breakdown is the converter's on the grouped original."""
    found = find_steps([_raw_gpu_profile(tmp_path)])
    assert found.source == "step_markers"
    assert [s.step for s in found.steps] == [7]
    _assert_matches_converter(found, _official([GPU_FILE]))


@pytest.mark.parametrize("name", ["keras_fit_float32", "keras_fit_mixed"])
def test_keras_fit_profiles_find_profiled_batches(name: str) -> None:
    paths = sorted(sample_session(name).glob("*.xplane.pb"))
    assert not _official(paths), "the converter now finds steps here: this test proves nothing"
    batches = []
    for p in paths:
        space = XSpace.FromString(p.read_bytes())
        host = next(pl for pl in space.planes if pl.name == "/host:CPU")
        ids = {k for k, m in host.event_metadata.items() if m.name == "Profiled batch"}
        step_num = next(k for k, m in host.stat_metadata.items() if m.name == "step_num")
        batches += [
            s.int64_value
            for ln in host.lines
            for e in ln.events
            if e.metadata_id in ids
            for s in e.stats
            if s.metadata_id == step_num
        ]
    found = find_steps(paths)
    assert found.source == "keras_profiled_batch"
    assert "Profiled batch" in found.detail
    assert [s.step for s in found.steps] == sorted(batches) and len(batches) >= 3
    for s in found.steps:
        assert s.step_time_ms > 0
        assert s.breakdown_ms["host_compute"] > 0.5 * s.step_time_ms  # a CPU job computes
        assert s.breakdown_ms["input"] > 0  # each batch waits on IteratorGetNext a little
        assert abs(sum(s.breakdown_ms.values()) - s.step_time_ms) < 1e-6


def test_without_official_markers_tf_function_calls_are_the_steps() -> None:
    paths = sorted(sample_session("custom_loop").glob("*.xplane.pb"))
    official = find_steps(paths)
    found = find_steps(paths, prefer_official_markers=False)
    assert found.source == "tf_function_calls"
    assert "train_step" in found.detail
    assert len(found.steps) == len(official.steps) == 5  # none on both sides: nothing compared
    for ours, marker in zip(found.steps, official.steps, strict=True):
        assert ours.step_time_ms < marker.step_time_ms  # the call sits inside the 'train' marker


def test_hosts_of_one_session_combine(tmp_path: Path) -> None:
    src = sorted(sample_session("custom_loop").glob("*.xplane.pb"))[0]
    paths = [tmp_path / "worker0.xplane.pb", tmp_path / "worker1.xplane.pb"]
    for p in paths:
        shutil.copy(src, p)
    one, two = find_steps([src]), find_steps(paths)
    assert len(two.hosts) == 2
    assert [s.step for s in two.steps] == [s.step for s in one.steps]
    assert [s.step_time_ms for s in two.steps] == [s.step_time_ms for s in one.steps]
    assert "2 hosts" in two.detail


def test_progress_and_cancel() -> None:
    paths = sorted(sample_session("input_bound").glob("*.xplane.pb"))
    seen: list[float] = []
    find_steps(paths, progress=lambda f, _m: seen.append(f))
    assert seen and seen == sorted(seen) and seen[-1] == 1.0
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        find_steps(paths, cancel=cancel)


@needs_shared
def test_no_steps_anywhere_is_a_profile_error() -> None:
    # The GPU profile's only step source is the converter's groups; without them, nothing.
    with pytest.raises(ProfileError, match="no step markers"):
        find_steps([GPU_FILE], prefer_official_markers=False)


@pytest.mark.parametrize(
    "content",
    [b"", b"\x0a\x05abc", b"\x00" * 64, bytes(range(256)) * 16],
    ids=["empty", "truncated", "zeros", "bytes"],
)
def test_bad_files_raise_profile_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.xplane.pb"
    path.write_bytes(content)
    with pytest.raises(ProfileError) as err:
        find_steps([path])
    assert "\n" not in str(err.value)


def test_no_paths_is_a_profile_error() -> None:
    with pytest.raises(ProfileError):
        find_steps([])
