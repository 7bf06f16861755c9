"""JAX jobs run at test time (CPU): steps from program runs, markers, the one-line helper, capture.

Every job runs in its own process (tests/jax_job.py, examples/train_jax.py): JAX's profiler is
process-wide. Skipped where JAX is not installed (`pip install .[jax]`). The capture case talks
to JAX's profiler server, which binds all interfaces, so it runs in a private network namespace
as test_capture.py does, and is skipped where `unshare -n` is not permitted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from capture_helpers import free_port
from conftest import REPO, script_env
from netns import unshare_prefix

from tui_prof.model import STEP_SOURCE_OFFICIAL, STEP_SOURCE_PROGRAM_RUNS
from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import summarize_session

pytest.importorskip("jax", reason="JAX is an extra: pip install .[jax]")

JOB = REPO / "tests" / "jax_job.py"
EXAMPLE = REPO / "examples" / "train_jax.py"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in script_env().items() if not k.startswith("TUIPROF_")}
    env.update(JAX_PLATFORMS="cpu", **extra)
    if "TUIPROF_CACHE_DIR" in os.environ:  # the test's private cache (conftest)
        env["TUIPROF_CACHE_DIR"] = os.environ["TUIPROF_CACHE_DIR"]
    return env


def _run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    r = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env or _env(),
        cwd=cwd,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def _session(logdir: Path) -> Path:
    (session,) = discover(logdir).sessions
    return session.path


@pytest.fixture(scope="module")
def cpu_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A minimal jitted job, without and with step markers."""
    root = tmp_path_factory.mktemp("jax")
    _run(str(JOB), "trace", str(root / "plain"))
    _run(str(JOB), "trace", str(root / "marked"), "--markers")
    return {"plain": _session(root / "plain"), "marked": _session(root / "marked")}


def test_cpu_job_steps_are_runs_of_the_jitted_step(cpu_jobs: dict[str, Path]) -> None:
    s = summarize_session(cpu_jobs["plain"])
    assert s.step_source == STEP_SOURCE_PROGRAM_RUNS
    assert "12 runs of the XLA program 'jit_step'" in s.step_source_detail
    assert 10 <= len(s.steps) <= 12
    for st in s.steps:  # the parts add up to the step time, and the thunks computed
        assert sum(st.breakdown_ms.values()) == pytest.approx(st.step_time_ms, rel=1e-9)
        assert st.breakdown_ms["host_compute"] > 0
        assert st.breakdown_ms["device_compute"] == 0  # no device: XLA:CPU's work is host compute
    assert [(p.name, p.runs) for p in s.programs][:1] == [("jit_step", 12)]


def test_cpu_job_with_markers_keeps_the_converters_steps(cpu_jobs: dict[str, Path]) -> None:
    official = summarize_session(cpu_jobs["marked"])
    assert official.step_source == STEP_SOURCE_OFFICIAL and len(official.steps) == 10
    runs = summarize_session(cpu_jobs["marked"], step_program="step")
    assert runs.step_source == STEP_SOURCE_PROGRAM_RUNS and len(runs.steps) == 10
    # A run's step lasts until the next run starts, a marked step until its marker ends: the same
    # pace, the runs' steps a little longer by the loop between markers. Medians, since the two
    # windows differ at their edges, and on a loaded machine (a CI run) one stalled step moved the
    # marked mean of ten to 1.5x the runs' mean.
    median_runs = statistics.median(r.step_time_ms for r in runs.steps)
    median_marked = statistics.median(s.step_time_ms for s in official.steps)
    assert 0.9 * median_marked <= median_runs <= 1.5 * median_marked


def test_cli_json_for_the_cpu_job(cpu_jobs: dict[str, Path]) -> None:
    out = _run("-m", "tui_prof.cli", "summary", str(cpu_jobs["plain"]), "--json")
    (doc,) = json.loads(out)["sessions"]
    assert doc["step_source"] == "xla_program_runs"
    assert doc["xla_programs"][0]["name"] == "jit_step" and doc["xla_programs"][0]["runs"] == 12
    assert doc["device_utilization"] is None and doc["precision"] is None


def test_helper_under_tuiprof_reports_and_traces(tmp_path: Path) -> None:
    metrics, run_dir = tmp_path / "metrics.jsonl", tmp_path / "run"
    env = _env(TUIPROF_METRICS_FILE=str(metrics), TUIPROF_RUN_DIR=str(run_dir))
    _run(str(JOB), "helper", "--profile", "3,8", "--steps", "12", env=env)
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    info = lines[0]["info"]
    assert info["batch_size"] == 64 and info["framework_versions"]["jax"]
    assert set(lines[-2]) == {"final_loss"}
    assert lines[-1]["steps"] == 12 and lines[-1]["step_time_ms"] > 0
    s = summarize_session(_session(run_dir))  # steps 3..8 traced, each in JAX's step marker
    assert s.step_source == STEP_SOURCE_OFFICIAL
    assert len(s.steps) == 4  # six marked steps, less the first and last, as TensorBoard does


def test_helper_outside_tuiprof_does_nothing_and_imports_nothing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from tui_prof.instrument.jax import trace_steps\n"
        "with trace_steps((1, 2)) as run:\n"
        "    for n in (1, 2, 3):\n"
        "        with run.step(n):\n"
        "            pass\n"
        "    run.report(x=1)\n"
        "print('jax' in sys.modules)\n"
    )
    out = _run("-c", code, cwd=tmp_path)
    assert out.strip() == "False"
    assert not list(tmp_path.iterdir())


def test_example_with_and_without_markers(tmp_path: Path) -> None:
    common = ["--epochs", "1", "--profile-steps", "3,10", "--small-profile"]
    _run(str(EXAMPLE), *common, "--logdir", str(tmp_path / "plain"))
    _run(str(EXAMPLE), *common, "--logdir", str(tmp_path / "marked"), "--step-markers")
    plain = summarize_session(_session(tmp_path / "plain"))
    assert plain.step_source == STEP_SOURCE_PROGRAM_RUNS and len(plain.steps) == 6
    assert "'jit_train_step'" in plain.step_source_detail
    marked = summarize_session(_session(tmp_path / "marked"))
    assert marked.step_source == STEP_SOURCE_OFFICIAL and len(marked.steps) == 6


def _scenario(workdir: Path) -> dict[str, object]:
    """Inside the namespace: the helper's job serves captures on its port; capture one."""
    port = free_port()
    env = _env(
        TUIPROF_METRICS_FILE=str(workdir / "metrics.jsonl"),
        TUIPROF_RUN_DIR=str(workdir / "run"),
        TUIPROF_PROFILER_PORT=str(port),
    )
    job = subprocess.Popen(
        [sys.executable, str(JOB), "helper", "--seconds", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert job.stdout is not None
        assert job.stdout.readline().startswith("READY")
        cap = subprocess.run(
            [
                *(sys.executable, "-m", "tui_prof.cli", "capture", f"localhost:{port}"),
                *("--duration-ms", "1500", "--logdir", str(workdir / "captured"), "--no-summary"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
    finally:
        os.killpg(job.pid, 9)
        job.wait(10)
    return {"rc": cap.returncode, "stdout": cap.stdout, "stderr": cap.stderr}


def test_capture_from_the_helpers_jax_profiler_server(tmp_path: Path) -> None:
    prefix = unshare_prefix()
    if prefix is None:
        pytest.skip("unshare -n is not permitted here; JAX's profiler server binds all interfaces")
    script = f"ip link set lo up && exec {sys.executable} {__file__} {tmp_path}"
    proc = subprocess.run(
        [*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=240, env=_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rc"] == 0, result["stderr"]
    s = summarize_session(_session(tmp_path / "captured"))
    assert s.step_source == STEP_SOURCE_OFFICIAL and s.steps  # the helper's step markers


if __name__ == "__main__":
    print(json.dumps(_scenario(Path(sys.argv[1]))))
