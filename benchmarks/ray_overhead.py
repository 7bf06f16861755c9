"""Ray backend overhead per run, and many tiny runs through a two-node cluster with none lost.

    python benchmarks/ray_overhead.py [--runs 20] [--many 200] [--workers 2] [--json]

Everything runs against a real Ray cluster on loopback (tests/ray_cluster.py: a head that runs
nothing, plus `--workers` worker nodes of `--cpus` CPUs each, each node with its own 127.0.0.x
address, temp dir and ports), started inside a network namespace
of its own: this script re-executes itself under `unshare -n` with loopback up, and what it
started is killed by process id when it is done (never `ray stop`). Without `unshare -n` or
Ray it says so in one line and exits 2.

1. Per-run overhead, one run at a time, the same tiny job (a fresh Python appending one metric
   line) `--runs` times in each series:
   - the job alone (Popen + wait), and tuiprof's Ray run wrapper alone (the module each Ray
     job's entrypoint runs on its node, run here without Ray: its own cost on a node);
   - local: tuiprof's Runner (in this process, `parallel = 1`) with the local backend;
   - bare Ray job: the job submitted directly with Ray's JobSubmissionClient (no runtime
     environment), timed from submission until Ray reports it terminal (polled every 20 ms),
     until then its whole log fetched (`get_job_logs`), until its last output arrived through
     `tail_job_logs` (how tuiprof reads a run: live), and until that stream closed: the floors
     a job per run costs on this cluster, whoever submits it;
   - tuiprof on Ray: the Runner with the Ray backend (after one unmeasured warm-up experiment
     that put tuiprof's py_modules on every node);
   - a warm actor: the alternative to a job per run, a long-lived actor on a worker node that
     runs the job as a subprocess and returns its exit, wall time, output and metrics as the
     call's result (a driver joined to the cluster, `ray.init`), timed per call; its start once.
   As in runner_overhead.py, the cost of a run is the time between consecutive runs'
   completions (the experiment's start counts as the first), so the runner's own work between
   runs is included; overhead = median(Ray) - median(local), and their ratio. A tuiprof Ray
   run is also cut into phases (medians): the `submit_job` call, submission -> the job's end by
   Ray's own clock (JobDetails start_time/end_time), that end -> recorded here, and the
   runner's pause before the next submission.
   Aim: under 1 s of overhead per run.
2. `--many` runs (two variants, `--many / 2` repeats) through the whole CLI, `tuiprof run SPEC
   --backend ray --ray-address ... --headless`, `--parallel` defaulting to the cluster's
   capacity (one run per worker CPU), against the same spec run locally at that parallelism.
   Checked, not assumed: every planned run is `finished` exactly once in experiment.sqlite with
   its metric and attempt 1, no attempt was archived (no retry), `tuiprof compare --json`
   lists them all, and Ray knows exactly one job per run (`tuiprof-<experiment>-<run>-a1`), each
   SUCCEEDED. Reported: wall time of the process, runs/s, and first start -> last end.

All nodes share this machine's cores, so the figures are an upper bound on what tuiprof plus
Ray cost per run, and say nothing about a real cluster's network. `--hide-module NAME` is for
finding where a Ray worker's start-up goes: `import NAME` fails in every process of the cluster
(an optional import that Ray's dependencies try, say).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # ray_cluster: the cluster the tests use

from _common import write_result  # noqa: E402  (benchmarks/: the machine, load, commit)

from tui_prof.experiments import events as ev  # noqa: E402
from tui_prof.experiments.backends import get_backend  # noqa: E402
from tui_prof.experiments.runner import Runner  # noqa: E402
from tui_prof.experiments.spec import load_spec  # noqa: E402
from tui_prof.experiments.store import load_experiment  # noqa: E402

# The tiny job: a fresh Python that appends one metric line (also without tuiprof's settings).
JOB_CODE = (
    "import json, os; p = os.environ.get('TUIPROF_METRICS_FILE'); "
    "p and open(p, 'a').write(json.dumps({'value': 1.0}) + '\\n')"
)
JOB = [sys.executable, "-c", JOB_CODE]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def p90(xs: list[float]) -> float | None:
    return sorted(xs)[int(0.9 * (len(xs) - 1))] if xs else None


def write_spec(
    work: Path, name: str, repeats: int, ray: str | None, variants: int = 1, gcs: str | None = None
) -> Path:
    """A spec of the tiny job; `ray`: on that cluster, `gcs`: in the actor mode there."""
    path = work / f"{name}.toml"
    text = f'name = "{name}"\ncommand = {json.dumps(JOB)}\nrepeats = {repeats}\n'
    text += 'metrics = ["value"]\n'
    for v in "ab"[: variants if variants > 1 else 0]:
        text += f'[variants.{v}]\nenv = {{ VARIANT = "{v}" }}\n'
    if ray:
        text += f'[backend]\nkind = "ray"\naddress = "{ray}"\n'
        if gcs:
            text += f'mode = "actors"\ngcs_address = "{gcs}"\n'
    path.write_text(text)
    return path


# ---------------------------------------------------------------- 1. one run at a time


class TimedBackend:
    """The real backend, with each `launch` (for Ray: the submit_job call) timed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.launches: dict[str, tuple[float, float]] = {}  # wall clock: Ray's clock is one too

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def launch(self, request: Any) -> Any:
        t0 = time.time()
        handle = self.inner.launch(request)
        self.launches[request.run_id] = (t0, time.time())
        return handle


def ray_jobs(address: str, prefix: str) -> dict[str, Any]:
    """Ray's record of the jobs whose submission id starts with prefix, by id."""
    from ray.job_submission import JobSubmissionClient

    jobs = JobSubmissionClient(f"http://{address}").list_jobs()
    return {j.submission_id: j for j in jobs if (j.submission_id or "").startswith(prefix)}


def via_runner(
    work: Path, name: str, runs: int, address: str | None, parallel: int, gcs: str | None = None
) -> dict[str, Any]:
    """Run a spec through tuiprof's Runner: completion gaps, per-run phases (medians)."""
    spec = load_spec(write_spec(work, name, runs, address, gcs=gcs))
    t0 = time.perf_counter()
    backend = TimedBackend(get_backend(spec.backend))  # connects, sends tuiprof's py_modules
    ends: list[float] = []
    finished: dict[str, float] = {}
    lock = threading.Lock()

    def on_event(e: object) -> None:
        now, wall = time.perf_counter(), time.time()
        with lock:
            if isinstance(e, ev.ExperimentStarted):
                ends.append(now)
            elif isinstance(e, (ev.RunFinished, ev.RunFailed)):
                ends.append(now)
                finished[e.run.run_id] = wall

    runner = Runner.create(spec, work / name, on_event=on_event, backend=backend, parallel=parallel)
    t_created = time.perf_counter()
    experiment_id = runner.store.experiment_id  # the store closes when the runner ends
    runner.start()
    runner.wait()
    exp = load_experiment(runner.experiment_dir)
    bad = [(r.run_id, r.status, r.error) for r in exp.runs if r.status != "finished"]
    if bad:
        raise RuntimeError(f"{name}: runs did not finish: {bad[:3]}")
    walls = {r.run_id: r.wall_time_s or 0.0 for r in exp.runs}
    jobs = ray_jobs(address, f"tuiprof-{experiment_id}-") if address and not gcs else {}
    phases: dict[str, list[float]] = {"submit": [], "job": [], "in_ray": [], "to_recorded": []}
    for rid, (a, b) in backend.launches.items():
        phases["submit"].append(b - a)
        phases["job"].append(walls[rid])
        job = jobs.get(f"tuiprof-{experiment_id}-{rid}-a1")
        if job is not None and job.end_time and job.start_time:
            phases["in_ray"].append((job.end_time - job.start_time) / 1e3)
            phases["to_recorded"].append(finished[rid] - job.end_time / 1e3)
    order = sorted(backend.launches, key=lambda r: backend.launches[r][0])
    between = [backend.launches[c][0] - finished[p] for p, c in itertools.pairwise(order)]
    return {
        "experiment_id": experiment_id,
        "create_s": t_created - t0,  # includes connecting to the cluster, uploading py_modules
        "gaps": [b - a for a, b in itertools.pairwise(ends)],
        "phases": {k: med(v) for k, v in phases.items()},
        "between_runs": med(between),
        "walls": list(walls.values()),
    }


def direct(runs: int) -> list[float]:
    """The job alone: Popen + wait."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(JOB, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


def wrapper_alone(runs: int) -> list[float]:
    """tuiprof's node-side run wrapper (what each Ray job's entrypoint is), run here, no Ray:
    its start, the node's fingerprint, the job, packing and sending the run dir as records."""
    from tui_prof.experiments.backends.ray.client import ENTRY_MODULE
    from tui_prof.experiments.backends.ray.node import PAYLOAD_VAR

    payload = {"token": "bench", "argv": JOB, "cwd": None, "env": {}, "timeout_s": None}
    payload.update(kill_grace_s=5.0, profiler_port=True, storage=None)
    env = {**_env(), PAYLOAD_VAR: json.dumps(payload)}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", ENTRY_MODULE],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        times.append(time.perf_counter() - t0)
        if p.returncode != 0 or b"bench end" not in p.stdout:
            raise RuntimeError(f"the run wrapper failed ({p.returncode}): {p.stderr[-800:]!r}")
    return times


def bare_ray(address: str, runs: int) -> dict[str, Any]:
    """The same job submitted directly, one at a time, timed from submission until Ray reports
    it terminal, until its whole output is here (the last chunk of its log stream) and until
    the log stream closes."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(f"http://{address}")
    poller = JobSubmissionClient(f"http://{address}")
    entry = shlex.join(JOB)
    out: dict[str, list[float]] = {
        "terminal": [],
        "terminal_then_log": [],
        "output_here": [],
        "log_closed": [],
    }
    in_ray: list[float] = []
    for i in range(runs):
        t0 = time.perf_counter()
        sid = client.submit_job(
            entrypoint=entry, entrypoint_num_cpus=1, submission_id=f"bare-{os.getpid()}-{i}"
        )
        terminal: list[float] = []

        def poll(sid: str = sid, terminal: list[float] = terminal) -> None:
            while not poller.get_job_status(sid).is_terminal():
                time.sleep(0.02)
            terminal.append(time.perf_counter())
            poller.get_job_logs(sid)
            terminal.append(time.perf_counter())

        async def drain(sid: str = sid) -> float:
            last = time.perf_counter()
            async for chunk in client.tail_job_logs(sid):
                if chunk:
                    last = time.perf_counter()
            return last

        th = threading.Thread(target=poll)
        th.start()
        last_chunk = asyncio.run(drain())
        out["log_closed"].append(time.perf_counter() - t0)
        out["output_here"].append(last_chunk - t0)
        th.join()
        out["terminal"].append(terminal[0] - t0)
        out["terminal_then_log"].append(terminal[1] - t0)
        info = client.get_job_info(sid)
        if str(info.status) != "SUCCEEDED":
            raise RuntimeError(f"bare Ray job ended {info.status}: {client.get_job_logs(sid)}")
        in_ray.append((info.end_time - info.start_time) / 1e3)
    return {**{k: med(v) for k, v in out.items()}, "in_ray": med(in_ray)}


def warm_actor(gcs: str, runs: int) -> dict[str, Any]:
    """The alternative to a job per run: a long-lived actor on a worker node (as Ray Tune keeps
    its trial actors) that runs the same job as a subprocess and returns its exit, wall time,
    output and metrics as the call's result, one call per run, from a driver joined to the
    cluster. Timed from the call until its result is here; the actor's start once, apart."""
    import ray

    ray.init(address=gcs, logging_level="WARNING", log_to_driver=False)
    try:

        @ray.remote(num_cpus=1)
        class Runner:
            def run(self, argv: list[str]) -> dict[str, Any]:
                import os
                import subprocess
                import tempfile
                import time

                with tempfile.TemporaryDirectory() as d:
                    metrics = os.path.join(d, "metrics.jsonl")
                    env = {**os.environ, "TUIPROF_METRICS_FILE": metrics}
                    t0 = time.perf_counter()
                    p = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL)
                    wall = time.perf_counter() - t0
                    with open(metrics) as f:
                        lines = f.read()
                return {"exit": p.returncode, "wall": wall, "out": p.stdout, "metrics": lines}

        t0 = time.perf_counter()
        actor = Runner.remote()  # type: ignore[attr-defined]
        ray.get(actor.__ray_ready__.remote())
        start = time.perf_counter() - t0
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            res = ray.get(actor.run.remote(JOB))
            times.append(time.perf_counter() - t0)
            if res["exit"] != 0 or '"value"' not in res["metrics"]:
                raise RuntimeError(f"the warm actor's run failed: {res}")
        ray.kill(actor)
        return {"per_run": med(times), "p90": p90(times), "actor_start": start}
    finally:
        ray.shutdown()


# ---------------------------------------------------------------- 2. many runs


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env.pop("RAY_ADDRESS", None)
    return env


def cli(work: Path, *args: str, timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env=_env(),
        timeout=timeout,
    )
    return p, time.perf_counter() - t0


def many_runs(work: Path, address: str, many: int, parallel: int) -> dict[str, Any]:
    from ray.job_submission import JobSubmissionClient

    repeats = max(1, many // 2)
    spec = write_spec(work, "many", repeats, None, variants=2)
    planned = 2 * repeats
    timeout = 600 + 20 * planned
    out: dict[str, Any] = {"runs": planned}
    for label, extra in (
        ("local", ("--parallel", str(parallel))),
        ("ray", ("--backend", "ray", "--ray-address", address)),
    ):
        d = work / f"many-{label}"
        log(f"{planned} runs, {label} ...")
        p, wall = cli(
            work, "run", str(spec), *extra, "--headless", "--output", str(d), timeout=timeout
        )
        if p.returncode != 0:
            raise RuntimeError(f"tuiprof run ({label}) exited {p.returncode}: {p.stderr[-2000:]}")
        out[label] = {"wall_s": wall, "runs_per_s": planned / wall, **check_store(d, planned)}
        cmp, _ = cli(work, "compare", str(d), "--json", timeout=300)
        doc = json.loads(cmp.stdout)
        out[label]["compare_runs_finished"] = sum(r["status"] == "finished" for r in doc["runs"])
        log(f"  {wall:.1f} s, {planned / wall:.2f} runs/s")
    prefix = f"tuiprof-{out['ray']['experiment_id']}-"
    jobs = [
        j
        for j in JobSubmissionClient(f"http://{address}").list_jobs()
        if (j.submission_id or "").startswith(prefix)
    ]
    per_run: dict[str, int] = {}
    for j in jobs:
        run_id = j.submission_id[len(prefix) :].rsplit("-a", 1)[0]
        per_run[run_id] = per_run.get(run_id, 0) + 1
    out["ray"]["ray_jobs"] = len(jobs)
    out["ray"]["ray_jobs_succeeded"] = sum(str(j.status) == "SUCCEEDED" for j in jobs)
    out["ray"]["runs_with_one_job"] = sum(n == 1 for n in per_run.values())
    out["ray"]["runs_with_several_jobs"] = sorted(r for r, n in per_run.items() if n > 1)
    out["ray"]["ray_job_median_s"] = med(
        [(j.end_time - j.start_time) / 1e3 for j in jobs if j.end_time and j.start_time]
    )
    r = out["ray"]
    r["none_lost"] = (
        r["finished_once"] == planned
        and r["with_metric"] == planned
        and r["archived_attempts"] == 0
        and r["compare_runs_finished"] == planned
        and r["ray_jobs"] == planned
        and r["runs_with_one_job"] == planned
        and r["ray_jobs_succeeded"] == planned
    )
    return out


def check_store(directory: Path, planned: int) -> dict[str, Any]:
    """What experiment.sqlite says, read directly (read-only)."""
    con = sqlite3.connect(f"file:{directory}/experiment.sqlite?mode=ro", uri=True, timeout=10)
    try:
        rows = con.execute("SELECT run_id, status, attempt, metrics, node FROM runs").fetchall()
        archived = con.execute("SELECT COUNT(*) FROM run_attempts").fetchone()[0]
        times = con.execute(
            "SELECT MIN(started_at), MAX(ended_at) FROM runs WHERE status = 'finished'"
        ).fetchone()
        (expid,) = con.execute("SELECT value FROM meta WHERE key = 'experiment_id'").fetchone()
    finally:
        con.close()
    ids = [r[0] for r in rows]
    finished = [r for r in rows if r[1] == "finished" and r[2] == 1]
    nodes: dict[str, int] = {}
    for r in rows:
        nodes[r[4] or "(this machine)"] = nodes.get(r[4] or "(this machine)", 0) + 1
    return {
        "experiment_id": json.loads(expid),
        "rows": len(rows),
        "distinct_run_ids": len(set(ids)),
        "finished_once": len(finished) if len(set(ids)) == len(ids) == planned else -1,
        "with_metric": sum(json.loads(r[3]).get("value") == 1.0 for r in finished),
        "archived_attempts": archived,
        "first_start_to_last_end_s": (times[1] - times[0]) if times[0] else None,
        "runs_per_node": nodes,
    }


# ---------------------------------------------------------------- inside the namespace


def inside(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from ray_cluster import ADDRESS, GCS_PORT, Cluster

    out: dict[str, Any] = {"loadavg_start": os.getloadavg()}
    if args.hide_module:
        shim = work / "hidden-modules"
        shim.mkdir()
        for name in args.hide_module:
            (shim / f"{name}.py").write_text(
                f"raise ImportError('{name} hidden by ray_overhead')\n"
            )
        sys.path.insert(0, str(shim))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(shim), *filter(None, [os.environ.get("PYTHONPATH")])]
        )  # the nodes, their workers and jobs, and the CLI inherit it
    cluster = Cluster(hide_slow_imports=False)  # as installed here (--hide-module hides)
    try:
        t0 = time.perf_counter()
        cluster.start_head()
        cluster.wait_for(["head"])
        names = [f"w{i + 1}" for i in range(args.workers)]
        for name in names:
            cluster.add_worker(name, cpus=args.cpus)
            cluster.wait_for([name])  # one at a time: several at once time out on 2 cores
        out["cluster_start_s"] = time.perf_counter() - t0
        log(f"cluster up in {out['cluster_start_s']:.0f} s: head + {names}")

        capacity = args.workers * args.cpus
        log("warm-up on the cluster (tuiprof's py_modules onto every node) ...")
        via_runner(work, "warmup", 2 * capacity, ADDRESS, capacity)

        if args.runs:
            n = args.runs
            log(f"{n} runs one at a time: the job alone, tuiprof's run wrapper alone ...")
            job, wrapper = direct(n), wrapper_alone(n)
            log(f"{n} runs one at a time, local backend ...")
            local = via_runner(work, "local", n, None, 1)
            log(f"{n} bare Ray jobs one at a time ...")
            bare = bare_ray(ADDRESS, n)
            log(f"{n} runs one at a time, tuiprof on Ray ...")
            ray = via_runner(work, "ray", n, ADDRESS, 1)
            log(f"{n} runs one at a time through a warm actor on a worker node ...")
            actor = warm_actor(f"127.0.0.1:{GCS_PORT}", n)
            log(f"{n} runs one at a time, tuiprof on Ray in the actor mode (warm agents) ...")
            gcs = f"127.0.0.1:{GCS_PORT}"
            via_runner(work, "actors-warmup", capacity, ADDRESS, capacity, gcs=gcs)
            actors = via_runner(work, "actors", n, ADDRESS, 1, gcs=gcs)
            m_local, m_ray = statistics.median(local["gaps"]), statistics.median(ray["gaps"])
            m_act = statistics.median(actors["gaps"])
            out["per_run"] = {
                "runs": n,
                "job_alone_s": statistics.median(job),
                "wrapper_alone_s": statistics.median(wrapper),
                "local_s": m_local,
                "local_p90_s": p90(local["gaps"]),
                "ray_s": m_ray,
                "ray_p90_s": p90(ray["gaps"]),
                "ray_min_s": min(ray["gaps"]),
                "ray_max_s": max(ray["gaps"]),
                "overhead_s": m_ray - m_local,
                "ratio": m_ray / m_local,
                "within_aim": m_ray - m_local < 1.0,
                "bare_ray_s": bare,
                "warm_actor_s": actor,
                "actors_s": m_act,
                "actors_p90_s": p90(actors["gaps"]),
                "actors_overhead_s": m_act - m_local,
                "actors_ratio": m_act / m_local,
                "actors_within_aim": m_act - m_local < 1.0,
                "actors_runner_create_s": actors["create_s"],
                "tuiprof_beyond_bare_ray_s": m_ray - bare["output_here"],
                "ray_phases_s": ray["phases"],
                "ray_between_runs_s": ray["between_runs"],
                "local_phases_s": local["phases"],
                "ray_runner_create_s": ray["create_s"],
            }
        if args.many:
            out["many"] = many_runs(work, ADDRESS, args.many, capacity)
            out["many"]["parallel"] = capacity
    finally:
        cluster.stop()
    out["loadavg_end"] = os.getloadavg()
    return out


def report(res: dict[str, Any]) -> None:
    hidden = f"; hidden: {', '.join(res['hidden'])}" if res["hidden"] else ""
    print(
        f"cluster: head (no CPUs) + {res['workers']} workers x {res['cpus']} CPU, all on this "
        f"machine ({os.cpu_count()} cores); up in {res['cluster_start_s']:.0f} s; load "
        f"{res['loadavg_start'][0]:.1f} -> {res['loadavg_end'][0]:.1f}{hidden}"
    )
    if "per_run" in res:
        r, b = res["per_run"], res["per_run"]["bare_ray_s"]
        ph = r["ray_phases_s"]
        print(f"\n1. one run at a time, {r['runs']} runs per series, medians (s per run)")
        rows = [
            ("the job alone (Popen + wait)", r["job_alone_s"], ""),
            ("tuiprof's Ray run wrapper alone, no Ray", r["wrapper_alone_s"], ""),
            ("tuiprof, local backend", r["local_s"], f"p90 {r['local_p90_s']:.2f}"),
            (
                "bare Ray job: until terminal status",
                b["terminal"],
                f"Ray's clock {b['in_ray']:.2f}",
            ),
            ("bare Ray job: until terminal, then its log", b["terminal_then_log"], ""),
            ("bare Ray job: until its output is here", b["output_here"], "(tail_job_logs)"),
            ("bare Ray job: until its log stream closed", b["log_closed"], ""),
            (
                "tuiprof, Ray backend",
                r["ray_s"],
                f"p90 {r['ray_p90_s']:.2f}, {r['ray_min_s']:.2f}-{r['ray_max_s']:.2f}",
            ),
            (
                "a warm actor per node, one call per run",
                r["warm_actor_s"]["per_run"],
                f"p90 {r['warm_actor_s']['p90']:.2f}; its start once "
                f"{r['warm_actor_s']['actor_start']:.2f}",
            ),
            ("tuiprof, Ray backend, mode = actors", r["actors_s"], f"p90 {r['actors_p90_s']:.2f}"),
        ]
        for label, value, note in rows:
            print(f"   {label:<42} {value:6.2f}  {note}")
        print(
            f"   overhead Ray - local: {r['overhead_s']:.2f} s/run, ratio {r['ratio']:.0f}x: "
            f"{'ok' if r['within_aim'] else 'MISSED'} (aim < 1 s); tuiprof beyond a bare Ray job "
            f"(until its output is here): {r['tuiprof_beyond_bare_ray_s']:+.2f} s"
        )
        print(
            f"   overhead actors - local: {r['actors_overhead_s']:.2f} s/run, ratio "
            f"{r['actors_ratio']:.1f}x: {'ok' if r['actors_within_aim'] else 'MISSED'} (aim < 1 s); "
            f"once per experiment: joining the cluster {r['actors_runner_create_s']:.2f} s"
        )
        print(
            f"   a tuiprof Ray run: submit_job {ph['submit']:.2f}, submitted -> ended by Ray's "
            f"clock {ph['in_ray']:.2f} (the job itself {ph['job']:.2f}), ended -> recorded here "
            f"{ph['to_recorded']:.2f}, runner between runs {r['ray_between_runs_s']:.3f}; once per "
            f"experiment: connecting and sending tuiprof {r['ray_runner_create_s']:.2f}"
        )
    if "many" in res:
        m = res["many"]
        print(f"\n2. {m['runs']} runs, --parallel {m['parallel']} (the cluster's capacity), CLI")
        for label in ("local", "ray"):
            x = m[label]
            print(
                f"   {label:<6} wall {x['wall_s']:7.1f} s  {x['runs_per_s']:5.2f} runs/s  "
                f"first start -> last end {x['first_start_to_last_end_s']:.1f} s  "
                f"finished once {x['finished_once']}/{m['runs']}  nodes {x['runs_per_node']}"
            )
        r = m["ray"]
        print(
            f"   Ray jobs: {r['ray_jobs']} ({r['ray_jobs_succeeded']} SUCCEEDED), runs with exactly "
            f"one job: {r['runs_with_one_job']}; with a metric: {r['with_metric']}; archived "
            f"attempts {r['archived_attempts']}; compare lists {r['compare_runs_finished']} "
            f"finished; none lost: {r['none_lost']}"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="runs per series in part 1 (0: skip)")
    p.add_argument("--many", type=int, default=200, help="runs in part 2 (0: skip)")
    p.add_argument("--workers", type=int, default=2, help="worker nodes (the head runs nothing)")
    p.add_argument("--cpus", type=int, default=1, help="CPUs per worker node (runs at once)")
    p.add_argument(
        "--hide-module",
        action="append",
        default=[],
        metavar="NAME",
        help="diagnosis: make `import NAME` fail (ImportError) in every process of the cluster, "
        "to see what an optional import costs each Ray worker (repeatable)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--inside", metavar="WORKDIR", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inside:
        try:
            print(json.dumps(inside(args, Path(args.inside))))
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            raise
        return 0

    try:
        import ray.job_submission  # noqa: F401
    except ImportError:
        print("ray_overhead: Ray is not installed (pip install 'tuiprof[ray]')", file=sys.stderr)
        return 2
    from netns import unshare_prefix
    from ray_cluster import in_namespace

    prefix = unshare_prefix()
    if prefix is None:
        print("ray_overhead: `unshare -n` is not permitted here; Ray must not bind this machine's "
              "interfaces", file=sys.stderr)  # fmt: skip
        return 2
    work = Path(tempfile.mkdtemp(prefix="tuiprof-raybench-"))
    argv = [sys.executable, __file__, "--inside", str(work), "--runs", str(args.runs)]
    argv += ["--many", str(args.many), "--workers", str(args.workers), "--cpus", str(args.cpus)]
    argv += [f"--hide-module={name}" for name in args.hide_module]
    try:
        proc = in_namespace(prefix, argv, env=_env(), cwd=REPO)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stderr.write(proc.stderr)
    lines = proc.stdout.strip().splitlines()
    res = json.loads(lines[-1]) if lines else {"error": f"no output (exit {proc.returncode})"}
    if "error" in res or proc.returncode != 0:
        print(f"ray_overhead: failed: {res.get('error')}", file=sys.stderr)
        return 1
    res.update(workers=args.workers, cpus=args.cpus, hidden=args.hide_module)
    write_result("ray_overhead", res)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        report(res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
