"""The runner with tiny real jobs: real processes, real files, the real SQLite store."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tui_prof.experiments import events as ev
from tui_prof.experiments.runner import Runner
from tui_prof.experiments.spec import load_spec
from tui_prof.experiments.store import load_experiment
from tui_prof.model import RUN_FAILED, RUN_FINISHED, RUN_STOPPED, RUN_TIMEOUT

# A job that reports through the protocol, behaves as its variant's env says, and logs its order.
JOB = r"""
import json, os, sys, time
env = os.environ
def rep(**kw):
    with open(env["TUIPROF_METRICS_FILE"], "a") as f:
        f.write(json.dumps(kw) + "\n")
with open(os.path.join(sys.argv[1], "order.txt"), "a") as f:
    f.write(env["TUIPROF_RUN_ID"] + "\n")
rep(info={"seen": {k: v for k, v in env.items() if k.startswith("TUIPROF_")},
          "dataset_fingerprint": "digits-1", "batch_size": 8}, epochs=2)
rep(epoch=0, acc=0.5, loss=1.0)
time.sleep(float(env.get("SLEEP", "0")))
rep(metric="acc", value=float(env.get("ACC", "0.9")), epoch=1)
rep(note="not json follows")
with open(env["TUIPROF_METRICS_FILE"], "a") as f:
    f.write("this is not json\n")
print("hello from", env["TUIPROF_RUN_ID"], flush=True)
print("to stderr", file=sys.stderr, flush=True)
sys.exit(int(env.get("EXIT", "0")))
"""


def make_spec(
    tmp_path: Path, variants: str, repeats: int = 2, extra: str = "", shell: str = ""
) -> Path:
    """The JOB as the experiment's command; `shell`, when given, is run by sh first, in the
    job's own process (which then execs Python), before any timeout can fall due: Python's own
    start-up takes most of a second on a loaded machine."""
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    command = [sys.executable, "job.py", str(tmp_path)]
    if shell:
        command = ["sh", "-c", f'{shell}; exec "$0" "$@"', *command]
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "t"\ncommand = {json.dumps(command)}\n'
        f'repeats = {repeats}\nmetrics = ["acc"]\n{extra}\n{variants}',
        encoding="utf-8",
    )
    return spec


E = TypeVar("E")


class Recorder:
    """Collects events with the thread they arrived on."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def __call__(self, e: object) -> None:
        with self.lock:
            self.events.append(e)
            self.threads.add(threading.get_ident())

    def of(self, kind: type[E]) -> list[E]:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


def run_to_end(spec_path: Path, **kw: Any) -> tuple[Runner, Recorder]:
    rec = Recorder()
    runner = Runner.create(load_spec(spec_path), spec_path.parent / "exp", on_event=rec, **kw)
    runner.start()
    assert runner.wait(60), "runner did not finish"
    return runner, rec


def test_interleaved_runs_report_metrics_env_and_wall_time(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        '[variants.a]\nenv = {SLEEP = "0.3"}\n[variants.b]\nenv = {ACC = "0.8"}\n',
        extra="warmup = 1",
    )
    runner, rec = run_to_end(spec)
    order = (tmp_path / "order.txt").read_text().split()
    assert order == ["a-w0", "b-w0", "a-r0", "b-r0", "a-r1", "b-r1"]

    exp = load_experiment(runner.experiment_dir)
    assert (exp.name, exp.baseline, exp.variants, exp.metrics) == (
        "t",
        "a",
        ("a", "b"),
        ("wall_time_s", "acc"),
    )
    runs = {r.run_id: r for r in exp.runs}
    assert all(r.status == RUN_FINISHED for r in exp.runs)
    assert [r.is_warmup for r in exp.runs] == [True, True, False, False, False, False]
    a, b = runs["a-r1"], runs["b-r1"]
    assert a.metrics["acc"] == 0.9 and b.metrics["acc"] == 0.8  # the last value wins over 0.5
    assert a.metrics["loss"] == 1.0
    assert a.wall_time_s is not None and b.wall_time_s is not None
    assert 0.3 <= a.wall_time_s < 10.0 and b.wall_time_s > 0  # a sleeps 0.3 s; tuiprof timed it
    assert a.metrics["wall_time_s"] == a.wall_time_s
    assert a.progress == "epoch 2/2"
    assert a.environment["reported"]["seen"]["TUIPROF_RUN_ID"] == "a-r1"  # all the job said
    series = [
        json.loads(x) for x in Path(a.metrics_path).read_text().splitlines() if x.startswith("{")
    ]
    env_seen = series[0]["info"]["seen"]
    assert env_seen["TUIPROF_VARIANT"] == "a" and env_seen["TUIPROF_REPEAT"] == "1"
    assert (
        env_seen["TUIPROF_RUN_DIR"] == a.run_dir
        and env_seen["TUIPROF_METRICS_FILE"] == a.metrics_path
    )
    assert int(env_seen["TUIPROF_PROFILER_PORT"]) == a.profiler_port
    assert a.environment["dataset_fingerprint"] == "digits-1" and a.environment["batch_size"] == 8
    assert (
        a.environment["epochs"] == 2 and a.environment["host"] and a.environment["python_version"]
    )
    assert "gpu_model" in a.environment  # None here: no nvidia-smi
    log = Path(a.log_path).read_text()
    assert "hello from a-r1" in log and "to stderr" in log

    # Events: one start and one end per run, in order, none on the caller's thread.
    assert threading.get_ident() not in rec.threads
    assert isinstance(rec.events[0], ev.ExperimentStarted) and isinstance(
        rec.events[-1], ev.ExperimentFinished
    )
    assert [e.run_id for e in rec.of(ev.RunStarted)] == order
    assert [e.run_id for e in rec.of(ev.RunFinished)] == order
    out = [line for e in rec.of(ev.RunOutput) if e.run_id == "a-r0" for line in e.lines]
    assert "hello from a-r0" in out
    assert any(e.progress == "epoch 2/2" for e in rec.of(ev.RunProgress) if e.run_id == "a-r0")
    assert rec.events[-1].counts == {RUN_FINISHED: 6} and not rec.events[-1].cancelled


def test_failures_are_recorded_with_log_tail_and_the_rest_continue(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, '[variants.ok]\n[variants.bad]\nenv = {EXIT = "3"}\n')
    runner, rec = run_to_end(spec)
    exp = load_experiment(runner.experiment_dir)
    statuses = {r.run_id: r.status for r in exp.runs}
    assert statuses == {
        "ok-r0": RUN_FINISHED,
        "bad-r0": RUN_FAILED,
        "ok-r1": RUN_FINISHED,
        "bad-r1": RUN_FAILED,
    }
    bad = next(r for r in exp.runs if r.run_id == "bad-r1")
    assert bad.exit_code == 3 and (bad.error or "").startswith("exited with code 3")
    assert "hello from bad-r1" in bad.log_tail and "to stderr" in bad.log_tail
    assert [e.run_id for e in rec.of(ev.RunFailed)] == ["bad-r0", "bad-r1"]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # The job's own child (a sleep in its process group) exists before the 0.5 s can pass: made
    # by Python, it was sometimes not there yet on a loaded machine, and no pid file was written.
    spec = make_spec(
        tmp_path,
        '[variants.slow]\nenv = {SLEEP = "30"}\n',
        repeats=1,
        extra="timeout_s = 0.5\nkill_grace_s = 0.5",
        shell='sleep 60 & echo $! > "$TUIPROF_RUN_DIR/grandchild.pid"',
    )
    t0 = time.monotonic()
    runner, _ = run_to_end(spec)
    assert time.monotonic() - t0 < 20  # not the job's 30 s: the timeout ended it
    run = load_experiment(runner.experiment_dir).runs[0]
    assert run.status == RUN_TIMEOUT and "timed out after 0.5 s" in (run.error or "")
    assert run.exit_code == -signal.SIGTERM
    grandchild = int((Path(run.run_dir) / "grandchild.pid").read_text())
    deadline = time.monotonic() + 30
    while _pid_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(grandchild), "the job's own child outlived the timeout"


def test_sigterm_ignored_gets_sigkill_after_grace(tmp_path: Path) -> None:
    # SIGTERM is ignored from the job's first moment (sh's trap; exec keeps it ignored): a job that
    # ignored it from Python was still starting, and died of the SIGTERM, on a loaded machine.
    spec = make_spec(
        tmp_path,
        '[variants.stubborn]\nenv = {SLEEP = "60"}\n',
        repeats=1,
        extra="timeout_s = 0.5\nkill_grace_s = 0.3",
        shell="trap '' TERM",
    )
    runner, _ = run_to_end(spec)
    run = load_experiment(runner.experiment_dir).runs[0]
    assert run.status == RUN_TIMEOUT and run.exit_code == -signal.SIGKILL


def test_start_returns_at_once_and_stop_stops_one_run(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, '[variants.a]\nenv = {SLEEP = "30"}\n[variants.b]\n', repeats=1)
    rec = Recorder()
    runner = Runner.create(load_spec(spec), tmp_path / "exp", on_event=rec)
    t0 = time.monotonic()
    runner.start()
    # Never blocks the caller: it returns long before the 30 s run could end (a bound of 0.2 s
    # measured the OS starting a thread on a loaded machine as much as the runner).
    assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 30
    while not rec.of(ev.RunStarted):
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.02)
    assert runner.active == ["a-r0"]
    runner.stop("a-r0")
    assert runner.wait(15)
    runs = {r.run_id: r for r in load_experiment(runner.experiment_dir).runs}
    assert runs["a-r0"].status == RUN_STOPPED and runs["b-r0"].status == RUN_FINISHED


def test_stop_all_leaves_later_runs_pending(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, '[variants.a]\nenv = {SLEEP = "30"}\n', repeats=3)
    rec = Recorder()
    runner = Runner.create(load_spec(spec), tmp_path / "exp", on_event=rec).start()
    deadline = time.monotonic() + 30
    while not rec.of(ev.RunStarted):
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.02)
    runner.stop_all()
    assert runner.wait(15)
    statuses = [r.status for r in load_experiment(runner.experiment_dir).runs]
    assert statuses == [RUN_STOPPED, "pending", "pending"]
    last = rec.events[-1]
    assert isinstance(last, ev.ExperimentFinished) and last.cancelled


def test_a_broken_event_handler_does_not_stop_the_experiment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = make_spec(tmp_path, "[variants.a]\n", repeats=2)

    def boom(e: object) -> None:
        raise RuntimeError("ui bug")

    runner = Runner.create(load_spec(spec), tmp_path / "exp", on_event=boom).start()
    assert runner.wait(30)
    assert [r.status for r in load_experiment(runner.experiment_dir).runs] == [RUN_FINISHED] * 2
    assert "ui bug" in capsys.readouterr().err


def test_parallel_runs_overlap(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        '[variants.a]\nenv = {SLEEP = "0.6"}\n[variants.b]\nenv = {SLEEP = "0.6"}\n',
        repeats=1,
    )
    runner, _ = run_to_end(spec, parallel=2)
    a, b = load_experiment(runner.experiment_dir).runs
    assert a.status == b.status == RUN_FINISHED
    # They ran at the same time: each started before the other ended (one after the other, the
    # second starts after the first's 0.6 s). The experiment's whole time against the runs' sum
    # counted the runner's own start and end, which a loaded machine stretched past one run.
    assert a.started_at and a.ended_at and b.started_at and b.ended_at
    assert a.started_at < b.ended_at and b.started_at < a.ended_at


def test_runner_core_imports_neither_textual_nor_tensorflow() -> None:
    import subprocess

    code = (
        "import sys, tui_prof.experiments.runner, tui_prof.cli.run, tui_prof.instrument; "
        "bad = [m for m in ('textual', 'tensorflow', 'keras') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("n", [3])
def test_output_is_streamed_while_the_job_runs(tmp_path: Path, n: int) -> None:
    # Each tick after the first waits for a go-file the test writes once it has seen the tick
    # before: the job cannot end, nor print the next line, before the last one arrived. (Ticks
    # 0.3 s apart came in one batch when a loaded machine kept the reader off the CPU.)
    job = tmp_path / "ticker.py"
    job.write_text(
        "import os, time\n"
        f"for i in range({n}):\n"
        "    end = time.monotonic() + 60\n"
        "    while i and not os.path.exists(f'go{i}') and time.monotonic() < end:\n"
        "        time.sleep(0.01)\n"
        "    print('tick', i, flush=True)\n"
    )
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "tick"\ncommand = ["{sys.executable}", "ticker.py"]\nrepeats = 1\n')
    rec = Recorder()
    runner = Runner.create(load_spec(spec), tmp_path / "exp", on_event=rec).start()

    def lines() -> list[str]:
        return [line for e in rec.of(ev.RunOutput) for line in e.lines]

    for i in range(n):
        deadline = time.monotonic() + 30
        while f"tick {i}" not in lines():
            assert time.monotonic() < deadline, f"tick {i} never arrived"
            time.sleep(0.02)
        if i + 1 < n:
            assert not runner.done  # the line arrived while the job still ran
            (tmp_path / f"go{i + 1}").touch()  # the job runs in the spec's directory
    assert runner.wait(30)
    assert lines() == [f"tick {i}" for i in range(n)]
    assert len(rec.of(ev.RunOutput)) == n  # one batch per tick: each sent as it came


def test_tuiprof_variables_in_args_are_expanded_per_run(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'name = "seeds"\ncommand = ["{sys.executable}", "-c", "import sys; print(sys.argv[1:])"]\n'
        'repeats = 2\n[variants.a]\nargs = ["--seed", "${TUIPROF_REPEAT}", "${TUIPROF_VARIANT}-x", "${HOME}", "{}"]\n'
    )
    runner, _ = run_to_end(spec)
    logs = [
        Path(r.log_path).read_text().strip() for r in load_experiment(runner.experiment_dir).runs
    ]
    assert logs == [
        "['--seed', '0', 'a-x', '${HOME}', '{}']",
        "['--seed', '1', 'a-x', '${HOME}', '{}']",
    ]


def test_metrics_reader_follows_a_growing_file_line_by_line(tmp_path: Path) -> None:
    from tui_prof.experiments.protocol import MetricsReader

    path = tmp_path / "m.jsonl"
    reader = MetricsReader(path)
    assert reader.poll() == []  # no file yet
    with open(path, "a") as f:
        f.write('{"epoch": 0, "epochs": 3, "acc": 0.5}\n{"metric": "acc", "va')
    assert reader.poll() == [{"epoch": 0, "epochs": 3, "acc": 0.5}]  # the half line waits
    assert reader.state.progress() == "epoch 1/3"
    with open(path, "a") as f:
        f.write(
            'lue": 0.7}\n[1, 2]\n{"dataset_fingerprint": "d", "ok": true, "x": NaN}\n{"acc": 0.8}'
        )
    new = reader.poll(final=True)  # the end of a run: the last line counts without its newline
    assert new[0] == {"acc": 0.7} and new[-1] == {"acc": 0.8}
    s = reader.state
    assert s.final == {"acc": 0.8} and s.bad_lines == 1
    assert s.info == {"epochs": 3, "dataset_fingerprint": "d", "ok": True}
    assert len(s.series) == 4


def test_a_run_that_cannot_start_is_failed_without_a_start_event(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec_path = tmp_path / "s.toml"
    spec_path.write_text(
        f'name = "gone"\ncommand = ["{sys.executable}", "-c", "pass"]\nworkdir = "work"\n'
        "repeats = 1\n"
    )
    spec = load_spec(spec_path)
    work.rmdir()  # the working directory disappears after the spec was checked
    rec = Recorder()
    runner = Runner.create(spec, tmp_path / "exp", on_event=rec).start()
    assert runner.wait(10)
    run = load_experiment(runner.experiment_dir).runs[0]
    assert run.status == RUN_FAILED and (run.error or "").startswith("could not start")
    assert not rec.of(ev.RunStarted) and [e.run_id for e in rec.of(ev.RunFailed)] == ["default-r0"]


def test_gpu_fingerprint_parses_nvidia_smi_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui_prof.experiments.fingerprint import gpu_info

    # No GPU on this machine: nvidia-smi's real output formats, replayed by a stand-in on PATH.
    tool = tmp_path / "nvidia-smi"
    tool.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--query-gpu=name,driver_version,memory.total" ]; then\n'
        "  echo 'NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB'\n"
        "  echo 'NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB'\n"
        "else\n"
        "  echo '| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |'\n"
        "fi\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    info = gpu_info()
    assert info == {
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "gpu_count": 2,
        "gpu_driver": "550.54.15",
        "gpu_memory": "81559 MiB",
        "cuda_version": "12.4",
    }
    tool.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn't communicate with the driver'\nexit 9\n"
    )
    assert gpu_info()["gpu_model"] is None  # a broken driver reads as no GPU, not as an error


def test_framework_versions_come_from_package_metadata_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A framework installed here (its dist-info first on sys.path) is reported at its version,
    read from the metadata: the framework itself is never imported, so a job's fingerprint costs
    nothing and works where importing it would fail."""
    dist = tmp_path / "tensorflow-9.8.7.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 9.8.7\n")
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text("raise ImportError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = "tensorflow" in sys.modules
    from tui_prof.experiments.fingerprint import framework_versions

    versions = framework_versions()
    assert versions["tensorflow"] == "9.8.7"
    assert ("tensorflow" in sys.modules) == before
