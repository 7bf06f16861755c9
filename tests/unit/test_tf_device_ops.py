"""TensorFlow GPU profiles list device ops with their device time, and kernels name their ops,
also where the kernels carry their op only in the `level 0` annotation (today's converter reads
only a `tf_op` stat and then lists no device op).

The reference is the official converter itself: the same GPU events are written twice with the
project's XSpace writer, once with the op in `tf_op` (the converter names the ops) and once in
`level 0` as some TensorFlow releases wrote it; tuiprof's ops and kernels for the second must be
the converter's for the first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GPU_LOGDIR, needs_shared
from xla_profiles import Event, Space

from tui_prof.model import ProfileSummary
from tui_prof.profiles.load import summarize_session
from tui_prof.profiles.xplane.device_ops import parse_op

GEMM = "volta_sgemm_128x64_nn"
RELU = "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<relu>, long>(long)"
DETAILS = "regs:64 static_shared:0 dynamic_shared:0 grid:8,1,1 block:256,1,1 occ_pct:50"


def tf_gpu_profile(root: Path, stat: str, nested: bool = False) -> Path:
    """Three steps of a dense layer and its ReLU (two layers share the ReLU kernel)."""
    sp = Space("gpuhost")
    sp.task_environment(0, 3000)
    host = sp.plane(1, "/host:CPU")
    host.line(
        1, "python", [("train", 100 + 900 * i, 800, {"step_num": i, "_r": 1}) for i in range(3)]
    )
    gpu = sp.plane(10, "/device:GPU:0", {"compute_cap_major": 7, "compute_cap_minor": 5})
    kernels: list[Event] = []
    for i in range(3):
        t = 100 + 900 * i
        for k, (kernel, op, start, dur) in enumerate(
            [
                (GEMM, "model/dense/MatMul:MatMul", 20, 300),
                (RELU, "model/dense/Relu:Relu", 330, 100),
                (GEMM, "model/dense_1/MatMul:MatMul", 440, 150),
                (RELU, "model/dense_1/Relu:Relu", 600, 60),
            ]
        ):
            label = f"train_function::{op}#id={k}#" if nested else op
            stats: dict[str, int | str] = {
                stat: label,
                "correlation_id": 10 * i + k,
                "kernel_details": DETAILS,
            }
            kernels.append((kernel, t + start, dur, stats))
    gpu.line(1, "Stream #7(Kernel)", kernels)
    copy = "kind_src:pageable kind_dst:device size:4096 dest:0 async:0"
    gpu.line(
        2,
        "Stream #123(MemcpyH2D)",
        [
            ("MemcpyH2D", 105 + 900 * i, 40, {stat: "MakeTensorFromProto", "memcpy_details": copy})
            for i in range(3)
        ],
    )
    return sp.save(root, "s1")


def _device(
    s: ProfileSummary,
) -> tuple[list[tuple[str, str, int, float]], dict[str, float], list[tuple[str, str, int, float]]]:
    ops = [(o.name, o.op_type, o.occurrences, o.total_self_time_us) for o in s.top_ops]
    pct = {o.name: round(o.self_time_percent, 6) for o in s.top_ops if o.where == "Device"}
    kernels = sorted((k.name, k.op_name, k.occurrences, k.total_duration_us) for k in s.kernels)
    return sorted(ops), pct, kernels


@pytest.mark.parametrize("nested", [False, True])
def test_annotated_kernels_give_the_converters_device_ops(tmp_path: Path, nested: bool) -> None:
    reference = summarize_session(tf_gpu_profile(tmp_path / "tf_op", "tf_op"))
    ops, pct, kernels = _device(reference)
    assert ("model/dense/MatMul", "MatMul", 3, 900.0) in ops  # the converter names them
    assert all(op for _, op, _, _ in kernels)
    mine = summarize_session(tf_gpu_profile(tmp_path / "level0", "level 0", nested))
    assert _device(mine) == (ops, pct, kernels)
    assert {o.where for o in mine.top_ops} == {"Device"}


def test_the_converter_alone_names_no_op_from_the_annotation(tmp_path: Path) -> None:
    """Why tuiprof reads the annotation: the converter's own tables for the same file."""
    import json

    from conftest import official_overview  # noqa: F401  (sets the converter's log level)

    from tui_prof.profiles.xplane import converter

    session = tf_gpu_profile(tmp_path, "level 0")
    tables = converter.convert(sorted(session.glob("*.xplane.pb")))
    text = json.dumps(tables[converter.OP_STATS]) + json.dumps(tables[converter.KERNEL_STATS])
    assert GEMM in text  # the kernels were read: the absence below is not an empty table's
    assert "model/dense/MatMul" not in text


@pytest.mark.parametrize(
    ("annotation", "parsed"),
    [
        ("model/dense/MatMul:MatMul", ("model/dense/MatMul", "MatMul")),
        (
            "train_function::model/conv2d/Conv2D:Conv2D#id=3,bytes=9#",
            ("model/conv2d/Conv2D", "Conv2D"),
        ),
        ("model/dense/BiasAdd", ("model/dense/BiasAdd", "Unknown")),
        ("MemcpyHToD", ("MemcpyHToD", "MemcpyHToD")),
    ],
)
def test_op_annotations(annotation: str, parsed: tuple[str, str]) -> None:
    assert parse_op(annotation) == parsed


@needs_shared
def test_the_8_gpu_profile_lists_device_ops_and_names_every_kernels_op() -> None:
    """The public TensorFlow profile: its kernels carry their op in `level 0` only; the
    converter's kernel table (15 rows, 1,330 launches, 29.69 ms) keeps its totals, now by op."""
    from tui_prof.profiles.xplane import converter, tb_tables

    s = summarize_session(next(GPU_LOGDIR.rglob("*.xplane.pb")).parent)
    paths = sorted(GPU_LOGDIR.rglob("*.xplane.pb"))
    ref = tb_tables.kernels(converter.convert(paths)[converter.KERNEL_STATS])
    assert not any(k.op_name for k in ref)
    assert sum(k.occurrences for k in s.kernels) == sum(k.occurrences for k in ref) == 1330
    total = sum(k.total_duration_us for k in ref)
    assert sum(k.total_duration_us for k in s.kernels) == pytest.approx(total)
    assert all(k.op_name for k in s.kernels)
    device = [o for o in s.top_ops if o.where == "Device"]
    assert len(device) > 1000 and sum(o.total_self_time_us for o in device) >= total


def test_the_readers_byte_search_names_the_plane_that_keeps_the_hlo() -> None:
    """The reader decides from a byte search whether to import the HLO pass (and numpy): its
    bytes must be the plane name that pass reads."""
    from tui_prof.profiles.xplane import hlo_cost, reader

    assert hlo_cost.METADATA_PLANE.encode() == reader.METADATA_PLANE_BYTES
