"""The Ray backend against a real Ray cluster: a head and three workers on 127.0.0.1, two with
the A100's resource and one with the V100's, started by this test inside a network namespace of
its own (Ray binds every interface and probes outside addresses: here nothing leaves loopback).

One cluster serves every scenario: this file re-runs itself in the namespace as a script
(`python tests/test_ray.py SCENARIOS WORKDIR`), which starts the cluster, drives `tuiprof run`
and `tuiprof compare` as a user would, kills what it started and prints one JSON document; the
tests read it. They skip, saying why, only where Ray or `unshare -n` is not available.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

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


# ---------------------------------------------------------------- inside the namespace


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


def _spec(work: Path, name: str, extra: str = "", repeats: int = 2, sleep: str = "0") -> Path:
    path = work / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\ncommand = ["{sys.executable}", "{JOB}"]\nrepeats = {repeats}\n'
        f'metrics = ["accuracy", "latency_ms"]\n'
        f'[variants.a]\nargs = ["--x", "1"]\nenv = {{ JOB_SLEEP = "{sleep}" }}\n'
        f'[variants.b]\nargs = ["--x", "2"]\nenv = {{ JOB_SLEEP = "{sleep}" }}\n{extra}'
    )
    return path


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


def _wait_db(directory: Path, sql: str, timeout: float = 120) -> list[tuple[Any, ...]]:
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
        (j.submission_id, str(j.status)) for j in jobs if (j.submission_id or "").startswith(prefix)
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
        spec = _spec(work, "killed", sleep="3")
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
        time.sleep(4)  # the cluster goes on meanwhile: something finishes without tuiprof
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
        # A100 node (retries = 1), and everything else finishes. Its job sleeps long enough that
        # its first lines are here (through the log stream, seconds late under load) before it ends.
        spec = _spec(work, "lost", "[backend]\nretries = 1\n", sleep="15")
        exp = work / "lost"
        p = subprocess.Popen(
            [sys.executable, "-m", "tui_prof.cli", "run", str(spec), *ray, "--accelerator-type", "A100", "--output", str(exp)],
            cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        (victim,) = _wait_db(
            exp, "SELECT run_id FROM runs WHERE status = 'running' AND node LIKE 'w2/%'"
        )[0]
        log = exp / "runs" / victim / "output.log"
        deadline = time.monotonic() + 60  # its first lines are out (they come through Ray's log)
        while f"start {victim} " not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, f"{victim} printed nothing in 60 s"
            time.sleep(0.2)
        cluster.kill_node("w2")
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

    cluster = Cluster(gcs_port=6392, dashboard_port=8276, port_base=52600)
    try:
        cluster.start_head(cpus=2)
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
    finally:
        cluster.stop()


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip(
        "ray.job_submission", reason="Ray is not installed (pip install 'tuiprof[ray]')"
    )
    from netns import unshare_prefix

    prefix = unshare_prefix()
    if prefix is None:
        pytest.skip(
            "unshare -n is not permitted here; a Ray cluster must not bind the machine's interfaces"
        )
    work = tmp_path_factory.mktemp("ray")
    script = f"ip link set lo up && exec {sys.executable} {__file__} scenarios {work}"
    proc = subprocess.run(
        [*prefix, "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" not in out, out["error"] + json.dumps(out, indent=1)[-6000:]
    return out


def test_no_cluster_is_one_line_before_anything_starts(cluster_run: dict[str, Any]) -> None:
    r = cluster_run["no_cluster"]
    assert r["rc"] == 2 and not r["made"] and r["stdout"] == ""
    assert r["stderr"].count("\n") == 1, r["stderr"]
    assert r["stderr"].startswith("tuiprof run: no Ray cluster at http://127.0.0.1:8275")


def test_a_gpu_model_no_node_has_is_refused_naming_what_is_missing(
    cluster_run: dict[str, Any],
) -> None:
    r = cluster_run["unschedulable"]
    assert r["rc"] == 2 and not r["made"] and r["stderr"].count("\n") == 1, r["stderr"]
    assert "no node has GPU model H100 (models here: A100, V100)" in r["stderr"]


def test_the_cluster_records_what_a_local_run_records(cluster_run: dict[str, Any]) -> None:
    local, ray = cluster_run["local_record"], cluster_run["ray_record"]
    assert cluster_run["local"]["rc"] == 0 and cluster_run["ray"]["rc"] == 0, cluster_run["ray"][
        "stderr"
    ]
    assert (
        cluster_run["ray"]["stdout"].strip().splitlines()[-1].endswith("/ray")
    )  # the script contract
    assert set(local) == set(ray) == {"a-r0", "b-r0", "a-r1", "b-r1"}
    for run_id, want in local.items():
        got = ray[run_id]
        for key in (
            "status",
            "metrics",
            "progress",
            "log",
            "files",
            "samples",
            "dataset",
            "attempt",
        ):
            assert got[key] == want[key], (run_id, key)
        assert got["status"] == "finished" and got["files"]  # the profile came back
        assert 0 < got["wall_time_s"] < 30 and 0 < want["wall_time_s"] < 30
        assert got["gpu_model"] == "A100" and want["gpu_model"] is None
    assert "run dir exists: True; metrics file exists: True" in ray["a-r0"]["log"]


def test_accelerator_type_keeps_every_run_on_that_model(cluster_run: dict[str, Any]) -> None:
    nodes = {r["node"].split("/")[0] for r in cluster_run["ray_record"].values()}
    assert nodes <= {"w1", "w2"} and "w3" not in nodes


def test_each_repeat_runs_on_one_node_and_the_comparison_pairs_within_it(
    cluster_run: dict[str, Any],
) -> None:
    rec = cluster_run["ray_record"]
    assert rec["a-r0"]["node"] == rec["b-r0"]["node"] and rec["a-r1"]["node"] == rec["b-r1"]["node"]
    assert rec["a-r0"]["node"] != rec["a-r1"]["node"]  # two nodes: the repeats spread
    doc = cluster_run["ray_compare"]
    for metric in doc["metrics"].values():
        assert [c["design"] for c in metric["comparisons"]] == ["blocked"]
    assert doc["comparability"]["ok"], doc["comparability"]
    runs = {(r["variant"], r["repeat"]): r for r in doc["runs"]}
    assert runs[("a", 0)]["node"] == rec["a-r0"]["node"] and runs[("a", 0)]["status"] == "finished"
    assert set(doc["runs"][0]) >= {"variant", "repeat", "status", "node", "wall_time_s"}
    local = cluster_run["local_compare"]
    assert [c["design"] for c in local["metrics"]["wall_time_s"]["comparisons"]] == ["paired"]


def test_a_run_on_another_gpu_model_is_flagged(cluster_run: dict[str, Any]) -> None:
    doc = cluster_run["mixed"]["compare"]
    assert cluster_run["mixed"]["rc"] == 0
    by_model: dict[str, list[str]] = {}
    for r in doc["runs"]:
        by_model.setdefault(r["gpu_model"], []).append(f"{r['variant']}-r{r['repeat']}")
    assert set(by_model) == {"A100", "V100"} and len(by_model["V100"]) == 2
    assert (
        by_model["V100"][0][-1] == by_model["V100"][1][-1]
    )  # one block: both variants of a repeat
    assert not doc["comparability"]["ok"]
    (gpu,) = [d for d in doc["comparability"]["differences"] if d["field"] == "gpu_model"]
    assert not gpu["intentional"] and "V100" in gpu["message"]


def test_a_run_that_cannot_be_placed_fails_with_what_is_missing(
    cluster_run: dict[str, Any],
) -> None:
    r = cluster_run["pending"]
    (run,) = r["record"].values()
    assert r["rc"] == 1 and run["status"] == "failed"
    assert (
        "not placed on node w" in run["error"] and "after 4 s (pending_timeout_s)" in run["error"]
    )


def test_a_killed_tuiprof_reattaches_and_collects_every_run_once(
    cluster_run: dict[str, Any],
) -> None:
    k = cluster_run["killed"]
    assert k["at_kill"], "nothing was on the cluster when tuiprof was killed"
    assert any(status == "SUCCEEDED" for _, status in k["while_gone"])  # it went on alone
    assert k["resume"]["rc"] == 0, k["resume"]["stderr"]
    assert sorted(sid.rsplit("-", 3)[-3] + "-" + sid.rsplit("-", 2)[-2] for sid, _ in k["jobs"]) == [
        "a-r0", "a-r1", "b-r0", "b-r1"
    ]  # fmt: skip  # one Ray job per run: none was submitted twice
    for run_id, run in k["record"].items():
        assert run["status"] == "finished" and run["attempt"] == 1, (run_id, run)
        assert run["log"].count(f"start {run_id} ") == 1 and run["log"].endswith("end\n")
        assert run["metrics"]["accuracy"] > 0 and run["files"]


def test_a_lost_node_fails_that_attempt_and_the_retry_finishes_elsewhere(
    cluster_run: dict[str, Any],
) -> None:
    lost = cluster_run["lost"]
    victim = lost["victim"]
    assert lost["rc"] == 0, lost["stderr"][-3000:]
    (attempt,) = [a for a in lost["attempts"] if a["run_id"] == victim]
    assert attempt["status"] == "failed" and attempt["error"].startswith("node lost: w2/")
    assert attempt["error"].endswith("retrying on another node")
    assert f"start {victim} " in lost["attempt_log"]  # what it printed before the loss is kept
    for run_id, run in lost["record"].items():
        assert run["status"] == "finished", (run_id, run)
        assert not run["node"].startswith("w2/") or run_id != victim
    assert lost["record"][victim]["attempt"] == 2 and lost["record"][victim]["node"].startswith(
        "w1/"
    )


def test_results_arrive_from_every_node_and_unreadable_ones_are_retried_not_failed(
    cluster_run: dict[str, Any],
) -> None:
    m = cluster_run["machines"]
    assert m["rc"] == 0, m["stderr"][-3000:]
    assert m["ips"] == {"head": "127.0.0.1", "wok": "127.0.0.2", "wclash": "127.0.0.3"}
    rec = m["record"]
    assert set(rec) == {f"{v}-r{i}" for v in "ab" for i in range(3)}
    for run_id, run in rec.items():
        assert run["status"] == "finished" and run["metrics"]["accuracy"] > 0, (run_id, run)
        assert run["log"].count(f"start {run_id} ") == 1 and run["files"], run_id
        assert not run["node"].startswith("wclash/"), run_id
    first = {r["node"].split("/")[0] for r in rec.values() if r["attempt"] == 1}
    assert first == {"head", "wok"}  # the head runs jobs too; a worker's results arrive
    lost = {a["run_id"] for a in m["attempts"]}
    assert lost and all(rec[run_id]["attempt"] == 2 for run_id in lost)
    for a in m["attempts"]:  # one block went to wclash: both its runs, then never again
        assert a["status"] == "failed" and a["node"].startswith("wclash/"), a
        assert a["error"].startswith("results lost on wclash/"), a["error"]
        assert "the Ray job succeeded" in a["error"] and "state API" in a["error"], a["error"]
        assert a["error"].endswith("; retrying on another node"), a["error"]
    assert len(lost) == 2 and len({r[-1] for r in lost}) == 1


if __name__ == "__main__":  # inside the namespace: python tests/test_ray.py scenarios WORKDIR
    sys.path.insert(0, str(HERE))
    print(json.dumps(scenarios(Path(sys.argv[2]))))
