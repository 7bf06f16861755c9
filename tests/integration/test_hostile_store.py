"""No user file or result lost: tuiprof never writes over a file it did not create, refuses paths
that break its one-line output, and validates what every run would fail on before any runs."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import REPO, run_cli

from tui_prof.experiments.commands import save_spec, spec_from_commands
from tui_prof.experiments.spec import SpecError, load_spec
from tui_prof.experiments.store import load_experiment
from tui_prof.model import RUN_FINISHED, RUN_RUNNING

if TYPE_CHECKING:
    from tui_prof.experiments.runner import Runner


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=120)


def test_output_into_a_users_directory_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "spec.toml").write_text("my own notes\n")
    r = _cli("run", "--headless", "--output", str(mine), "--variant", "a=true")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "not empty" in r.stderr, r.stderr
    assert (mine / "spec.toml").read_text() == "my own notes\n"
    assert sorted(p.name for p in mine.iterdir()) == ["spec.toml"]


def test_save_spec_never_replaces_unasked(tmp_path: Path) -> None:
    spec = spec_from_commands(["a=true"])
    target = tmp_path / "spec.toml"
    target.write_text("mine\n")
    with pytest.raises(SpecError, match="exists; not replaced"):
        save_spec(spec, target)
    assert target.read_text() == "mine\n"
    save_spec(spec, target, replace=True)  # what the TUI does once the user said so
    assert load_spec(target).name == spec.name


async def test_save_spec_as_asks_in_the_tui(tmp_path: Path) -> None:
    from textual.widgets import Input, Static, TextArea

    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.screens.start_dialog import StartDialog

    target = tmp_path / "keep.toml"
    target.write_text("mine\n")
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = StartDialog("")
        await app.push_screen(dialog)
        await pilot.pause()
        dialog.query_one("#variants", TextArea).text = "a=true"
        dialog.query_one("#save", Input).value = str(target)
        dialog._submit()
        await pilot.pause()
        error = str(dialog.query_one(dialog.ERROR, Static).render())
        assert "exists; Start again to replace it" in error, error
        assert target.read_text() == "mine\n"
        dialog._submit()  # the second Start: the user's answer
        await pilot.pause()
        assert "name =" in target.read_text()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[variants.a]\nenv = { "A=B" = "1" }\n', "without '=' or NUL"),
        ('[variants.a]\nenv = { "" = "1" }\n', "must be non-empty"),
        ('[variants.a]\nenv = { X = "a\\u0000b" }\n', "a value without NUL"),
        ('[variants.a]\nargs = ["a\\u0000b"]\n', "NUL byte"),
        ('output = "out\\nput"\n[variants.a]\n', "on one line"),
    ],
)
def test_what_every_run_would_fail_on_is_refused_up_front(
    tmp_path: Path, text: str, why: str
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('name = "x"\ncommand = ["true"]\n' + text)
    with pytest.raises(SpecError, match=why):
        load_spec(spec)
    r = _cli("run", "--headless", str(spec))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


def test_output_with_a_newline_is_refused(tmp_path: Path) -> None:
    r = _cli("run", "--headless", "--output", str(tmp_path / "a\nb"), "--variant", "a=true")
    assert r.returncode != 0 and "line break" in r.stderr and not (tmp_path / "a\nb").exists()


JOB = (
    "import json, os, time\n"
    "time.sleep(float(os.environ.get('SLEEP', '0')))\n"
    "go, end = os.environ.get('GO'), time.monotonic() + 60\n"  # finish once the test says so
    "while go and not os.path.exists(go) and time.monotonic() < end:\n"
    "    time.sleep(0.01)\n"
    "print('x' * int(os.environ.get('OUT', '0')))\n"
    "with open(os.environ['TUIPROF_METRICS_FILE'], 'a') as f:\n"
    "    f.write(json.dumps({'metric': 'score', 'value': 2.5}) + '\\n')\n"
)


def _runner(tmp_path: Path, env: str = "", repeats: int = 1) -> Runner:
    from tui_prof.experiments.runner import Runner

    (tmp_path / "job.py").write_text(JOB)
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'name = "x"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = {repeats}\n'
        f"[variants.a]\nenv = {{ {env} }}\n"
    )
    return Runner.create(load_spec(spec), tmp_path / "exp")


def _hold_exclusive(db: Path, seconds: float, started: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    started.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def test_a_locked_store_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds the store exclusively while a job finishes: the result waits
    (kept on disk meanwhile) and is recorded once the store answers, not lost as 'failed'."""
    from tui_prof.experiments import durable

    monkeypatch.setattr(durable, "RETRY_DELAYS_S", (0.3,) * 20)
    go = tmp_path / "go"
    runner = _runner(tmp_path, env=f'GO = "{go}"')
    runner.store._conn.execute("PRAGMA busy_timeout = 100")
    started = threading.Event()
    holder = threading.Thread(
        target=_hold_exclusive, args=(runner.experiment_dir / "experiment.sqlite", 3.0, started)
    )
    runner.start()
    # The run's row says running before the lock is taken, and the job finishes only once the
    # lock is held (a fixed 0.2 s and a 0.5 s job raced both on a loaded machine).
    deadline = time.monotonic() + 30
    while load_experiment(runner.experiment_dir).runs[0].status != RUN_RUNNING:
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.02)
    holder.start()
    started.wait()
    go.touch()
    assert runner.wait(60)
    holder.join()
    (run,) = load_experiment(runner.experiment_dir).runs
    assert run.status == RUN_FINISHED and run.metrics["score"] == 2.5, run
    assert not (Path(run.run_dir) / durable.RESULT_FILE).exists()


NEVER_ANSWERS = """
import sqlite3, sys, threading
from pathlib import Path
from tui_prof.experiments import durable
from tui_prof.experiments.events import RunStarted
from tui_prof.experiments.runner import Runner
from tui_prof.experiments.spec import load_spec

durable.RETRY_DELAYS_S = (0.1, 0.1)
running = threading.Event()
on_event = lambda e: running.set() if isinstance(e, RunStarted) else None
runner = Runner.create(load_spec(sys.argv[1]), sys.argv[2], on_event=on_event)
runner.store._conn.execute("PRAGMA busy_timeout = 100")
runner.start()
assert running.wait(60), "the first run did not start"
conn = sqlite3.connect(runner.experiment_dir / "experiment.sqlite", isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")  # until the runner has given up
Path(sys.argv[3]).touch()  # now the job may finish: its result meets the lock
assert runner.wait(60)
conn.execute("COMMIT")
print(runner.problem)
"""


def test_a_store_that_never_answers_keeps_the_result_for_resume(tmp_path: Path) -> None:
    """The runner (a process of its own, which then exits) finds the store locked for good: it
    stops with one line and keeps the finished run's result; --resume records it."""
    from tui_prof.experiments import durable

    (tmp_path / "job.py").write_text(JOB)
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'name = "x"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 2\n'
        f'[variants.a]\nenv = {{ GO = "{tmp_path / "go"}" }}\n'
    )
    exp = tmp_path / "exp"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "-c", NEVER_ANSWERS, str(spec), str(exp), str(tmp_path / "go")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert "the store did not answer (database is locked)" in r.stdout, r.stdout + r.stderr
    assert "--resume" in r.stdout
    kept = list((exp / "runs").glob(f"*/{durable.RESULT_FILE}"))
    assert len(kept) == 1
    r = _cli("run", "--resume", str(exp))
    assert r.returncode == 0, r.stderr
    assert f"recorded {kept[0].parent.name}: finished while the store did not answer" in r.stderr
    runs = load_experiment(exp).runs
    assert [r.status for r in runs] == [RUN_FINISHED, RUN_FINISHED]
    assert all(r.metrics["score"] == 2.5 for r in runs) and not kept[0].exists()


FULL = Path("/tmp/tuiprof-test-full")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_stops_cleanly_and_resume_finishes() -> None:
    """A real full disk: a 1 MB tmpfs that the jobs' output fills mid-experiment."""
    FULL.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(FULL)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (FULL / "job.py").write_text(JOB)
        job = f"{sys.executable} {FULL / 'job.py'}"
        exp = FULL / "exp"
        env = {**os.environ, "PYTHONPATH": str(REPO), "OUT": "200000"}
        args = [sys.executable, "-m", "tui_prof.cli", "run", "--headless", "--repeats", "4",
                "--output", str(exp), "--variant", f"a={job}", "--variant", f"b={job}"]  # fmt: skip
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("stopped: the disk is full") == 1, r.stderr
        assert r.stdout.strip().splitlines()[-1] == str(exp)
        subprocess.run(["mount", "-o", "remount,size=16m", str(FULL)], check=True)
        r = subprocess.run(
            [sys.executable, "-m", "tui_prof.cli", "run", "--resume", str(exp)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert {x.status for x in load_experiment(exp).runs} == {RUN_FINISHED}
    finally:
        subprocess.run(["umount", str(FULL)])
