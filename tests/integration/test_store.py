"""The results store: real SQLite, a real SIGKILL of `tuiprof run`, and resume running only what is missing."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from tui_prof.experiments.spec import load_spec
from tui_prof.experiments.store import (
    DB_NAME,
    LOCK_NAME,
    StoreError,
    load_experiment,
)
from tui_prof.experiments.writer import ExperimentStore, PlannedRun
from tui_prof.model import RUN_FINISHED, RUN_INTERRUPTED, RUN_PENDING, RUN_RUNNING

JOB = r"""
import json, os, sys, time
env = os.environ
with open(os.path.join(sys.argv[1], "starts.txt"), "a") as f:
    f.write(env["TUIPROF_RUN_ID"] + "\n")
time.sleep(float(sys.argv[2]))
with open(env["TUIPROF_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"acc": 0.5 + int(env["TUIPROF_REPEAT"]) / 100}) + "\n")
print("done", env["TUIPROF_RUN_ID"])
"""


def make_spec(tmp_path: Path, sleep: float, repeats: int = 3) -> Path:
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "k"\ncommand = ["{sys.executable}", "job.py", "{tmp_path}", "{sleep}"]\n'
        f'repeats = {repeats}\nmetrics = ["acc"]\n[variants.a]\n[variants.b]\n',
        encoding="utf-8",
    )
    return spec


def test_create_plan_and_read_back(tmp_path: Path) -> None:
    spec = load_spec(make_spec(tmp_path, 0))
    store = ExperimentStore.create(tmp_path / "exp", spec, [PlannedRun("a", 0), PlannedRun("b", 0)])
    try:
        exp = load_experiment(tmp_path / "exp")  # a second connection while the writer is open
        assert [r.run_id for r in exp.runs] == ["a-r0", "b-r0"]
        assert all(r.status == RUN_PENDING for r in exp.runs)
        assert store.add_runs([PlannedRun("a", 0), PlannedRun("a", 1, True)]) == ["a-w1"]
        conn = sqlite3.connect(tmp_path / "exp" / DB_NAME)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()
    finally:
        store.close()
    with pytest.raises(StoreError, match="already holds an experiment"):
        ExperimentStore.create(tmp_path / "exp", spec, [])


def test_not_an_experiment(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a tuiprof experiment"):
        load_experiment(tmp_path)
    (tmp_path / DB_NAME).write_bytes(b"garbage" * 100)
    with pytest.raises(StoreError, match="cannot read"):
        load_experiment(tmp_path)


def test_stale_running_run_reads_as_interrupted_and_open_persists_it(tmp_path: Path) -> None:
    spec = load_spec(make_spec(tmp_path, 0))
    store = ExperimentStore.create(tmp_path / "exp", spec, [PlannedRun("a", 0)])
    store.mark_running("a-r0", time.time(), None, None, None, {})
    # Pretend the runner was a process that has exited since.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store._update("a-r0", runner_pid=dead.pid, runner_start="0")
    assert store.run("a-r0").status == RUN_INTERRUPTED  # read side
    raw = (
        sqlite3.connect(tmp_path / "exp" / DB_NAME).execute("SELECT status FROM runs").fetchone()[0]
    )
    assert raw == RUN_RUNNING  # reading wrote nothing
    store.close()
    reopened = ExperimentStore.open(tmp_path / "exp")
    raw = reopened._conn.execute("SELECT status FROM runs").fetchone()[0]
    assert raw == RUN_INTERRUPTED
    reopened.close()


def test_directory_is_movable_and_readable_read_only(tmp_path: Path) -> None:
    spec = load_spec(make_spec(tmp_path, 0))
    store = ExperimentStore.create(tmp_path / "exp", spec, [PlannedRun("a", 0)])
    store.close()
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "exp", moved)
    # No -wal/-shm left behind; the lock file stays, empty: nobody holds it.
    assert sorted(p.name for p in moved.iterdir()) == [DB_NAME, LOCK_NAME, "runs"]
    assert (moved / LOCK_NAME).read_bytes() == b""
    for p in [moved, moved / DB_NAME]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        exp = load_experiment(moved)
        assert exp.runs[0].run_dir == str(moved / "runs" / "a-r0")
    finally:
        moved.chmod(0o755)


def _kill_group_quietly(pgid: int | None) -> None:
    if pgid:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


def _running_with(pid: int, mark: str) -> bool:
    """Whether `pid` is a live (not zombie) process whose command line holds `mark`."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return not zombie and mark.encode() in f.read()
    except OSError:
        return False


def _kill_quietly_if_ours(pid: int, mark: str) -> None:
    if _running_with(pid, mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_sigkill_mid_experiment_loses_no_finished_run_and_resume_runs_only_missing(
    tmp_path: Path,
) -> None:
    spec = make_spec(tmp_path, sleep=0.4, repeats=3)
    exp_dir = tmp_path / "exp"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "tui_prof.cli",
        "run",
        str(spec),
        "--headless",
        "--output",
        str(exp_dir),
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    pgids: list[int | None] = []
    try:
        deadline = time.monotonic() + 30
        while True:  # wait until two runs finished and a third is running
            assert time.monotonic() < deadline, "runs did not progress"
            if (exp_dir / DB_NAME).exists():
                try:
                    runs = load_experiment(exp_dir).runs
                except StoreError:
                    runs = ()
                done = [r for r in runs if r.status == RUN_FINISHED]
                running = [r.run_id for r in runs if r.status == RUN_RUNNING]
                starts = tmp_path / "starts.txt"
                # ...and the running job has started (so it appears in starts.txt before the kill)
                if len(done) >= 2 and running and running[0] in starts.read_text().split():
                    break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # tuiprof itself, not the job's own process group
        proc.wait(10)

        conn = sqlite3.connect(exp_dir / DB_NAME)
        pgids = [r[0] for r in conn.execute("SELECT child_pgid FROM runs")]
        conn.close()
        exp = load_experiment(exp_dir)
        before = {r.run_id: r for r in exp.runs}
        finished = [r for r in exp.runs if r.status == RUN_FINISHED]
        # the run that was running: still alive (its job goes on) or ended unrecorded
        interrupted = [r for r in exp.runs if r.status in (RUN_INTERRUPTED, RUN_RUNNING)]
        assert len(finished) >= 2 and len(interrupted) == 1
        for r in finished:  # intact: record, metrics and files
            assert r.metrics["acc"] == 0.5 + r.repeat / 100
            assert r.wall_time_s is not None and r.wall_time_s >= 0.4
            assert f"done {r.run_id}" in Path(r.log_path).read_text()
        starts_before = (tmp_path / "starts.txt").read_text().split()

        res = subprocess.run(
            [sys.executable, "-m", "tui_prof.cli", "run", "--resume", str(exp_dir), "--headless"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip().splitlines()[-1] == str(exp_dir.resolve())
        after = load_experiment(exp_dir)
        assert all(r.status == RUN_FINISHED for r in after.runs)
        new_starts = (tmp_path / "starts.txt").read_text().split()[len(starts_before) :]
        missing = [r.run_id for r in exp.runs if r.status != RUN_FINISHED]
        assert new_starts == missing  # only the missing runs ran again, in plan order
        for r in finished:  # the finished runs were not touched
            assert after.runs[[x.run_id for x in after.runs].index(r.run_id)] == before[r.run_id]
        redone = next(r for r in after.runs if r.run_id == interrupted[0].run_id)
        assert redone.attempt == 2
        assert (
            exp_dir / "attempts" / f"{redone.run_id}.1"
        ).is_dir()  # the first attempt's files kept
        conn = sqlite3.connect(exp_dir / DB_NAME)
        archived = conn.execute("SELECT run_id, attempt FROM run_attempts").fetchall()
        conn.close()
        assert archived == [(redone.run_id, 1)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pgid in pgids:
            _kill_group_quietly(pgid)


def test_resume_refuses_while_the_runner_lives_and_can_add_repeats(tmp_path: Path) -> None:
    from tui_prof.experiments.runner import Runner

    spec = load_spec(make_spec(tmp_path, sleep=0, repeats=1))
    runner = Runner.create(spec, tmp_path / "exp").start()
    assert runner.wait(30)
    store = ExperimentStore.open(tmp_path / "exp")
    store.mark_running(
        "a-r0", time.time(), None, None, None, {}
    )  # "running" under this live process
    store.close()
    with pytest.raises(StoreError, match="another tuiprof"):
        ExperimentStore.open(tmp_path / "exp")
    conn = sqlite3.connect(tmp_path / "exp" / DB_NAME)
    conn.execute("UPDATE runs SET status = 'finished'")
    conn.commit()
    conn.close()
    more = Runner.resume(tmp_path / "exp", repeats=2)
    assert more.pending == ["a-r1", "b-r1"]
    more.start()
    assert more.wait(30)
    exp = load_experiment(tmp_path / "exp")
    assert exp.repeats == 2 and [r.status for r in exp.runs] == [RUN_FINISHED] * 4


ESCAPING_JOB = r"""
import os, subprocess, sys, time
# The work runs in a grandchild that leaves the job's process group (its own session), as a
# daemonising launcher does: killing the group a run was started in does not reach it.
# The second run to start is the one its tuiprof is killed during: it works until stopped, so
# the resume's stop, not a race against a short sleep, is what ends it.
if len(sys.argv) > 2:
    rid = os.environ["TUIPROF_RUN_ID"]
    second = os.path.exists(sys.argv[1]) and open(sys.argv[1]).read().count("start") == 1
    with open(sys.argv[1], "a") as f:
        f.write(f"start {rid} {os.getpid()} {time.time():.4f}\n")
    time.sleep(120 if second else float(sys.argv[2]))
    with open(sys.argv[1], "a") as f:
        f.write(f"end {rid} {os.getpid()} {time.time():.4f}\n")
else:
    sys.exit(subprocess.run([sys.executable, __file__, sys.argv[1], "0.8"],
                            start_new_session=True).returncode)
"""


def test_sigkill_then_resume_at_once_runs_every_run_once_without_overlap(tmp_path: Path) -> None:
    """A real `tuiprof run` SIGKILLed mid-run, resumed at once: the copy left running (in a
    process group of its own) is found by its environment and stopped before its run starts
    again, so no two copies of a run ever live at once and every run finishes exactly once."""
    (tmp_path / "job.py").write_text(ESCAPING_JOB, encoding="utf-8")
    events = tmp_path / "events.txt"
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "k"\ncommand = ["{sys.executable}", "job.py", "{events}"]\nrepeats = 2\n'
        "[variants.a]\n[variants.b]\n",
        encoding="utf-8",
    )
    exp_dir = tmp_path / "exp"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "tui_prof.cli", "run"]
    proc = subprocess.Popen(
        [*run, str(spec), "--headless", "--output", str(exp_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:

        def second_running() -> bool:
            """The second run's work started and the store says it runs (a job can start a
            moment before its row is marked running: a kill then left it pending)."""
            if not (events.exists() and events.read_text().count("start") >= 2):
                return False
            try:
                return [r.status for r in load_experiment(exp_dir).runs].count(RUN_RUNNING) == 1
            except StoreError:
                return False

        deadline = time.monotonic() + 60
        while not second_running():
            assert time.monotonic() < deadline, "runs did not progress"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: the second run's work has just started
        proc.wait(10)
        left = load_experiment(exp_dir)
        alive = [r for r in left.runs if r.status == RUN_RUNNING]
        assert len(alive) == 1 and "its tuiprof has gone" in (alive[0].error or "")
        res = subprocess.run(
            [*run, "--resume", str(exp_dir), "--headless"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        assert f"stopped {alive[0].run_id}, still running after its tuiprof had gone" in res.stderr
        starts = [x.split() for x in events.read_text().splitlines() if x.startswith("start")]
        first_copy = int(starts[1][2])  # the second run started: the one left running
        assert not _running_with(first_copy, str(events)), "the copy left running was not stopped"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for line in events.read_text().splitlines() if events.exists() else []:
            _kill_quietly_if_ours(int(line.split()[2]), str(events))  # a copy the test left
    spans: dict[str, list[list[float]]] = {}
    for line in events.read_text().splitlines():
        what, rid, _pid, t = line.split()
        if what == "start":
            spans.setdefault(rid, []).append([float(t), float("inf")])
        else:
            spans[rid][-1][1] = float(t)
    ended = {rid: sum(end != float("inf") for _, end in s) for rid, s in spans.items()}
    assert ended == {"a-r0": 1, "b-r0": 1, "a-r1": 1, "b-r1": 1}  # each finished exactly once
    copies = spans[alive[0].run_id]
    assert len(copies) == 2 and copies[0][1] == float("inf")  # the first copy was stopped ...
    # ... and was gone before the second started: the stop waits until no process of it lives
    after = load_experiment(exp_dir)
    assert [r.status for r in after.runs] == [RUN_FINISHED] * 4
    redone = next(r for r in after.runs if r.run_id == alive[0].run_id)
    assert redone.attempt == 2
    conn = sqlite3.connect(exp_dir / DB_NAME)
    (first,) = conn.execute("SELECT record FROM run_attempts").fetchone()
    conn.close()
    assert "still running after its tuiprof had gone" in first


def test_stop_processes_waits_until_every_process_of_a_run_is_gone(tmp_path: Path) -> None:
    from tui_prof.experiments.orphans import (
        find_run_processes,
        proc_start,
        recorded_alive,
        stop_processes,
    )

    run_dir = tmp_path / "runs" / "a-r1"
    env = {**os.environ, "TUIPROF_RUN_DIR": str(run_dir)}
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", stubborn],
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            text=True,
        ),
        subprocess.Popen(  # another run's: a prefix of its directory name, left alone
            [sys.executable, "-c", "import time; time.sleep(60)"],
            env={**env, "TUIPROF_RUN_DIR": str(run_dir) + "0"},
            start_new_session=True,
            text=True,
        ),
    ]
    try:
        # It ignores SIGTERM once it says so (a fixed 0.3 s was too short for a Python to start
        # on a loaded machine: SIGTERM then ended it, not the SIGKILL after the grace).
        assert children[0].stdout is not None and children[0].stdout.readline() == "ready\n"
        found = find_run_processes([run_dir])
        assert found == {str(run_dir): [children[0].pid]}
        start = proc_start(children[0].pid)
        assert recorded_alive(children[0].pid, start)
        assert not recorded_alive(children[0].pid, "1")  # a recycled pid is not the run
        assert stop_processes(found[str(run_dir)], grace_s=0.2) == []
        assert children[0].wait(5) == -signal.SIGKILL  # SIGTERM ignored: SIGKILL after the grace
        assert not recorded_alive(children[0].pid, start)
        assert children[1].poll() is None
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
