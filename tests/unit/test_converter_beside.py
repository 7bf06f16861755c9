"""The converter's process runs the memory profile beside the other tools, and the reader reads
the GPU planes ahead of the converter's tables: the same answers as one tool after another.

Timing is not tested here (benchmarks/bench_summary.py measures it); what is tested is that
answers that come out of order reach the request that asked for them, that answers nobody
waits for any more never pass for another's, and that what is read ahead is what the tables
would have read themselves.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import SAMPLES
from test_tf_device_ops import tf_gpu_profile

from tui_prof.profiles import forked
from tui_prof.profiles.xplane import convert_worker, converter, device_ops, memory
from tui_prof.profiles.xplane.framework import framework_of
from tui_prof.profiles.xplane.reader import _Ahead

XPLANE = next((SAMPLES / "keras_fit_float32").rglob("*.xplane.pb"))
OPTIONS = {"use_saved_result": True}


def _links(tmp: str, path: Path) -> list[str]:
    link = os.path.join(tmp, path.name)
    os.symlink(path.resolve(), link)
    return [link]


def test_answers_out_of_order_reach_their_requests_and_dropped_ones_never_pass() -> None:
    one_by_one = convert_worker.ConverterProcess()
    together = convert_worker.ConverterProcess()
    try:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            alone = _links(a, XPLANE)
            expected = {
                t: one_by_one.tool(alone, t, OPTIONS)
                for t in (converter.OVERVIEW, converter.OP_STATS, converter.MEMORY_PROFILE)
            }
            links = _links(b, XPLANE)
            memory_id = together.send(links, converter.MEMORY_PROFILE, OPTIONS, beside=True)
            overview_id = together.send(links, converter.OVERVIEW, OPTIONS)
            op_id = together.send(links, converter.OP_STATS, OPTIONS)
            # asked for last, oldest first, then the one that ran beside the others
            assert together.receive(op_id) == expected[converter.OP_STATS]
            assert together.receive(overview_id) == expected[converter.OVERVIEW]
            got, want = together.receive(memory_id), expected[converter.MEMORY_PROFILE]
            assert got is not None and want is not None
            # xprof's memory profile differs run to run in parts tuiprof does not read
            assert memory.memory_use(memory.decode(got)) == memory.memory_use(json.loads(want))
            together.send(links, converter.OVERVIEW, OPTIONS)
            together.send(links, converter.MEMORY_PROFILE, OPTIONS, beside=True)
            together.forget()  # an error: these answers are owed to nobody now
            kernels = one_by_one.tool(alone, converter.KERNEL_STATS, OPTIONS)
            assert together.tool(links, converter.KERNEL_STATS, OPTIONS) == kernels
    finally:
        one_by_one.close()
        together.close()


def test_tools_asked_ahead_are_claimed_by_their_files_and_dropped_for_others() -> None:
    proc = convert_worker.ConverterProcess()
    reference = convert_worker.ConverterProcess()
    try:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            alone = _links(a, XPLANE)
            proc.ask_ahead([XPLANE])
            ahead = proc.claim([XPLANE])
            assert ahead is not None and set(ahead.ids) == {
                *((t, False) for t in convert_worker.SUMMARY_TOOLS),
                *((t, True) for t in convert_worker.summary_beside()),
            }
            with ahead.tmp:
                got = proc.receive(ahead.ids[(converter.KERNEL_STATS, False)])
            assert got == reference.tool(alone, converter.KERNEL_STATS, OPTIONS)
            proc.forget(ahead.ids.values())
            proc.ask_ahead([XPLANE])
            assert proc.claim([XPLANE.with_name("other.xplane.pb")]) is None  # dropped
            assert proc.claim([XPLANE]) is None  # and gone
            overview = reference.tool(alone, converter.OVERVIEW, OPTIONS)
            assert proc.tool(_links(b, XPLANE), converter.OVERVIEW, OPTIONS) == overview
    finally:
        proc.close()
        reference.close()


def test_convert_with_the_memory_profile_beside_gives_every_tool_as_before() -> None:
    alone = converter.convert([XPLANE], (*converter.DEFAULT_TOOLS, converter.MEMORY_PROFILE))
    convert_worker.process().ask_ahead([XPLANE])  # as `tuiprof summary` does
    beside = converter.convert(
        [XPLANE],
        beside=(converter.MEMORY_PROFILE,),
        decoders={converter.MEMORY_PROFILE: memory.decode},
    )
    for tool in converter.DEFAULT_TOOLS:
        assert beside[tool] == alone[tool], tool
    assert memory.memory_use(beside[converter.MEMORY_PROFILE]) == memory.memory_use(
        alone[converter.MEMORY_PROFILE]
    )


@pytest.mark.parametrize(
    "doc",
    [
        {"memoryProfilePerAllocator": []},
        [1, 2],
        {"memoryProfilePerAllocator": {"GPU_0_bfc": {"memoryProfileSnapshots": [1]}}},
        {
            "memoryProfilePerAllocator": {
                "GPU_0_bfc": {
                    "profileSummary": {"peakStats": {"peakBytesInUse": "1048576"}},
                    "memoryProfileSnapshots": [
                        {"timeOffsetPs": "5000000", "aggregationStats": {"heapAllocatedBytes": 3}},
                        {"timeOffsetPs": 1, "aggregationStats": None},
                    ],
                    "activeAllocations": [{"snapshotIndex": 1}],
                },
                "host_bfc": {"profileSummary": {"peakStats": {"peakBytesInUse": 9e9}}},
            }
        },
        {"memoryProfilePerAllocator": {"GPU_0_bfc": {"memoryProfileSnapshots": None}}},
    ],
)
def test_the_memory_profiles_decoder_reads_any_shape_as_json_does(doc: object) -> None:
    text = json.dumps(doc)
    assert memory.memory_use(memory.decode(text)) == memory.memory_use(json.loads(text))


def test_the_memory_profiles_decoder_takes_what_only_json_reads_and_rejects_no_json() -> None:
    nan = '{"memoryProfilePerAllocator": {"GPU_0_bfc": {"profileSummary": {"x": NaN}}}}'
    assert memory.decode(nan) == json.loads(nan)
    with pytest.raises(ValueError):
        memory.decode("not json")


@pytest.mark.parametrize(("stat", "ahead"), [("level 0", True), ("tf_op", False)])
def test_device_ops_read_ahead_are_those_the_tables_would_read(
    tmp_path: Path, stat: str, ahead: bool
) -> None:
    """Kernels naming their op only in the annotation: the device ops are read beside the
    converter, and equal a reading after its tables; with `tf_op` the converter names the ops
    and nothing is read ahead."""
    paths = sorted(tf_gpu_profile(tmp_path, stat).glob("*.xplane.pb"))
    read = _Ahead(paths, gpu=True)
    assert read.capability() == "7.5"
    assert read.framework() == framework_of(paths)
    if ahead:
        found = read.device_ops()
        assert found is not None and found.ops
        assert found == device_ops.device_ops(paths)
    else:
        assert read.device_ops() is None


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "a": [2.50, -0.0, 5e-324]}', "18446744073709551616", "1e400", '"\\ud800"', "NaN"],
)
def test_a_tools_json_is_decoded_as_json_reads_it(text: str) -> None:
    got, want = converter.decode(text), json.loads(text)
    assert repr(got) == repr(want) and type(got) is type(want)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness: Linux")
def test_a_thread_that_yields_the_cpu_leaves_the_others_as_they_were() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    wanted = min(19, base + 3)
    seen: list[int] = []

    def run() -> None:
        forked.yield_cpu(wanted)
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [wanted] and os.getpriority(os.PRIO_PROCESS, 0) == base
