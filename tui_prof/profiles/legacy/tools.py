"""Parse an older TensorBoard's tool files into the model, with the schemas `xprof` ships.

Contract: each function takes one file and returns model objects or raises ProfileError with a
one-line reason (missing, empty, truncated or not that tool's protobuf). Steps are the
overview's (else the input pipeline's) per-step details, folded into tuiprof's categories as
TensorBoard's own overview table folds them (op_stats_to_input_pipeline_analysis.cc): input is
waiting for input plus host-to-device copies, kernel launch is host "prepare" time, all others
is the unknown time. Files from before TensorFlow 2.2 carry one `input_ms` (field 4) instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message

from tui_prof.model import (
    CATEGORIES,
    KernelStat,
    OpStat,
    Precision,
    ProfileError,
    StepBreakdown,
    UnreadableProfile,
    os_reason,
)
from tui_prof.profiles.kernel_names import uses_matrix_units

M = TypeVar("M", bound=Message)
_OLD_INPUT_MS = 4  # PerGenericStepDetails.input_ms, before TensorFlow 2.2 split it in two
_FIXED64 = 1


def parse(path: Path, cls: type[M], what: str) -> M:
    """One file as `cls`; ProfileError unless it holds at least one field of it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableProfile(f"{path.name}: cannot read ({os_reason(exc)})") from exc
    if not data:
        raise ProfileError(f"{path.name}: empty file (0 bytes), not a {what}")
    try:
        msg: M = cls.FromString(data)
    except (DecodeError, ValueError) as exc:
        raise ProfileError(f"{path.name}: not a readable {what} (truncated or damaged)") from exc
    if not msg.ListFields():
        raise ProfileError(f"{path.name}: not a {what} (nothing tuiprof can read in it)")
    return msg


def _old_input_ms(raw: bytes) -> float:
    """The pre-2.2 input_ms field, which today's schema no longer names (0.0 where absent)."""
    import struct

    from tui_prof.profiles.xplane.xspace import scan_fields

    try:
        for number, wire, a, b, _ in scan_fields(raw, 0, len(raw)):
            if number == _OLD_INPUT_MS and wire == _FIXED64 and b - a == 8:
                return float(struct.unpack("<d", raw[a:b])[0])
    except ValueError:
        return 0.0
    return 0.0


def generic_steps(analysis: Any) -> list[StepBreakdown]:
    """Per-step details of an InputPipelineAnalysisResult (GPU/CPU) as StepBreakdowns."""
    from xprof.protobuf import input_pipeline_pb2

    steps = []
    for any_msg in analysis.step_details:
        d = input_pipeline_pb2.PerGenericStepDetails()
        if not any_msg.Unpack(d):
            continue
        input_ms = d.host_wait_input_ms + d.host_to_device_ms or _old_input_ms(any_msg.value)
        parts = {
            "device_compute": d.device_compute_ms,
            "device_to_device": d.device_to_device_ms,
            "device_collectives": d.device_collectives_ms,
            "host_compute": d.host_compute_ms,
            "kernel_launch": d.host_prepare_ms,
            "input": input_ms,
            "output": d.output_ms,
            "compilation": d.host_compile_ms,
            "other": d.unknown_time_ms,
        }
        number = int(d.step_name) if d.step_name.isdigit() else d.step_number
        steps.append(StepBreakdown(number, d.step_time_ms, {c: parts[c] for c in CATEGORIES}))
    return steps


def precision(analysis: Any) -> Precision | None:
    """The overview's saved 16-bit share of device compute."""
    p16, p32 = analysis.device_compute_16bit_percent, analysis.device_compute_32bit_percent
    if p16 <= 0 and p32 <= 0:
        return None
    return Precision(p16, p32, "precomputed")


def top_ops(path: Path) -> list[OpStat]:
    """Every framework op by total self time from `*.tensorflow_stats.pb`, idle left out (all
    of them, as the xplane reader keeps them: a diff must see an op below any cut-off)."""
    from xprof.protobuf import tf_stats_pb2

    db = parse(path, tf_stats_pb2.TfStatsDatabase, "tensorflow_stats file")
    table = db.without_idle if db.HasField("without_idle") else db.with_idle
    ops = [
        OpStat(
            name=r.op_name,
            op_type=r.op_type,
            where=r.host_or_device,
            occurrences=r.occurrences,
            total_self_time_us=r.total_self_time_in_us,
            self_time_percent=100.0
            * (
                r.device_total_self_time_as_fraction
                if r.host_or_device == "Device"
                else r.host_total_self_time_as_fraction
            ),
        )
        for r in table.tf_stats_record
        if r.op_type != "IDLE"
    ]
    ops.sort(key=lambda o: o.total_self_time_us, reverse=True)
    return ops


def kernels(path: Path) -> list[KernelStat]:
    """GPU kernels from `*.kernel_stats.pb`, longest first."""
    from xprof.protobuf import kernel_stats_pb2

    db = parse(path, kernel_stats_pb2.KernelStatsDb, "kernel_stats file")
    out = [
        KernelStat(
            name=r.name,
            op_name=r.op_name,
            occurrences=r.occurrences,
            total_duration_us=r.total_duration_ns / 1000.0,
            tensor_core_eligible=r.is_op_tensor_core_eligible,
            uses_tensor_core=r.is_kernel_using_tensor_core or uses_matrix_units(r.name),
            occupancy_percent=r.occupancy_pct or None,  # 0: not recorded
            grid=",".join(str(d) for d in r.grid_dim),
            block=",".join(str(d) for d in r.block_dim),
        )
        for r in db.reports
    ]
    out.sort(key=lambda k: k.total_duration_us, reverse=True)
    return out
