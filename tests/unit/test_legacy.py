"""Older TensorBoard profile files (`*.overview_page.pb` and friends, no xplane): listed and read.

Two kinds of evidence: a real TensorFlow 2.2 session (tests/data, the TensorFlow profiler
project's GPU-input-bound demo), whose numbers must be the ones TensorBoard saved in it; and
legacy sessions written at test time from today's converter output for real profiles (the
sample traces; the shared GPU profile where present), read back to the converter's numbers.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import GPU_LOGDIR, REPO, needs_shared, sample_session

from tui_prof.model import CATEGORIES, STEP_SOURCE_PRECOMPUTED, ProfileError
from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import load_summary, summarize_session
from tui_prof.profiles.xplane import converter, tb_tables

TF22 = REPO / "tests" / "data" / "legacy_tf22"
TF22_SESSION = TF22 / "plugins" / "profile" / "GPU-input-bound"
# The overview's step columns, as the legacy step details name them.
DETAIL_FIELDS = {
    "deviceComputeTimeMs": "device_compute_ms",
    "deviceToDeviceTimeMs": "device_to_device_ms",
    "deviceCollectivesTimeMs": "device_collectives_ms",
    "hostComputeTimeMs": "host_compute_ms",
    "kernelLaunchTimeMs": "host_prepare_ms",
    "infeedTimeMs": "host_wait_input_ms",
    "outfeedTimeMs": "output_ms",
    "compileTimeMs": "host_compile_ms",
    "otherTimeMs": "unknown_time_ms",
}


def test_tf22_session_is_listed_as_legacy() -> None:
    found = discover(TF22)
    assert [(s.name, s.format) for s in found.sessions] == [("GPU-input-bound", "legacy")]
    host = found.sessions[0].hosts[0]
    assert host.host == "localhost" and host.path.name == "localhost.overview_page.pb"
    assert [p.name for p in host.extra] == ["localhost.input_pipeline.pb"]
    # One tool file names its session too.
    one = discover(TF22_SESSION / "localhost.input_pipeline.pb").sessions
    assert [s.path for s in one] == [TF22_SESSION]


def test_tf22_numbers_are_the_ones_tensorboard_saved() -> None:
    from xprof.protobuf import overview_page_pb2

    saved = overview_page_pb2.OverviewPage.FromString(
        (TF22_SESSION / "localhost.overview_page.pb").read_bytes()
    ).input_analysis
    s = summarize_session(TF22_SESSION)
    assert s.step_source == STEP_SOURCE_PRECOMPUTED
    assert len(s.steps) == len(saved.step_details) == 11
    assert s.average is not None
    assert s.average.step_time_ms == pytest.approx(saved.step_time_summary.average, rel=1e-9)
    assert s.average.step_time_std_ms == pytest.approx(
        saved.step_time_summary.standard_deviation, rel=1e-6
    )
    input_share = 100 * s.average.breakdown_ms["input"] / s.average.step_time_ms
    assert input_share == pytest.approx(saved.input_percent_summary.average, abs=0.05)
    assert s.bottleneck.startswith("Input-bound")
    for step in s.steps:  # TensorBoard's parts add up to its step time
        assert sum(step.breakdown_ms.values()) == pytest.approx(step.step_time_ms, rel=1e-9)
    assert s.environment.device_type == "GPU" and s.environment.device_count == 8
    assert s.precision is not None and s.precision.source == "precomputed"
    assert s.precision.compute_16bit_percent == 0.0


def _write_legacy(session_dir: Path, host: str, xplanes: list[Path]) -> dict[str, Any]:
    """Today's converter output for real profiles, saved as an older TensorBoard saved it."""
    from xprof.protobuf import (
        input_pipeline_pb2,
        kernel_stats_pb2,
        overview_page_pb2,
        tf_stats_pb2,
    )

    tables = converter.convert(xplanes)
    overview = tables[converter.OVERVIEW]
    props = tb_tables.overview_properties(overview)
    step_table = next(t for t in overview if any(c["id"] == "stepTimeMs" for c in t["cols"]))
    rows = tb_tables.rows(step_table)
    page = overview_page_pb2.OverviewPage()
    page.run_environment.device_type = props.get("device_type", "")
    page.run_environment.device_core_count = int(props.get("device_core_count", "0"))
    precision = tb_tables.precision(props)
    if precision is not None:
        page.analysis.device_compute_16bit_percent = precision.compute_16bit_percent
        page.analysis.device_compute_32bit_percent = precision.compute_32bit_percent
    for k, row in enumerate(rows):
        d = input_pipeline_pb2.PerGenericStepDetails(
            step_number=k, step_name=str(row["stepnum"]), step_time_ms=row["stepTimeMs"]
        )
        for col, field in DETAIL_FIELDS.items():
            setattr(d, field, row[col] or 0.0)
        page.input_analysis.step_details.add().Pack(d)
    session_dir.mkdir(parents=True)
    (session_dir / f"{host}.overview_page.pb").write_bytes(page.SerializeToString())
    db = tf_stats_pb2.TfStatsDatabase()
    for op in tb_tables.top_ops(tables[converter.OP_STATS]):
        r = db.without_idle.tf_stats_record.add()
        r.op_name, r.op_type, r.host_or_device = op.name, op.op_type, op.where
        r.occurrences, r.total_self_time_in_us = op.occurrences, op.total_self_time_us
        frac = op.self_time_percent / 100
        if op.where == "Device":
            r.device_total_self_time_as_fraction = frac
        else:
            r.host_total_self_time_as_fraction = frac
    (session_dir / f"{host}.tensorflow_stats.pb").write_bytes(db.SerializeToString())
    kernels = tb_tables.kernels(tables[converter.KERNEL_STATS])
    if kernels:
        kdb = kernel_stats_pb2.KernelStatsDb()
        for kernel in kernels:
            kdb.reports.add(
                name=kernel.name,
                op_name=kernel.op_name,
                occurrences=kernel.occurrences,
                total_duration_ns=round(kernel.total_duration_us * 1000),
                is_kernel_using_tensor_core=kernel.uses_tensor_core,
                is_op_tensor_core_eligible=kernel.tensor_core_eligible,
            )
        (session_dir / f"{host}.kernel_stats.pb").write_bytes(kdb.SerializeToString())
    steps = tb_tables.overview_steps(overview)  # the converter's steps as tuiprof reads them
    return {"rows": rows, "steps": steps, "tables": tables, "kernels": kernels}


def _assert_reads_back(session_dir: Path, made: dict[str, Any]) -> None:
    s = summarize_session(session_dir)
    assert s.step_source == STEP_SOURCE_PRECOMPUTED
    assert len(s.steps) == len(made["rows"]) == len(made["steps"]) > 0
    assert s.steps == tuple(made["steps"])  # numbers, times and every category, exactly
    ops = tb_tables.top_ops(made["tables"][converter.OP_STATS])
    assert [(o.name, o.total_self_time_us) for o in s.top_ops] == [
        (o.name, o.total_self_time_us) for o in ops
    ]
    assert len(s.kernels) == len(made["kernels"])


def test_legacy_session_from_a_sample_profile_reads_back(tmp_path: Path) -> None:
    xplanes = sorted(sample_session("custom_loop").glob("*.xplane.pb"))
    session = tmp_path / "run" / "plugins" / "profile" / "old"
    made = _write_legacy(session, "vm", xplanes)
    assert [s.format for s in discover(tmp_path).sessions] == ["legacy"]
    _assert_reads_back(session, made)
    assert set(CATEGORIES) == set(summarize_session(session).steps[0].breakdown_ms)


@needs_shared
def test_legacy_session_from_the_gpu_profile_reads_back(tmp_path: Path) -> None:
    xplanes = sorted(GPU_LOGDIR.rglob("*.xplane.pb"))
    session = tmp_path / "plugins" / "profile" / "gpu"
    made = _write_legacy(session, "worker0", xplanes)
    _assert_reads_back(session, made)
    s = summarize_session(session)
    assert made["kernels"] and s.tensor_core is not None
    assert s.precision is not None and s.precision.compute_16bit_percent == 30.5


def test_cli_summarises_legacy_sessions_as_json(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(TF22), "--json", "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    (doc,) = json.loads(r.stdout)["sessions"]
    assert doc["step_source"] == "precomputed" and len(doc["steps"]) == 11
    assert doc["precision"]["source"] == "precomputed"
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(TF22), "--step-program", "x"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "applies to XLA profiles" in r.stderr


def test_directories_that_are_not_legacy_sessions(tmp_path: Path) -> None:
    traced = tmp_path / "trace_only" / "plugins" / "profile" / "s"
    traced.mkdir(parents=True)
    (traced / "h.trace.json.gz").write_bytes(b"\x1f\x8b")
    assert discover(tmp_path).sessions == ()  # a trace alone is not a session
    both = tmp_path / "both" / "plugins" / "profile" / "s"
    both.mkdir(parents=True)
    (both / "h.xplane.pb").write_bytes(
        next(sample_session("custom_loop").glob("*.pb")).read_bytes()
    )
    (both / "h.overview_page.pb").write_bytes(b"")
    assert [s.format for s in discover(tmp_path).sessions] == ["xplane"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (random.Random(0).randbytes(4096), "not a readable overview page"),
        (None, "not a readable overview page"),  # truncated: half the real file
        (b"\x00\x00\x00", "not a readable overview page"),
    ],
)
def test_bad_overview_files_are_one_line(tmp_path: Path, data: bytes | None, message: str) -> None:
    real = (TF22_SESSION / "localhost.overview_page.pb").read_bytes()
    d = tmp_path / "plugins" / "profile" / "bad"
    d.mkdir(parents=True)
    (d / "h.overview_page.pb").write_bytes(real[: len(real) // 2] if data is None else data)
    with pytest.raises(ProfileError, match=message) as info:
        summarize_session(d)
    assert "\n" not in str(info.value)


def test_a_damaged_side_file_leaves_the_steps(tmp_path: Path) -> None:
    d = tmp_path / "plugins" / "profile" / "s"
    d.mkdir(parents=True)
    for f in TF22_SESSION.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    (d / "localhost.tensorflow_stats.pb").write_bytes(random.Random(1).randbytes(999))
    s = load_summary(d, use_cache=False)
    assert len(s.steps) == 11 and not s.top_ops
    assert any("tensorflow_stats" in w for w in s.warnings)


def test_cli_reports_a_bad_legacy_session_in_one_line(tmp_path: Path) -> None:
    d = tmp_path / "plugins" / "profile" / "bad"
    d.mkdir(parents=True)
    (d / "h.overview_page.pb").write_bytes(os.urandom(0))
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "empty file" in r.stderr
    assert "Traceback" not in r.stderr
