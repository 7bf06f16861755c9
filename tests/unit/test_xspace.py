"""tuiprof's own XSpace reader: the message classes, the wire decoder, plane summaries, bad input."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import GPU_LOGDIR, SAMPLES, needs_shared
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from tui_prof.model import ProfileError
from tui_prof.profiles.xplane import proto as xplane_proto
from tui_prof.profiles.xplane.line_events import MISSING
from tui_prof.profiles.xplane.proto import RAW_CLASSES, XSpace
from tui_prof.profiles.xplane.wire import decode_line
from tui_prof.profiles.xplane.xspace import (
    XSpaceFile,
    _upb_line_events,
    plane_summary,
    read_plane,
)

GPU_FILE = GPU_LOGDIR / "plugins/profile/2020_demo/34.83.195.179_6003.xplane.pb"
INT_STATS = (
    "correlation_id",
    "group_id",
    "step_num",
    "_r",
    "_p",
    "_pt",
    "_c",
    "_ct",
    "id",
    "iter_num",
    "tf_function_call",
)
TEXT_STATS = frozenset({"shape", "step_name"})


def _profiles() -> list[Path]:
    found = sorted(SAMPLES.rglob("*.xplane.pb"))[:6]
    return [*found, GPU_FILE] if GPU_FILE.exists() else found


def _tensorflow_descriptor() -> Path | None:
    """TensorFlow's own compiled xplane.proto descriptor, found without importing TensorFlow."""
    spec = importlib.util.find_spec("tensorflow")
    for root in (spec.submodule_search_locations or []) if spec else []:
        p = (
            Path(root)
            / "include/tensorflow/tsl/profiler/protobuf/xplane_proto-descriptor-set.proto.bin"
        )
        if p.exists():
            return p
    return None


def test_descriptor_equals_tensorflows() -> None:
    path = _tensorflow_descriptor()
    if path is None:
        pytest.skip("TensorFlow (the `tf` extra) is not installed: nothing to compare against")
    fds = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes())
    theirs = next(f for f in fds.file if f.name.endswith("xplane.proto"))
    theirs.ClearField("source_code_info")
    assert theirs == xplane_proto.file_descriptor_proto()


def test_lenient_twin_differs_only_in_string_types() -> None:
    exact = xplane_proto.file_descriptor_proto()
    lenient = xplane_proto.file_descriptor_proto(lenient=True)
    f = descriptor_pb2.FieldDescriptorProto
    for a, b in zip(exact.message_type, lenient.message_type, strict=True):
        for fa, fb in zip(a.field, b.field, strict=True):
            assert (fa.name, fa.number, fa.label) == (fb.name, fb.number, fb.label)
            assert fb.type == (f.TYPE_BYTES if fa.type == f.TYPE_STRING else fa.type)


@needs_shared
def test_gpu_profile_planes_and_summary() -> None:
    with XSpaceFile(GPU_FILE) as space:
        names = [p.name for p in space.planes]
        assert names[0] == "/host:CPU"
        assert names[1:] == [f"/device:GPU:{i}" for i in range(8)]
        assert space.hostnames == ["34.83.195.179:6003"]
        host = read_plane(space, space.planes[0])
        assert sum(len(le.start_ps) for le in host.lines) == 15354
    summary = plane_summary([GPU_FILE])
    assert summary["device_type"] == "GPU" and summary["device_count"] == 8
    assert summary["device_names"][0] == "/device:GPU:0"
    assert summary["hosts"] == ["34.83.195.179:6003"]


def test_cpu_profile_summary() -> None:
    paths = sorted(SAMPLES.rglob("*.xplane.pb"))
    if not paths:
        pytest.skip("no sample_traces; regenerate: python examples/make_sample_traces.py")
    summary = plane_summary(paths[:1])
    assert summary["device_type"] == "CPU" and summary["device_count"] == 0
    assert summary["hosts"] == [paths[0].name.removesuffix(".xplane.pb")]


@pytest.mark.parametrize("path", _profiles(), ids=lambda p: p.parent.parent.parent.parent.name)
def test_wire_decoder_equals_upb(path: Path) -> None:
    """The numpy decoder and upb message objects agree on every event and stat of real profiles."""
    with XSpaceFile(path) as space:
        for plane in space.planes:
            meta = space.metadata(plane)
            ids = {k: v for k, v in meta.stat_names.items() if v in INT_STATS or v in TEXT_STATS}
            for a, b in plane.line_spans:
                buf = space._mm[a:b]
                decoded = decode_line(buf, ids, TEXT_STATS, meta.stat_names)
                assert decoded is not None, f"fast path refused a line of {plane.name}"
                fast = decoded[1]
                slow = _upb_line_events(
                    RAW_CLASSES["XLine"].FromString(buf), ids, TEXT_STATS, meta.stat_names
                )
                assert fast.line_id == slow.line_id and fast.name == slow.name
                for attr in ("metadata_id", "start_ps", "end_ps"):
                    assert np.array_equal(getattr(fast, attr), getattr(slow, attr)), attr
                assert fast.ints.keys() == slow.ints.keys()
                for k in fast.ints:
                    assert np.array_equal(fast.ints[k], slow.ints[k]), k
                assert fast.texts == slow.texts


def _varint(v: int) -> bytes:
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _space(
    lines: list[bytes],
    *,
    plane_name: bytes = b"/host:CPU",
    event_name: bytes = b"op",
    stat_names: dict[int, bytes] | None = None,
) -> bytes:
    meta = _field(4, _field(1, 1) + _field(2, _field(1, 1) + _field(2, event_name)))
    for sid, name in (stat_names or {}).items():
        meta += _field(5, _field(1, sid) + _field(2, _field(1, sid) + _field(2, name)))
    plane = _field(1, 0) + _field(2, plane_name) + b"".join(_field(3, ln) for ln in lines) + meta
    return _field(1, plane)


def test_unusual_field_order_falls_back_to_upb(tmp_path: Path) -> None:
    """A writer that puts an event's fields out of number order still reads right (via upb)."""
    stat = _field(1, 7) + _field(4, 42)  # stat metadata 7 = correlation_id, int64 42
    reordered = _field(4, stat) + _field(3, 500) + _field(2, 1000) + _field(1, 1)
    line = _field(1, 5) + _field(2, b"python") + _field(3, 2) + _field(4, reordered)
    assert decode_line(line, {7: "correlation_id"}, frozenset(), {}) is None
    path = tmp_path / "odd.xplane.pb"
    path.write_bytes(_space([line], stat_names={7: b"correlation_id"}))
    with XSpaceFile(path) as space:
        pe = read_plane(space, space.planes[0], stats=("correlation_id", "group_id"))
    (le,) = pe.lines
    assert le.name == "python" and le.line_id == 5
    assert le.start_ps.tolist() == [2000 + 1000] and le.end_ps.tolist() == [3500]
    assert le.ints["correlation_id"].tolist() == [42]
    assert le.ints["group_id"].tolist() == [MISSING]


def test_invalid_utf8_names_are_replaced(tmp_path: Path) -> None:
    line = _field(1, 1) + _field(2, b"\xff[bold]thread") + _field(4, _field(1, 1) + _field(2, 10))
    path = tmp_path / "odd.xplane.pb"
    path.write_bytes(_space([line], event_name=b"\xfe[/]op"))
    with XSpaceFile(path) as space:
        pe = read_plane(space, space.planes[0])
    assert pe.meta.event_names[1] == "\ufffd[/]op"
    assert pe.lines[0].name == "\ufffd[bold]thread"
    with pytest.raises(DecodeError):  # the exact proto3 classes refuse such a file outright
        XSpace.FromString(path.read_bytes())


@pytest.mark.parametrize(
    "content",
    [b"", b"\x0a\xff\xff\xff\x0f", os.urandom(4096)],
    ids=["empty", "truncated-length", "random"],
)
def test_bad_files_raise_profile_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.xplane.pb"
    path.write_bytes(content)
    with pytest.raises(ProfileError) as err:
        XSpaceFile(path)
    assert "\n" not in str(err.value) and "bad.xplane.pb" in str(err.value)


@needs_shared
def test_truncated_real_profile_raises_profile_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.xplane.pb"
    path.write_bytes(GPU_FILE.read_bytes()[: GPU_FILE.stat().st_size // 2])
    with pytest.raises(ProfileError):
        XSpaceFile(path)


def test_missing_file_raises_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read"):
        XSpaceFile(tmp_path / "nope.xplane.pb")


def test_short_last_event_stays_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record patterns near the end of a line still match (the scan pads the last window)."""
    from tui_prof.profiles.xplane import wire as xline_wire

    def no_walk(*_a: object) -> None:
        raise AssertionError("fell back to walking records one by one")

    monkeypatch.setattr(xline_wire, "_chase", no_walk)
    first = _field(1, 3) + _field(2, 100) + _field(3, 50) + _field(4, _field(1, 7) + _field(4, 99))
    last = _field(1, 3) + _field(2, 300)  # six bytes, no stats, nothing after it
    line = _field(1, 9) + _field(3, 1) + _field(4, first) + _field(4, last)
    decoded = decode_line(line, {7: "correlation_id"}, frozenset(), {})
    assert decoded is not None
    le = decoded[1]
    assert le.start_ps.tolist() == [1100, 1300] and le.end_ps.tolist() == [1150, 1300]
    assert le.ints["correlation_id"].tolist() == [99, MISSING]
