"""`tuiprof run` as users and scripts call it: a real subprocess, real jobs, the contract's exit codes."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tui_prof.experiments.store import load_experiment
from tui_prof.model import RUN_FAILED, RUN_FINISHED

REPO = Path(__file__).resolve().parents[1]
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
    return subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "run", *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


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
        deadline = time.monotonic() + 20
        while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
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
