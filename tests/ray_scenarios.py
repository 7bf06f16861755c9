"""The Ray backend's scenarios, run inside a network namespace of their own against real Ray
clusters (tests/ray_cluster.py): `python tests/ray_scenarios.py WORKDIR` starts each cluster,
drives `tuiprof run` and `tuiprof compare` as a user would, kills what it started and prints one
JSON document, which tests/integration/test_ray.py reads. A scenario that raises
is recorded under "error" with its traceback.

Waits are on states (a row in the store, a line in a log, a job's status), never on a time that a
loaded machine may not keep; jobs that must still be running at some point wait for a gate file
(ray_job.py's JOB_GATE) that the scenario opens when it is ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
JOB = HERE / "ray_job.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env.pop("RAY_ADDRESS", None)
    return env


def _cli(*args: str, cwd: Path, timeout: float = 300) -> dict[str, Any]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        timeout=timeout,
    )
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr, "s": time.monotonic() - t0}


def _spec(
    work: Path,
    name: str,
    extra: str = "",
    repeats: int = 2,
    sleep: str = "0",
    gate: str = "",
    tally: str = "",
) -> Path:
    """A spec of two variants of ray_job.py; `gate`: its runs wait until that file exists;
    `tally`: each run's start leaves a line in that directory."""
    path = work / f"{name}.toml"
    env = f'{{ JOB_SLEEP = "{sleep}", JOB_GATE = "{gate}", JOB_TALLY = "{tally}" }}'
    path.write_text(
        f'name = "{name}"\ncommand = ["{sys.executable}", "{JOB}"]\nrepeats = {repeats}\n'
        f'metrics = ["accuracy", "latency_ms"]\n'
        f'[variants.a]\nargs = ["--x", "1"]\nenv = {env}\n'
        f'[variants.b]\nargs = ["--x", "2"]\nenv = {env}\n{extra}'
    )
    return path


def _wait(what: str, ok: Callable[[], object], timeout: float = 300) -> None:
    """Until ok() holds; a state, never a time, decides (the timeout only stops a real fault)."""
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not in {timeout:.0f} s")
        time.sleep(0.2)


def _record(directory: Path) -> dict[str, Any]:
    """Everything tuiprof stored about each run, and the files of its run dir."""
    from tui_prof.experiments.store import load_experiment, load_samples

    exp = load_experiment(directory)
    samples = load_samples(directory)
    out: dict[str, Any] = {}
    for r in exp.runs:
        run_dir = Path(r.run_dir)
        files = {
            str(p.relative_to(run_dir)): p.read_bytes().hex()[:64] + f"…{p.stat().st_size}"
            for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != "output.log"
        }
        out[r.run_id] = {
            "status": r.status,
            "attempt": r.attempt,
            "node": r.node,
            "error": r.error,
            "wall_time_s": r.wall_time_s,
            "metrics": {k: v for k, v in r.metrics.items() if k != "wall_time_s"},
            "progress": r.progress,
            "log": Path(r.log_path).read_text() if Path(r.log_path).exists() else None,
            "files": files,
            "samples": {k: v[1] for k, v in samples.get(r.run_id, {}).items()},
            "gpu_model": r.environment.get("gpu_model"),
            "dataset": r.environment.get("dataset_fingerprint"),
            "host": r.environment.get("host"),
        }
    return out


def _db(directory: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{directory}/experiment.sqlite?mode=ro", uri=True, timeout=10)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _wait_db(directory: Path, sql: str, timeout: float = 300) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (directory / "experiment.sqlite").exists():
            try:
                rows = _db(directory, sql)
            except sqlite3.Error:
                rows = []
            if rows:
                return rows
        time.sleep(0.2)
    raise RuntimeError(f"{sql!r} found nothing in {timeout:.0f} s")


def _jobs(prefix: str) -> list[tuple[str, str]]:
    from ray.job_submission import JobSubmissionClient
    from ray_cluster import ADDRESS

    jobs = JobSubmissionClient(f"http://{ADDRESS}").list_jobs()
    return sorted(
        (j.submission_id, str(j.status))
        for j in jobs
        if j.submission_id is not None and j.submission_id.startswith(prefix)
    )


def scenarios(work: Path) -> dict[str, Any]:
    """Every scenario in one cluster; a scenario that raises is recorded and the rest go on."""
    import traceback

    out: dict[str, Any] = {}
    try:
        _scenarios(work, out)
    except Exception:
        out["error"] = traceback.format_exc()
    return out


def _scenarios(work: Path, out: dict[str, Any]) -> None:
    from ray_cluster import ADDRESS, Cluster

    ray = ("--backend", "ray", "--ray-address", ADDRESS, "--headless")
    # No cluster yet: one line, nothing made.
    r = _cli("run", str(_spec(work, "none")), *ray, "--output", str(work / "none"), cwd=work)
    out["no_cluster"] = {**r, "made": (work / "none").exists()}
    cluster = Cluster()
    t0 = time.monotonic()
    try:
        cluster.start_head()
        cluster.wait_for(["head"])
        ids = {}
        for name, model in (("w1", "A100"), ("w2", "A100"), ("w3", "V100")):
            cluster.add_worker(name, model)
            ids.update(cluster.wait_for([name]))  # one at a time: two at once time out here
        out["cluster"] = {"start_s": time.monotonic() - t0, "ids": ids}

        r = _cli(
            "run",
            str(_spec(work, "h100")),
            *ray,
            "--accelerator-type",
            "H100",
            "--output",
            str(work / "h100"),
            cwd=work,
        )
        out["unschedulable"] = {**r, "made": (work / "h100").exists()}

        # The same jobs locally and on the cluster's A100 nodes.
        spec = _spec(work, "same")
        out["local"] = _cli(
            "run", str(spec), "--headless", "--output", str(work / "local"), cwd=work
        )
        out["ray"] = _cli(
            "run",
            str(spec),
            *ray,
            "--accelerator-type",
            "A100",
            "--output",
            str(work / "ray"),
            cwd=work,
        )
        out["local_record"], out["ray_record"] = _record(work / "local"), _record(work / "ray")
        out["ray_compare"] = json.loads(
            _cli("compare", str(work / "ray"), "--json", cwd=work)["stdout"]
        )
        out["local_compare"] = json.loads(
            _cli("compare", str(work / "local"), "--json", cwd=work)["stdout"]
        )

        # No accelerator_type: blocks land on the V100 node too, and the guard says so.
        r = _cli(
            "run",
            str(_spec(work, "mixed", repeats=3)),
            *ray,
            "--output",
            str(work / "mixed"),
            cwd=work,
        )
        out["mixed"] = {
            **r,
            "compare": json.loads(
                _cli("compare", str(work / "mixed"), "--json", cwd=work)["stdout"]
            ),
        }

        # Every A100 slot held by someone else's job: the run is not placed, and says why.
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(f"http://{ADDRESS}")
        blockers = [
            client.submit_job(
                entrypoint="sleep 120",
                entrypoint_num_cpus=1,
                entrypoint_resources={"accelerator_type:A100": 0.001},
            )
            for _ in range(2)
        ]
        for b in blockers:
            while str(client.get_job_status(b)) != "RUNNING":
                time.sleep(0.2)
        extra = "[backend]\npending_timeout_s = 4\n"
        spec = _spec(work, "pending", extra, repeats=1)
        r = _cli(
            "run",
            str(spec),
            *ray,
            "--accelerator-type",
            "A100",
            "--variants",
            "a",
            "--output",
            str(work / "pending"),
            cwd=work,
        )
        out["pending"] = {**r, "record": _record(work / "pending")}
        for b in blockers:
            client.stop_job(b)
        for b in blockers:
            while not client.get_job_status(b).is_terminal():
                time.sleep(0.2)

        # tuiprof killed with SIGKILL mid-experiment, then reopened: each run collected once.
        # Its runs wait for a gate file, opened once tuiprof is gone: whatever the load, none
        # has ended when it is killed, and some end without it.
        gate = work / "killed.go"
        spec = _spec(work, "killed", gate=str(gate))
        exp = work / "killed"
        p = subprocess.Popen(
            [sys.executable, "-m", "tui_prof.cli", "run", str(spec), *ray, "--accelerator-type", "A100", "--output", str(exp)],
            cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_db(exp, "SELECT run_id FROM runs WHERE status = 'running'")
        p.send_signal(signal.SIGKILL)
        p.communicate()
        (expid,) = _db(exp, "SELECT value FROM meta WHERE key = 'experiment_id'")[0]
        prefix = f"tuiprof-{json.loads(expid)}-"
        at_kill = _jobs(prefix)
        gate.touch()  # the cluster goes on meanwhile: something finishes without tuiprof
        _wait(
            "a job ended without tuiprof", lambda: any(s == "SUCCEEDED" for _, s in _jobs(prefix))
        )
        after = _jobs(prefix)
        resumed = _cli("run", "--resume", str(exp), "--headless", cwd=work)
        out["killed"] = {
            "at_kill": at_kill,
            "while_gone": after,
            "resume": resumed,
            "jobs": _jobs(prefix),
            "record": _record(exp),
        }

        # A worker node dies mid-run: that attempt fails with "node lost", is retried on the other
        # A100 node (retries = 1), and everything else finishes. Every run waits for a gate file,
        # opened once the node is gone: the victim is still running when its node dies, however
        # late its first lines come through the log stream on a loaded machine.
        gate = work / "lost.go"
        spec = _spec(work, "lost", "[backend]\nretries = 1\n", gate=str(gate))
        exp = work / "lost"
        p = subprocess.Popen(
            [sys.executable, "-m", "tui_prof.cli", "run", str(spec), *ray, "--accelerator-type", "A100", "--output", str(exp)],
            cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        (victim,) = _wait_db(
            exp, "SELECT run_id FROM runs WHERE status = 'running' AND node LIKE 'w2/%'"
        )[0]
        log = exp / "runs" / victim / "output.log"
        _wait(  # its first lines are out (they come through Ray's log stream)
            f"{victim}'s first line",
            lambda: f"start {victim} " in (log.read_text() if log.exists() else ""),
        )
        cluster.kill_node("w2")
        gate.touch()
        stdout, stderr = p.communicate(timeout=300)
        attempts = [json.loads(row[0]) for row in _db(exp, "SELECT record FROM run_attempts")]
        out["lost"] = {
            "victim": victim,
            "rc": p.returncode,
            "stdout": stdout,
            "stderr": stderr,
            "record": _record(exp),
            "attempts": [
                {k: a[k] for k in ("run_id", "status", "error", "node", "attempt")}
                for a in attempts
            ],
            "attempt_log": (exp / "attempts" / f"{victim}.1" / "output.log").read_text()
            if (exp / "attempts" / f"{victim}.1" / "output.log").exists()
            else None,
        }
    finally:
        cluster.stop()
    _machines(work, out)


def _machines(work: Path, out: dict[str, Any]) -> None:
    """A second cluster as `ray start` makes it on real machines by default: the head runs jobs
    too, and one worker's dashboard agent cannot serve its logs (its HTTP port is the head's, as
    for two default `ray start`s on one machine)."""
    from ray_cluster import Cluster

    cluster = Cluster(gcs_port=6392, dashboard_port=8276, port_base=24600)
    try:
        # The head runs jobs, with one CPU: a block (both variants of a repeat) placed there has a
        # run waiting, so the next blocks go to the workers, "wok" included, whatever the timing
        # (with two, a fast first block freed the head and a later block went there, not to wok).
        cluster.start_head(cpus=1)
        cluster.wait_for(["head"])
        cluster.add_worker("wok", cpus=2)
        cluster.wait_for(["wok"])
        cluster.add_worker("wclash", cpus=2, agent_port=cluster.agent_ports["head"])
        ids = cluster.wait_for(["wclash"])
        exp = work / "machines"
        r = _cli(
            "run",
            str(_spec(work, "machines", repeats=3)),
            "--backend", "ray", "--ray-address", cluster.address, "--headless",
            "--output", str(exp),
            cwd=work,
        )  # fmt: skip
        attempts = [json.loads(row[0]) for row in _db(exp, "SELECT record FROM run_attempts")]
        out["machines"] = {
            **r,
            "ips": cluster.ips,
            "clash_id": ids["wclash"],
            "record": _record(exp),
            "attempts": [
                {k: a[k] for k in ("run_id", "status", "error", "node", "attempt", "wall_time_s")}
                for a in attempts
            ],
        }
        _actors(work, cluster, out)
    finally:
        cluster.stop()


def _actors(work: Path, cluster: Any, out: dict[str, Any]) -> None:
    """The actor mode on the same cluster: results arrive from every node, the one whose
    dashboard agent serves no logs too (an agent hands a run's log back as call results); a
    tuiprof killed mid-run, then resumed, collects each run once, and each run started once."""
    extra = f'[backend]\nmode = "actors"\ngcs_address = "127.0.0.1:{cluster.gcs_port}"\n'
    ray = ("--backend", "ray", "--ray-address", cluster.address, "--headless")
    exp = work / "actors"
    r = _cli(
        "run", str(_spec(work, "actors", extra, repeats=3)), *ray, "--output", str(exp), cwd=work
    )
    archived = _db(exp, "SELECT record FROM run_attempts")
    out["actors"] = {**r, "record": _record(exp), "attempts": len(archived)}

    gate, tally = work / "actors-killed.go", work / "actors-tally"
    tally.mkdir()
    spec = _spec(work, "actors-killed", extra, gate=str(gate), tally=str(tally))
    exp = work / "actors-killed"
    p = subprocess.Popen(
        [sys.executable, "-m", "tui_prof.cli", "run", str(spec), *ray, "--output", str(exp)],
        cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_db(exp, "SELECT run_id FROM runs WHERE status = 'running'")
    p.send_signal(signal.SIGKILL)
    p.communicate()
    running = [row[0] for row in _db(exp, "SELECT run_id FROM runs WHERE status = 'running'")]
    gate.touch()  # they go on without tuiprof
    resumed = _cli("run", "--resume", str(exp), "--headless", cwd=work)
    out["actors_killed"] = {
        "running_at_kill": running,
        "resume": resumed,
        "record": _record(exp),
        "starts": {f.name: f.read_text().count("started") for f in tally.iterdir()},
    }

    # Ctrl+C stops the runs on their nodes: no process of theirs is left there.
    gate = work / "actors-stop.go"  # never opened: only a stop ends them
    spec = _spec(work, "actors-stop", extra, gate=str(gate))
    exp = work / "actors-stop"
    p = subprocess.Popen(
        [sys.executable, "-m", "tui_prof.cli", "run", str(spec), *ray, "--output", str(exp)],
        cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_db(exp, "SELECT run_id FROM runs WHERE status = 'running'")
    _wait("a job process", lambda: _gated(gate))
    p.send_signal(signal.SIGINT)
    try:
        _, stderr = p.communicate(timeout=300)
        hung = False
    except subprocess.TimeoutExpired:
        # Seen once in CI: tuiprof still waiting 300 s after Ctrl+C. Record it (the test says
        # so) instead of failing every Ray test; stop what this scenario started, by pid.
        p.kill()
        _, stderr = p.communicate()
        for pid in _gated(gate):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        hung = True
    _wait("the stopped jobs' processes gone", lambda: not _gated(gate), timeout=60)
    out["actors_stopped"] = {
        "rc": p.returncode,
        "stderr": stderr,
        "record": _record(exp),
        "hung": hung,
    }

    # A node dies mid-run: its agent's runs end "node lost" and run again elsewhere (retries).
    gate = work / "actors-lost.go"
    spec = _spec(work, "actors-lost", extra + "retries = 1\n", repeats=3, gate=str(gate))
    exp = work / "actors-lost"
    p = subprocess.Popen(
        [sys.executable, "-m", "tui_prof.cli", "run", str(spec), *ray, "--output", str(exp)],
        cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    (victim,) = _wait_db(
        exp, "SELECT run_id FROM runs WHERE status = 'running' AND node LIKE 'wclash/%'"
    )[0]
    log = exp / "runs" / victim / "output.log"
    _wait(
        f"{victim}'s first line",
        lambda: f"start {victim} " in (log.read_text() if log.exists() else ""),
    )
    cluster.kill_node("wclash")
    gate.touch()
    _, stderr = p.communicate(timeout=300)
    attempts = [json.loads(row[0]) for row in _db(exp, "SELECT record FROM run_attempts")]
    out["actors_lost"] = {
        "victim": victim,
        "rc": p.returncode,
        "stderr": stderr,
        "record": _record(exp),
        "attempts": [{k: a[k] for k in ("run_id", "status", "error", "node")} for a in attempts],
    }


def _gated(gate: Path) -> list[int]:
    """The processes whose environment names this gate file (a scenario's jobs), from /proc."""
    needle = f"JOB_GATE={gate}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


if __name__ == "__main__":  # inside the namespace: python tests/ray_scenarios.py WORKDIR
    # A run started in the background by a non-interactive shell (`cmd &`, as CI may be) has
    # SIGINT ignored, and the tuiprof processes started here would inherit that: Ctrl+C sent to
    # them would do nothing (Python installs no KeyboardInterrupt handler where SIGINT is ignored
    # at start). A handler, unlike "ignored", is reset to the default in a child: they get Ctrl+C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, str(HERE))
    print(json.dumps(scenarios(Path(sys.argv[1]))))
