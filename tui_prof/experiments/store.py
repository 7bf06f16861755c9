"""The results store: one SQLite database (WAL) per experiment directory, plus per-run files.

Contract: the experiment directory is the user's lab notebook and is self-contained and movable:
    experiment.sqlite          meta (spec, runner pid), runs (one row per planned run),
                               run_attempts (earlier attempts of re-run runs, as JSON),
                               samples (each distribution's kept values per run: samples.py)
    runner.lock                flock'ed by the one runner writing it; says its pid, host, start
    runs/<run_id>/             the run's own TensorBoard logdir ($TUIPROF_RUN_DIR)
        output.log             the job's stdout and stderr
        metrics.jsonl          everything the job reported ($TUIPROF_METRICS_FILE), the whole series
    attempts/<run_id>.<n>/     an earlier, interrupted or failed attempt's files
Each state change of a run is one transaction (synchronous=FULL), so killing tuiprof, even with
SIGKILL, loses no finished run. A run left "running" by a runner that is no longer alive reads
as interrupted; `load_experiment` is read-only and safe while a runner writes.

This module is the layout and the read-only side (`load_experiment`, `find_experiments`, kept
samples); `writer.py` holds the one writer (`ExperimentStore`, its schema and transactions) and
`runner_lock.py` the lock that makes it the only one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.request
from pathlib import Path
from typing import Any

from tui_prof.experiments import samples as samples_mod
from tui_prof.experiments.orphans import recorded_alive, runner_alive
from tui_prof.experiments.spec import ExperimentSpec
from tui_prof.model import (
    RUN_INTERRUPTED,
    RUN_QUEUED,
    RUN_RUNNING,
    ExperimentRecord,
    RunRecord,
    RunStatus,
)

DB_NAME = "experiment.sqlite"
LOCK_NAME = "runner.lock"
FIND_MAX_DEPTH = 6  # how deep find_experiments looks below the opened directory
RUNS_DIR = "runs"
ATTEMPTS_DIR = "attempts"
LOG_NAME = "output.log"
METRICS_NAME = "metrics.jsonl"
IN_FLIGHT = (RUN_QUEUED, RUN_RUNNING)
ORPHAN_NOTE = "still running, but its tuiprof has gone: reopening the experiment stops it"


class StoreError(Exception):
    """An experiment directory that cannot be read or written; one line meant for the user."""


DAMAGED_ROW = "its stored result is damaged (not JSON); --resume runs it again"


def _json(text: str) -> dict[str, Any] | None:
    """A row's JSON map; None where it is damaged (not JSON, or not an object)."""
    if text == "{}":  # most rows: a pending run's empty maps
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def row_to_record(row: sqlite3.Row, directory: Path) -> RunRecord:
    """One runs row as a RunRecord, read as it stands now (a dead runner's run: interrupted)."""
    # Strings, not Path joins: an experiment of 10,000 runs is read whole when it starts.
    run_dir = f"{directory}{os.sep}{RUNS_DIR}{os.sep}{row['run_id']}"
    keys = row.keys()
    status = RunStatus(row["status"])  # an unknown string is a damaged store (StoreError)
    error = row["error"]
    ref = row["backend_ref"] if "backend_ref" in keys else None
    # A cluster's run goes on without its runner (it is reattached); a local one does not, but
    # its process may live on (the next runner stops it): say so rather than "interrupted".
    if (
        status in IN_FLIGHT
        and ref is None
        and not runner_alive(row["runner_pid"], row["runner_host"], row["runner_start"])
    ):
        if recorded_alive(row["child_pid"], row["child_start"] if "child_start" in keys else None):
            error = error or ORPHAN_NOTE
        else:
            status, error = RUN_INTERRUPTED, error or "tuiprof stopped while this run was running"
    metrics, environment = _json(row["metrics"]), _json(row["environment"])
    if metrics is None or environment is None:  # a damaged row: its result is lost, run it again
        status, error = RUN_INTERRUPTED, DAMAGED_ROW
    return RunRecord(
        run_id=row["run_id"],
        variant=row["variant"],
        repeat=row["repeat"],
        status=status,
        is_warmup=bool(row["is_warmup"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        wall_time_s=row["wall_time_s"],
        exit_code=row["exit_code"],
        metrics=metrics or {},
        environment=environment or {},
        run_dir=run_dir,
        log_path=f"{run_dir}{os.sep}{LOG_NAME}",
        error=error,
        profiler_port=row["profiler_port"],
        progress=row["progress"],
        attempt=row["attempt"],
        log_tail=row["log_tail"],
        metrics_path=f"{run_dir}{os.sep}{METRICS_NAME}",
        node=(row["node"] or "") if "node" in keys else "",
        backend_ref=ref,
    )


def read_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    """The meta table (spec, ids), each value decoded from its JSON."""
    return {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def experiment_record(
    directory: Path, meta: dict[str, Any], runs: list[RunRecord]
) -> ExperimentRecord:
    spec = meta["spec"]
    return ExperimentRecord(
        name=spec["name"],
        directory=str(directory),
        baseline=spec["baseline"],
        variants=tuple(spec["variants"]),
        metrics=tuple(spec["metrics"]),
        repeats=int(spec["repeats"]),
        runs=tuple(runs),
    )


def _open_ro(db: Path) -> sqlite3.Connection:
    uri = "file:" + urllib.request.pathname2url(str(db))
    try:
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=10)
        conn.execute("SELECT 1 FROM meta LIMIT 1")
    except sqlite3.OperationalError:  # e.g. a read-only copy without its -shm file
        conn = sqlite3.connect(uri + "?immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def check_is_experiment(db: Path) -> None:
    """Refuse, without writing to it, a file that is not a tuiprof experiment's database."""
    try:
        size = db.stat().st_size
    except OSError as exc:
        raise StoreError(f"{db}: cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise StoreError(f"{db}: empty file (0 bytes), not a tuiprof experiment; left as it is")
    uri = "file:" + urllib.request.pathname2url(str(db)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=10)
        try:
            found = conn.execute("SELECT 1 FROM meta WHERE key = 'spec'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"{db}: not a tuiprof experiment ({exc}); left as it is") from None
    if found is None:
        raise StoreError(f"{db}: not a tuiprof experiment (no spec); left as it is")


def load_experiment(experiment_dir: str | Path) -> ExperimentRecord:
    """Read an experiment without writing to it; runs whose runner died read as interrupted."""
    directory = Path(experiment_dir)
    db = directory / DB_NAME
    if not db.is_file():
        raise StoreError(f"{directory}: not a tuiprof experiment (no {DB_NAME})")
    try:
        conn = _open_ro(db)
        try:
            meta = read_meta(conn)
            rows = conn.execute("SELECT * FROM runs ORDER BY seq").fetchall()
        finally:
            conn.close()
        runs = [row_to_record(r, directory) for r in rows]
    except (sqlite3.Error, ValueError, KeyError) as exc:
        raise StoreError(f"{db}: cannot read: {exc}") from None
    if "spec" not in meta:
        raise StoreError(f"{db}: not a tuiprof experiment (no spec)")
    return experiment_record(directory, meta, runs)


def find_experiments(root: Path, max_depth: int = FIND_MAX_DEPTH) -> list[Path]:
    """Experiment directories (those holding the results store) under root, shallow first."""
    found: list[Path] = []
    base = root if root.is_dir() else root.parent
    base_depth = str(base).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(base, onerror=lambda _e: None):
        if DB_NAME in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []  # runs inside an experiment are not experiments
            continue
        if dirpath.count(os.sep) - base_depth >= max_depth:
            dirnames[:] = []
        dirnames[:] = [d for d in dirnames if d not in ("plugins", ".git", "__pycache__")]
    return sorted(found)


def load_spec_from(experiment_dir: str | Path) -> ExperimentSpec:
    """The spec an experiment was created with (what `--resume` runs again)."""
    conn = _open_ro(Path(experiment_dir) / DB_NAME)
    try:
        return ExperimentSpec.from_dict(read_meta(conn)["spec"])
    finally:
        conn.close()


def load_samples(experiment_dir: str | Path) -> dict[str, dict[str, tuple[int, list[float]]]]:
    """Every kept sample: run id -> metric -> (values reported, kept values). Read-only; an
    experiment made before samples were kept has none."""
    try:
        conn = _open_ro(Path(experiment_dir) / DB_NAME)
    except sqlite3.Error:
        return {}
    try:
        rows = conn.execute("SELECT run_id, metric, count, kept FROM samples").fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    out: dict[str, dict[str, tuple[int, list[float]]]] = {}
    for r in rows:
        out.setdefault(r["run_id"], {})[r["metric"]] = (
            int(r["count"]),
            samples_mod.from_blob(r["kept"]),
        )
    return out


def sample_counts(experiment_dir: str | Path) -> dict[str, Any]:
    """Per distribution: how samples were kept and, per run, how many were reported and kept."""
    out: dict[str, Any] = {}
    for run_id, metrics in sorted(load_samples(experiment_dir).items()):
        for metric, (count, kept) in metrics.items():
            entry = out.setdefault(
                metric, {"kept": samples_mod.POLICY, "cap_per_run": samples_mod.CAP, "runs": {}}
            )
            entry["runs"][run_id] = {"count": count, "kept": len(kept)}
    return out
