"""A step's timeline (profiles/timeline, `tuiprof timeline`) on real profiles.

The checks that matter: each step's span is its step time in the summary; the device events
clipped to a step cover at least the summary's device compute of that step; text fits its width;
the JSON keeps its contract; legacy sessions say they have no events.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared

from tui_prof.cli.main import main
from tui_prof.model import CATEGORIES, ProfileError
from tui_prof.profiles.discover import Session
from tui_prof.profiles.load import summarize_session
from tui_prof.profiles.timeline.bins import IDLE, bin_track
from tui_prof.profiles.timeline.load import load_timeline
from tui_prof.profiles.timeline.model import NoEvents, make_track

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
KINETO_SAMPLES = [
    "torch_cuda_float32",
    "torch_cuda_autocast",
    "torch_cuda_wide_float32",
    "torch_cuda_wide_autocast",
    "torch_float32",
    "torch_autocast",
]
DEVICE_COMPUTE = CATEGORIES.index("device_compute")


def _check_against_summary(path: Path, own_steps: bool = False) -> int:
    """Every step: span == step time; device compute events >= the summary's device compute.
    `own_steps`: the summary from tuiprof's step finder (XSpace: the converter's numbering
    differs)."""
    tl = load_timeline(path)
    summary = summarize_session(path, force_fallback=own_steps)
    assert summary.steps, path
    assert tl.step_numbers() == [s.step for s in summary.steps]
    for b in summary.steps:
        st = tl.step(b.step)
        assert st.duration_us / 1000.0 == pytest.approx(b.step_time_ms, rel=1e-9, abs=1e-6)
        compute = sum(
            float((t.end - t.start)[t.cat == DEVICE_COMPUTE].sum())
            for t in st.tracks
            if t.kind == "device"
        )
        assert compute / 1000.0 >= b.breakdown_ms["device_compute"] - 1e-6, (path, b.step)
        for t in st.tracks:
            assert (t.start >= 0).all() and (t.end <= st.duration_us + 1e-9).all()
            assert (t.end >= t.start).all()
    return len(summary.steps)


@pytest.mark.parametrize("name", KINETO_SAMPLES)
def test_kineto_sample_steps_match_the_summary(name: str) -> None:
    assert _check_against_summary(SAMPLES / name) >= 2


@needs_shared
@pytest.mark.parametrize(
    "rel",
    [
        "kineto/a100_rank0.json.gz",
        "kineto/mi250_minitoy_train.json.gz",
        "kineto/sampled_rank-0.json.gz",
        "kineto/benchmark_result_2869224_1695835535_trace.json.gz",
        "kineto/benchmark_result_924719_1679055439_trace.json.gz",
        "kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz",
    ],
)
def test_kineto_public_steps_match_the_summary(rel: str) -> None:
    path = SHARED_TRACES / rel
    if not path.exists():
        pytest.skip(f"{path} absent")
    assert _check_against_summary(path) >= 1


XSPACE_SAMPLES = [
    "jax_cuda_float32",
    "jax_cuda_bf16",
    "jax_cuda_step_markers",
    "jax_step_markers",
    "keras_fit_float32/train",
    "keras_fit_mixed",
    "keras_fit_step_markers",
    "jax_program_runs",
    "custom_loop",
    "input_bound",
    "experiment_mixed_precision/runs/float32-r0",
    "experiment_mixed_precision/runs/mixed-r0",
]


@pytest.mark.parametrize("name", XSPACE_SAMPLES)
def test_xspace_sample_steps_match_the_summary(name: str) -> None:
    assert _check_against_summary(SAMPLES / name, own_steps=True) >= 2


@needs_shared
def test_xspace_amd_jax_steps_match_the_summary() -> None:
    assert _check_against_summary(SHARED_TRACES / "jax_gpu_gemm", own_steps=True) >= 2


@needs_shared
def test_xspace_gpu_multi_worker_step_matches_the_summary() -> None:
    path = SHARED_TRACES / "tf_gpu_multi_worker"
    assert _check_against_summary(path, own_steps=True) >= 1
    st = load_timeline(path).step(0)
    assert {t.kind for t in st.tracks} == {"host", "device"}


def test_xspace_host_events_that_launched_device_work_are_kernel_launch() -> None:
    """As xprof classifies a host event where there are devices (ClassifyCpuEvent): one with a
    correlation id is kernel launch, not host compute as on a CPU-only host."""
    tl = load_timeline(SAMPLES / "jax_cuda_float32")
    st = tl.step(tl.slowest())
    launch = CATEGORIES.index("kernel_launch")
    host = [t for t in st.tracks if t.kind == "host"]
    launched = np.concatenate([t.cat[t.corr >= 0] for t in host])
    assert len(launched) and (launched == launch).all()
    others = np.concatenate([t.cat[t.corr < 0] for t in host])
    assert len(others) and (others != launch).all()


def test_gpu_trace_has_host_threads_and_a_device_stream() -> None:
    tl = load_timeline(SAMPLES / "torch_cuda_float32")
    st = tl.step(tl.slowest())
    kinds = {t.kind for t in st.tracks}
    assert kinds == {"host", "device"}
    assert any(t.name.startswith("GPU 0 stream") for t in st.tracks)
    assert st.duration_us == max(tl.step_length_us(n) for n in tl.step_numbers())


def test_binning_picks_the_category_that_fills_a_cell_most() -> None:
    cats = [CATEGORIES.index(c) for c in ("device_compute", "input", "input", "other")]
    t = make_track(
        "t",
        "host",
        "g",
        np.array([0.0, 10.0, 12.0, 50.0]),
        np.array([5.0, 11.0, 40.0, 50.0]),
        np.arange(4, dtype=np.int32),
        np.array(cats),
    )
    bins = bin_track(t, 0.0, 100.0, 10)
    assert bins[0] == cats[0]  # 5 µs of compute in [0, 10)
    assert list(bins[1:4]) == [cats[1]] * 3
    assert bins[4] == IDLE
    assert bins[5] == cats[3]  # a zero-length event still marks its cell
    assert list(bins[6:]) == [IDLE] * 4


@pytest.mark.parametrize("width", [40, 80, 120])
def test_text_view_fits_its_width(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["timeline", str(SAMPLES / "torch_cuda_autocast"), "--width", str(width)])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0 and len(out) >= 4
    assert max(len(line) for line in out) <= width
    assert out[0].startswith("Step ")
    assert any(line.startswith("GPU 0") and "█" in line for line in out)
    rc = main(
        [
            "timeline",
            str(SAMPLES / "torch_cuda_autocast"),
            "--width",
            str(width),
            "--compare-median",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert rc == 0 and "Busy time per track:" in " ".join(out)
    assert max(len(line) for line in out) <= width  # the heading wrapped, not cut or wider


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLES / "torch_cuda_float32"
    summary = summarize_session(path)
    step = summary.steps[1]
    assert main(["timeline", str(path), "--step", str(step.step), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["step"] == step.step
    assert doc["start_us"] == 0.0
    assert doc["end_us"] / 1000.0 == pytest.approx(step.step_time_ms)
    assert doc["tracks"]
    for t in doc["tracks"]:
        assert isinstance(t["name"], str) and t["kind"] in ("host", "device")
        for e in t["events"]:
            assert set(e) >= {"name", "start_us", "dur_us", "category"}
            assert e["category"] in CATEGORIES
            assert 0.0 <= e["start_us"] <= e["start_us"] + e["dur_us"] <= doc["end_us"] + 1e-6


def test_the_command_numbers_steps_as_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """custom_loop: the summary (TensorBoard's converter) numbers its steps 0..4, the timeline's
    finder 5..9. `tuiprof timeline` said "no step 3 (steps: 5..9)" and showed the slowest as
    "Step 8" beside the summary's step 3; the TUI already renumbered."""
    path = SAMPLES / "custom_loop"
    steps = summarize_session(path).steps
    assert [s.step for s in steps] == list(range(len(steps)))
    slowest = max(steps, key=lambda s: s.step_time_ms)
    assert main(["timeline", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == slowest.step
    for s in steps:
        assert main(["timeline", str(path), "--step", str(s.step), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["end_us"] / 1000.0 == pytest.approx(s.step_time_ms)
    assert main(["timeline", str(path), "--compare-median", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slowest"]["step"] == slowest.step


def test_compare_median_lists_track_growth(capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLES / "torch_cuda_autocast"
    assert main(["timeline", str(path), "--compare-median", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["slowest"]["step_us"] >= doc["median"]["step_us"]
    assert doc["slowest"]["step"] != doc["median"]["step"]
    deltas = [t["delta_us"] for t in doc["tracks"]]
    assert deltas == sorted(deltas, reverse=True)
    assert main(["timeline", str(path), "--compare-median", "--width", "80"]) == 0
    assert "against the median step" in capsys.readouterr().out


def test_legacy_session_says_it_has_no_events(capsys: pytest.CaptureFixture[str]) -> None:
    legacy = REPO / "tests" / "data" / "legacy_tf22"
    with pytest.raises(NoEvents):
        load_timeline(next(iter(_sessions(legacy))))
    assert main(["timeline", str(legacy)]) == 2
    assert "no events" in capsys.readouterr().err


def test_missing_step_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(SAMPLES / "torch_float32"), "--step", "999"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no step 999" in err
    with pytest.raises(ProfileError):
        load_timeline(SAMPLES / "torch_float32").step(999)


def test_missing_path_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It was a FileNotFoundError traceback, where `tuiprof summary` says one line."""
    assert main(["timeline", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope: no such file or directory" in err, err


def _sessions(path: Path) -> list[Session]:
    from tui_prof.profiles.discover import discover

    return list(discover(path).sessions)


@pytest.mark.parametrize("path", [SAMPLES / "torch_cuda_float32", SAMPLES / "jax_cuda_float32"])
def test_device_events_have_their_launch_as_partner(path: Path) -> None:
    """Kineto correlation ids / XSpace correlation_id stats link a kernel to its launch."""
    tl = load_timeline(path)
    st = tl.step(tl.slowest())
    linked = total = 0
    for k, t in enumerate(st.tracks):
        if t.kind != "device":
            continue
        for i in range(len(t.start)):
            total += 1
            found = st.partner(k, i)
            if found is not None:
                other = st.tracks[found[0]]
                assert other.kind == "host" and other.corr[found[1]] == t.corr[i]
                linked += 1
    assert total and linked >= 0.5 * total, (linked, total)


def test_renumbered_to_the_converters_step_numbers() -> None:
    """custom_loop: TensorBoard's converter numbers its steps 0..4, tuiprof's finder 5..9."""
    from conftest import sample_session

    path = sample_session("custom_loop")
    tl = load_timeline(path)
    own = summarize_session(path, force_fallback=True).steps
    official = [(7, s.step_time_ms) for s in own]  # a wrong pairing: numbers must stay
    assert not tl.renumber([(n + 100, ms + 1.0) for n, ms in official])
    wanted = [(k, s.step_time_ms) for k, s in enumerate(own)]
    assert tl.renumber(wanted)
    assert tl.step_numbers() == list(range(len(own)))
    for k, s in enumerate(own):
        assert tl.step(k).duration_us / 1000.0 == pytest.approx(s.step_time_ms)


def test_multi_rank_session_steps_from_the_slowest_rank_or_the_one_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kineto_factory import write_rank

    run = tmp_path / "run"
    write_rank(run / "host_11.1700000000000.pt.trace.json.gz", 0, 1.0)
    write_rank(run / "host_12.1700000000013.pt.trace.json.gz", 1, 1.5)
    summary = summarize_session(run)
    tl = load_timeline(run)
    assert tl.source_names() == ["host_11", "host_12"]
    first = summary.steps[0]
    st = tl.step(first.step)
    assert st.source == "host_12"  # the slowest rank, as the summary takes the step
    assert st.duration_us / 1000.0 == pytest.approx(first.step_time_ms)
    assert tl.step(first.step, source="host_11").duration_us == pytest.approx(st.duration_us / 1.5)
    assert main(["timeline", str(run), "--rank", "host_11", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "host_11"
    assert main(["timeline", str(run), "--compare-median", "--rank", "host_11", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == "host_11"
    want = tl.step_length_us(tl.slowest("host_11"), "host_11")
    assert doc["slowest"]["step_us"] == pytest.approx(want)
    assert main(["timeline", str(run), "--rank", "nobody"]) == 2
    assert "no rank or host 'nobody'" in capsys.readouterr().err


def test_hostile_names_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kernel named with an escape sequence (OSC 52 writes the clipboard) reaches no terminal."""
    from kineto_factory import two_steps

    t = two_steps("today")
    for e in t.events:
        if e.get("cat") == "kernel":
            e["name"] = "evil\x1b]52;c;aGk=\x07kernel"
    path = t.write(tmp_path / "evil.pt.trace.json")
    tl = load_timeline(path)
    assert any("evil" in n for n in tl.names)
    assert not any("\x1b" in n or "\x07" in n for n in tl.names)
    assert main(["timeline", str(path), "--width", "80"]) == 0
    assert main(["timeline", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out


def test_multi_host_xspace_one_source_per_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two hosts' files (here one file under two names: both record the hostname `vm`): a
    source per file, each with its own steps, not both hosts' spans twice."""
    import shutil

    src = next((SAMPLES / "jax_cuda_float32").rglob("*.xplane.pb"))
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    for host in ("hosta", "hostb"):
        shutil.copy(src, run / f"{host}.xplane.pb")
    one = load_timeline(SAMPLES / "jax_cuda_float32")
    tl = load_timeline(tmp_path)
    assert tl.source_names() == ["hosta", "hostb"]
    assert one.step_numbers()  # the loops below compare steps, not two empty lists
    for s in tl.sources:
        assert [x.number for x in s.steps] == one.step_numbers()
    summary = summarize_session(tmp_path, force_fallback=True)
    assert [b.step for b in summary.steps] == one.step_numbers()
    for b in summary.steps:
        assert tl.step(b.step).duration_us / 1000.0 == pytest.approx(b.step_time_ms)
        assert tl.step(b.step, source="hostb").duration_us / 1000.0 == pytest.approx(b.step_time_ms)
    assert main(["timeline", str(tmp_path), "--rank", "hostb", "--width", "80"]) == 0
    assert "hostb" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize("host_markers", [True, False], ids=["host-markers", "tpu-steps-only"])
def test_tpu_xspace_cores_in_xprofs_line_order_with_steps_from_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host_markers: bool
) -> None:
    """A TPU profile as XProf reads one (per core: Steps, XLA Modules, XLA Ops, XLA TraceMe; no
    launch ids): every step's span is the summary's step time, device events cover its device
    compute, each core's lines are grouped in XProf's order, only its ops are work (step markers,
    program runs and waits are drawn as `other`, as the summary counts the ops alone), XLA's
    all-reduce as a collective; the slow step (a long all-reduce on core 1)
    is the slowest, and set beside the median it names core 1's ops. Without the host's step
    markers, the steps are the cores' own ("Steps" lines), as XProf takes them."""
    from xla_profiles import tpu_steps_job

    tpu_steps_job(tmp_path, host_markers=host_markers)
    assert _check_against_summary(tmp_path, own_steps=True) == 4
    source = summarize_session(tmp_path).step_source
    assert source == ("step_markers" if host_markers else "tpu_step_markers")
    tl = load_timeline(tmp_path)
    assert tl.slowest() == 2
    st = tl.step(2)
    names = [t.name for t in st.tracks if t.kind == "device"]
    assert names == [
        f"TPU {c} {line}"
        for c in (0, 1)
        for line in ("Steps", "XLA Modules", "XLA Ops", "XLA TraceMe")
    ]
    by_name = {t.name: t for t in st.tracks}
    other = {CATEGORIES.index("other")}
    for line in ("Steps", "XLA Modules", "XLA TraceMe"):  # markers, program runs, waits
        assert set(by_name[f"TPU 0 {line}"].cat.tolist()) == other, line
    ops = by_name["TPU 1 XLA Ops"]
    reduce = [i for i, n in enumerate(ops.nid.tolist()) if "all-reduce" in st.event_name(n)]
    assert reduce and all(CATEGORIES[int(ops.cat[i])] == "device_collectives" for i in reduce)
    assert {t.group for t in st.tracks if t.kind == "device"} == {"TPU 0", "TPU 1"}
    assert main(["timeline", str(tmp_path), "--compare-median", "--width", "100"]) == 0
    out = capsys.readouterr().out
    lines = out.split("Busy time per track:")[1].splitlines()
    grown = [g for g in lines if g.strip().startswith("+0.05 ms")]
    assert "comm +0.05 ms" in next(g for g in grown if "TPU 1 XLA Ops" in g)
    assert "other" in grown[-1] and "other" not in grown[0]  # work first, markers last
    for line in out.splitlines():
        assert len(line) <= 100


def test_multi_host_tpu_xspace_has_a_source_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from xla_profiles import tpu_steps_job

    tpu_steps_job(tmp_path, hosts=2)
    tl = load_timeline(tmp_path)
    assert tl.source_names() == ["tpuhost0", "tpuhost1"]
    st = tl.step(2, source="tpuhost1")
    assert st.source == "tpuhost1" and any(t.group == "TPU 1" for t in st.tracks)
    assert main(["timeline", str(tmp_path), "--rank", "tpuhost1", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["source"] == "tpuhost1"
    assert {t["kind"] for t in got["tracks"]} == {"host", "device"}
    assert any(e["category"] == "device_collectives" for t in got["tracks"] for e in t["events"])
