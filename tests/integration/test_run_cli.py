"""`tuiprof run` as users and scripts call it: a real subprocess, real jobs, the contract's exit codes."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from tui_prof.experiments.store import load_experiment
from tui_prof.model import RUN_FAILED, RUN_FINISHED

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
JOB = r"""
import json, os, sys
with open(os.environ["TUIPROF_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"metric": "score", "value": 1.5}) + "\n")
print("job", os.environ["TUIPROF_RUN_ID"])
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def spec_file(
    tmp_path: Path, variants: str = "[variants.a]\n[variants.b]\n", extra: str = ""
) -> Path:
    (tmp_path / "job.py").write_text(JOB)
    p = tmp_path / "tuiprof.toml"
    p.write_text(
        f'name = "cli"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 2\n'
        f'metrics = ["score"]\n{extra}\n{variants}'
    )
    return p


def tuiprof(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", *args, timeout=120)


def test_headless_runs_everything_and_prints_the_directory_last(tmp_path: Path) -> None:
    res = tuiprof(str(spec_file(tmp_path)), "--headless")
    assert res.returncode == 0, res.stderr
    exp_dir = Path(res.stdout.strip().splitlines()[-1])
    assert exp_dir.parent == tmp_path / "tuiprof-experiments" and exp_dir.name.startswith("cli-")
    exp = load_experiment(exp_dir)
    assert [r.run_id for r in exp.runs] == ["a-r0", "b-r0", "a-r1", "b-r1"]
    assert all(r.status == RUN_FINISHED and r.metrics["score"] == 1.5 for r in exp.runs)
    assert "4/4 runs finished" in res.stdout
    assert "[4/4] b-r1 finished in" in res.stderr and "score=1.5" in res.stderr


def test_a_failing_variant_gives_exit_1_after_running_the_rest(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, '[variants.a]\n[variants.bad]\nenv = {EXIT = "2"}\n')
    res = tuiprof(str(spec), "--headless", "--output", str(tmp_path / "out"))
    assert res.returncode == 1
    assert res.stdout.strip().splitlines()[-1] == str((tmp_path / "out").resolve())
    statuses = [r.status for r in load_experiment(tmp_path / "out").runs]
    assert statuses == [RUN_FINISHED, RUN_FAILED, RUN_FINISHED, RUN_FAILED]
    assert "bad-r1 (failed)" in res.stdout and "exited with code 2" in res.stderr


def test_bad_spec_and_missing_program_stop_before_anything_starts(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, extra="repeats = 0")  # a duplicate key: invalid TOML
    res = tuiprof(str(spec), "--headless")
    assert res.returncode == 2 and res.stderr.startswith(f"tuiprof run: {spec}: invalid TOML")
    spec.write_text('name = "x"\ncommand = ["definitely-not-a-program-42"]\n')
    res = tuiprof(str(spec), "--headless")
    assert res.returncode == 2
    assert (
        res.stderr.strip()
        == f"tuiprof run: {spec}: command: program 'definitely-not-a-program-42' not found on PATH"
    )
    assert not (tmp_path / "tuiprof-experiments").exists()
    res = tuiprof("--headless")
    assert res.returncode == 2 and "give a SPEC file" in res.stderr


def test_variants_and_repeats_override_the_spec(tmp_path: Path) -> None:
    res = tuiprof(str(spec_file(tmp_path)), "--headless", "--variants", "b", "--repeats", "3")
    assert res.returncode == 0, res.stderr
    exp = load_experiment(res.stdout.strip().splitlines()[-1])
    assert exp.variants == ("b",) and exp.baseline == "b" and exp.repeats == 3
    assert [r.run_id for r in exp.runs] == ["b-r0", "b-r1", "b-r2"]
    res = tuiprof(str(spec_file(tmp_path)), "--variants", "c")
    assert res.returncode == 2 and "no variant named 'c'" in res.stderr


def test_without_a_terminal_it_behaves_headless(tmp_path: Path) -> None:
    res = tuiprof(str(spec_file(tmp_path)))
    assert res.returncode == 0
    assert "\x1b[" not in res.stderr + res.stdout
    assert "[1/4] a-r0 started" in res.stderr


@pytest.mark.skipif(
    shutil.which("script") is None, reason="needs util-linux `script` for a pseudo-terminal"
)
def test_live_table_in_a_terminal(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    cmd = shlex.join(
        [sys.executable, "-m", "tui_prof.cli", "run", str(spec), "--output", str(tmp_path / "o")]
    )
    res = subprocess.run(
        ["script", "-qec", cmd, "/dev/null"],
        env={**ENV, "COLUMNS": "100", "LINES": "30"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout
    out = res.stdout
    assert "\x1b[" in out  # drawn as a live table, not plain lines
    assert "status" in out and "elapsed" in out and "score" in out and "finished" in out
    assert "[1/4] a-r0 started" not in out
    assert out.strip().splitlines()[-1].strip() == str((tmp_path / "o").resolve())


def test_sigterm_stops_the_running_job_and_records_it(tmp_path: Path) -> None:
    import signal
    import time

    (tmp_path / "slow.py").write_text(
        "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n"
    )
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "slow"\ncommand = ["{sys.executable}", "slow.py"]\nrepeats = 2\n')
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui_prof.cli",
            "run",
            str(spec),
            "--headless",
            "--output",
            str(out),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        log = out / "runs" / "default-r0" / "output.log"
        deadline = time.monotonic() + 60
        while not (log.exists() and log.read_text().strip()):
            assert time.monotonic() < deadline, "the job never said its pid"
            time.sleep(0.05)
        job_pid = int(log.read_text().split()[0])
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    assert stdout.strip().splitlines()[-1] == str(out.resolve())
    assert [r.status for r in load_experiment(out).runs] == ["stopped", "pending"]
    with pytest.raises(ProcessLookupError):
        os.kill(job_pid, 0)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--repeats", "1000000000"], "repeats: expected an integer >= 1 and at most 1000"),
        (["--warmup", "1000000000"], "warmup: expected an integer >= 0 and at most 100"),
        (["--parallel", "0"], "--parallel must be 1 to 64"),
        (["--parallel", "65"], "--parallel must be 1 to 64"),
    ],
)
def test_absurd_counts_are_refused_before_anything_is_planned(
    tmp_path: Path, args: list[str], says: str
) -> None:
    res = tuiprof(str(spec_file(tmp_path)), "--headless", *args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], res.stderr
    assert res.stdout == "" and not (tmp_path / "tuiprof-experiments").exists()


def test_resume_refuses_absurd_counts_and_a_zero_byte_store(tmp_path: Path) -> None:
    res = tuiprof(str(spec_file(tmp_path)), "--headless", "--output", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    res = tuiprof("--resume", str(tmp_path / "o"), "--repeats", "1000000000")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "at most 1000" in res.stderr
    res = tuiprof("--resume", str(tmp_path / "o"), "--parallel", "0")
    assert res.returncode == 2 and "--parallel must be 1 to 64" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "experiment.sqlite").write_bytes(b"")
    res = tuiprof("--resume", str(empty))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "0 bytes" in res.stderr, res.stderr
    assert (empty / "experiment.sqlite").read_bytes() == b""  # refused, not rewritten


def test_a_name_with_a_newline_is_refused_so_the_last_line_stays_the_directory(
    tmp_path: Path,
) -> None:
    spec = spec_file(tmp_path)
    spec.write_text(spec.read_text().replace('name = "cli"', 'name = "cli\\n"'))
    res = tuiprof(str(spec), "--headless")
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "control characters" in lines[0] and "'cli\\n'" in lines[0]


LOCK_JOB = r"""
import json, os, sys, time
with open(os.path.join(sys.argv[1], "starts.txt"), "a") as f:
    f.write(os.environ["TUIPROF_RUN_ID"] + "\n")
# The runs end once the test has seen the other process refused: the lock is surely held while
# it tries (a fixed 0.5 s a run left a starved second process to come after the first's end).
end = time.monotonic() + 60
while not os.path.exists(os.path.join(sys.argv[1], "release")) and time.monotonic() < end:
    time.sleep(0.01)
with open(os.environ["TUIPROF_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"metric": "score", "value": 1.0}) + "\n")
"""


def test_two_resumes_started_together_run_each_missing_run_once(tmp_path: Path) -> None:
    """Two real `tuiprof run --resume` processes at the same moment, several times over:
    exactly one runs the missing runs, the other names who holds the experiment and exits 2."""
    import socket
    import time

    from tui_prof.experiments.plan import plan_runs
    from tui_prof.experiments.spec import load_spec
    from tui_prof.experiments.writer import ExperimentStore

    (tmp_path / "job.py").write_text(LOCK_JOB)
    for attempt in range(5):
        work = tmp_path / f"try{attempt}"
        work.mkdir()
        spec_path = work / "s.toml"
        spec_path.write_text(
            f'name = "lock"\ncommand = ["{sys.executable}", "{tmp_path / "job.py"}", "{work}"]\n'
            "repeats = 2\n[variants.a]\n[variants.b]\n"
        )
        spec = load_spec(spec_path)
        ExperimentStore.create(work / "exp", spec, plan_runs(spec)).close()  # 4 runs pending
        cmd = [sys.executable, "-m", "tui_prof.cli", "run", "--resume", str(work / "exp")]
        procs = [
            subprocess.Popen(
                cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in procs):  # one is refused while the other runs
            assert time.monotonic() < deadline, "neither process was refused"
            time.sleep(0.02)
        (work / "release").touch()
        outs = [p.communicate(timeout=120) for p in procs]
        codes = [p.returncode for p in procs]
        assert sorted(codes) == [0, 2], (codes, outs)
        winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
        refusal = outs[loser][1].strip().splitlines()
        assert len(refusal) == 1, outs[loser][1]
        assert f"pid {procs[winner].pid}" in refusal[0] and socket.gethostname() in refusal[0]
        assert "since" in refusal[0] and outs[loser][0] == ""
        starts = (work / "starts.txt").read_text().split()
        assert sorted(starts) == ["a-r0", "a-r1", "b-r0", "b-r1"], starts  # each once
        exp = load_experiment(work / "exp")
        assert all(r.status == RUN_FINISHED for r in exp.runs)
        for r in exp.runs:
            assert Path(r.metrics_path).read_text().count("\n") == 1  # no duplicate lines
