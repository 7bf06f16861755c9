"""The writer of an experiment's results store: one per directory at a time (see store.py).

The schema lives here, with the columns added since its first version: a runner opening an older
experiment adds them, readers (store.py) use defaults. Each state change is one IMMEDIATE
transaction under the writer's lock.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_prof.experiments import samples as samples_mod
from tui_prof.experiments.orphans import (
    find_run_processes,
    proc_start,
    runner_alive,
    runner_identity,
    stop_processes,
)
from tui_prof.experiments.runner_lock import RunnerLock
from tui_prof.experiments.spec import ExperimentSpec
from tui_prof.experiments.store import (
    ATTEMPTS_DIR,
    DAMAGED_ROW,
    DB_NAME,
    IN_FLIGHT,
    RUNS_DIR,
    StoreError,
    check_is_experiment,
    experiment_record,
    read_meta,
    row_to_record,
)
from tui_prof.model import (
    RUN_FINISHED,
    RUN_INTERRUPTED,
    RUN_PENDING,
    RUN_QUEUED,
    RUN_RUNNING,
    ExperimentRecord,
    RunRecord,
)

SCHEMA_VERSION = 1
# Columns added since the first schema, with their declarations: an older experiment gets them
# when a runner opens it (readers use defaults).
_ADDED_COLUMNS = {
    "backend_ref": "TEXT",
    "node": "TEXT NOT NULL DEFAULT ''",
    "child_start": "TEXT",
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, variant TEXT NOT NULL,
    repeat INTEGER NOT NULL, is_warmup INTEGER NOT NULL, status TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1, started_at REAL, ended_at REAL, wall_time_s REAL,
    exit_code INTEGER, metrics TEXT NOT NULL DEFAULT '{}', environment TEXT NOT NULL DEFAULT '{}',
    error TEXT, log_tail TEXT NOT NULL DEFAULT '', profiler_port INTEGER,
    progress TEXT NOT NULL DEFAULT '', runner_pid INTEGER, runner_host TEXT, runner_start TEXT,
    child_pid INTEGER, child_pgid INTEGER, backend_ref TEXT, node TEXT NOT NULL DEFAULT '',
    child_start TEXT
);
CREATE TABLE IF NOT EXISTS run_attempts (
    run_id TEXT NOT NULL, attempt INTEGER NOT NULL, record TEXT NOT NULL, archived_at REAL NOT NULL,
    PRIMARY KEY (run_id, attempt)
);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL, metric TEXT NOT NULL, count INTEGER NOT NULL, kept BLOB NOT NULL,
    PRIMARY KEY (run_id, metric)
);
"""


@dataclass(frozen=True)
class PlannedRun:
    """A run the runner will start: which variant, which repeat, whether it is a warm-up."""

    variant: str
    repeat: int
    is_warmup: bool = False

    @property
    def run_id(self) -> str:
        return f"{self.variant}-{'w' if self.is_warmup else 'r'}{self.repeat}"


class ExperimentStore:
    """The writer: one per experiment directory at a time (the runner's); thread-safe."""

    def __init__(
        self,
        directory: Path,
        conn: sqlite3.Connection,
        spec: ExperimentSpec,
        runner_lock: RunnerLock | None = None,
    ) -> None:
        self.directory = directory
        self.spec = spec
        self._conn = conn
        self._lock = threading.Lock()
        self._runner_lock = runner_lock
        self.stopped_orphans: list[str] = []  # runs found alive without their tuiprof, stopped

    # -- opening -------------------------------------------------------------------------
    @staticmethod
    def _connect(db: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(str(db), timeout=30, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.executescript(_SCHEMA)
        have = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
        for column, declaration in _ADDED_COLUMNS.items():
            if column not in have:
                conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {declaration}")
        return conn

    @classmethod
    def create(
        cls, directory: str | Path, spec: ExperimentSpec, plan: Iterable[PlannedRun]
    ) -> ExperimentStore:
        """A new experiment directory with every planned run recorded as pending."""
        d = Path(directory).resolve()
        if any(c in str(d) for c in "\n\r\0"):  # the path is printed as the last line
            raise StoreError(f"{str(d)!r}: a path with a line break or NUL; choose another")
        if (d / DB_NAME).exists():
            raise StoreError(f"{d}: already holds an experiment (use --resume)")
        if d.is_dir() and any(d.iterdir()):  # never write over files tuiprof did not create
            raise StoreError(f"{d}: exists and is not empty; name a new or empty directory")
        try:
            (d / RUNS_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{d}: cannot create: {exc.strerror or exc}") from None
        lock = RunnerLock.acquire(d)
        if (d / DB_NAME).exists():  # created by another tuiprof between the check and the lock
            lock.release()
            raise StoreError(f"{d}: already holds an experiment (use --resume)")
        conn = cls._connect(d / DB_NAME)
        store = cls(d, conn, spec, lock)
        spec_d = spec.to_dict()  # variants stay in spec order: JSON objects keep insertion order
        with store._tx() as c:
            for key, value in {
                "schema_version": SCHEMA_VERSION,
                "spec": spec_d,
                "created_at": time.time(),
                "experiment_id": uuid.uuid4().hex[:12],
            }.items():
                c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
        store.add_runs(plan)
        return store

    @classmethod
    def open(cls, directory: str | Path, stop_orphans: bool = True) -> ExperimentStore:
        """An existing experiment, for resuming: stale "running" runs become interrupted, and
        what still runs of them is stopped first (`stopped_orphans` lists those runs)."""
        d = Path(directory).resolve()
        db = d / DB_NAME
        if not db.is_file():
            raise StoreError(f"{d}: not a tuiprof experiment (no {DB_NAME})")
        lock = RunnerLock.acquire(d)
        try:
            check_is_experiment(db)  # before any write: a foreign file stays as it is
            conn = cls._connect(db)
            spec = ExperimentSpec.from_dict(read_meta(conn)["spec"])
        except (sqlite3.Error, KeyError, ValueError) as exc:
            lock.release()
            raise StoreError(f"{db}: cannot open: {exc}") from None
        except StoreError:
            lock.release()
            raise
        store = cls(d, conn, spec, lock)
        rows = conn.execute(
            "SELECT * FROM runs WHERE status IN (?, ?) AND backend_ref IS NULL", IN_FLIGHT
        ).fetchall()  # a cluster's runs went on without tuiprof: the runner reattaches them
        for row in rows:
            if runner_alive(row["runner_pid"], row["runner_host"], row["runner_start"]):
                store.close()  # e.g. a runner on another host, where the flock is not shared
                raise StoreError(f"{d}: another tuiprof (pid {row['runner_pid']}) is running it")
        with store._tx() as c:  # a damaged row's result is lost: it is run again (see _json)
            c.execute(
                "UPDATE runs SET status = ?, error = ?, metrics = '{}', environment = '{}' "
                "WHERE status = ? AND NOT (json_valid(metrics) AND json_type(metrics) = 'object' "
                "AND json_valid(environment) AND json_type(environment) = 'object')",
                (RUN_INTERRUPTED, DAMAGED_ROW, RUN_FINISHED),
            )
        if stop_orphans:
            store._stop_orphans()
        for row in rows:
            if row["run_id"] not in store.stopped_orphans:
                store._update(
                    row["run_id"],
                    status=RUN_INTERRUPTED,
                    error="tuiprof stopped while this run was running",
                )
        return store

    def _stop_orphans(self) -> None:
        """Stop what still runs of an unfinished local run after its tuiprof went (SIGKILL, a
        dropped SSH session, "Leave running"), and record that, before anything starts it again:
        a second copy would overlap it and write into the same run directory. Its processes are
        found by their environment, so a job whose group leader exited, or one recorded a moment
        before it started, is found too. StoreError: one could not be stopped."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT run_id, child_pid, child_start FROM runs WHERE status != ? "
                "AND backend_ref IS NULL",
                (RUN_FINISHED,),
            ).fetchall()
        dirs = {f"{self.directory}{os.sep}{RUNS_DIR}{os.sep}{r['run_id']}": r for r in rows}
        found = find_run_processes(dirs)
        for run_dir, pids in found.items():
            row = dirs[run_dir]
            left = stop_processes(pids, self.spec.kill_grace_s)
            if left:
                self.close()
                raise StoreError(
                    f"{row['run_id']} still runs (pid {left[0]}) and could not be stopped; "
                    "not starting a second copy of it"
                )
            recorded = row["child_pid"] if row["child_pid"] in pids else pids[0]
            self.stopped_orphans.append(row["run_id"])
            self._update(
                row["run_id"],
                status=RUN_INTERRUPTED,
                error=f"still running after its tuiprof had gone (pid {recorded}): stopped, "
                "to be run again",
            )

    # -- writing -------------------------------------------------------------------------
    def _tx(self) -> _Transaction:
        return _Transaction(self._conn, self._lock)

    def _update(self, run_id: str, **fields: Any) -> None:
        with self._tx() as c:
            _set(c, run_id, fields)

    def add_runs(self, plan: Iterable[PlannedRun]) -> list[str]:
        """Record runs as pending (new ones only); returns the ids added."""
        added: list[str] = []
        rows: list[tuple[str, int, str, int, int, str]] = []
        with self._tx() as c:
            seq = c.execute("SELECT COALESCE(MAX(seq), -1) FROM runs").fetchone()[0]
            have = {r[0] for r in c.execute("SELECT run_id FROM runs")}
            for p in plan:
                if p.run_id in have:
                    continue
                have.add(p.run_id)
                seq += 1
                rows.append((p.run_id, seq, p.variant, p.repeat, int(p.is_warmup), RUN_PENDING))
                added.append(p.run_id)
            c.executemany(  # one statement for all: 10,000 planned runs cost milliseconds
                "INSERT INTO runs (run_id, seq, variant, repeat, is_warmup, status) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
        return added

    def set_spec(self, spec: ExperimentSpec) -> None:
        """Save a changed spec (e.g. more repeats on resume)."""
        self.spec = spec
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO meta VALUES ('spec', ?)", (json.dumps(spec.to_dict()),)
            )

    def prepare_rerun(self, run_id: str) -> None:
        """Archive an unfinished attempt's record and files so the run can start afresh."""
        rec = self.run(run_id)
        src = Path(rec.run_dir)
        if rec.status != RUN_PENDING or src.exists():
            if src.exists():
                dst = self.directory / ATTEMPTS_DIR / f"{run_id}.{rec.attempt}"
                dst.parent.mkdir(exist_ok=True)
                if dst.exists():
                    shutil.rmtree(dst)
                os.replace(src, dst)
            if rec.status != RUN_PENDING:
                with self._tx() as c:
                    c.execute(
                        "INSERT OR REPLACE INTO run_attempts VALUES (?, ?, ?, ?)",
                        (run_id, rec.attempt, json.dumps(rec.to_dict()), time.time()),
                    )
                    c.execute("DELETE FROM samples WHERE run_id = ?", (run_id,))
                    c.execute(
                        "UPDATE runs SET status = ?, attempt = attempt + 1, started_at = NULL, "
                        "ended_at = NULL, wall_time_s = NULL, exit_code = NULL, metrics = '{}', "
                        "environment = '{}', error = NULL, log_tail = '', profiler_port = NULL, "
                        "progress = '', child_pid = NULL, child_pgid = NULL, child_start = NULL, "
                        "backend_ref = NULL, "
                        "node = '' WHERE run_id = ?",
                        (RUN_PENDING, run_id),
                    )

    def mark_running(
        self,
        run_id: str,
        started_at: float,
        pid: int | None,
        pgid: int | None,
        profiler_port: int | None,
        environment: dict[str, Any],
        node: str = "",
    ) -> None:
        rpid, host, start = runner_identity()
        fields: dict[str, Any] = {
            "status": RUN_RUNNING,
            "started_at": started_at,
            "child_pid": pid,
            "child_pgid": pgid,
            "child_start": proc_start(pid) if pid else None,  # a recycled pid is not the run
            "profiler_port": profiler_port,
            "environment": environment,
            "runner_pid": rpid,
            "runner_host": host,
            "runner_start": start,
        }
        if node:
            fields["node"] = node
        self._update(run_id, **fields)

    def mark_queued(self, run_id: str, ref: str, submitted_at: float, node: str = "") -> None:
        """Submitted to a cluster as `ref` (recorded before the submission: a tuiprof killed in
        between finds the id and never submits the run twice); `node` where it is pinned."""
        rpid, host, start = runner_identity()
        self._update(
            run_id,
            status=RUN_QUEUED,
            backend_ref=ref,
            started_at=submitted_at,
            node=node,
            runner_pid=rpid,
            runner_host=host,
            runner_start=start,
        )

    def set_progress(self, run_id: str, progress: str) -> None:
        self._update(run_id, progress=progress)

    def finish(
        self, rec: RunRecord, samples: Mapping[str, samples_mod.Reservoir] | None = None
    ) -> None:
        """Commit a run's outcome, and the samples of its distributions, in one transaction."""
        fields = {
            "status": rec.status,
            "ended_at": rec.ended_at,
            "wall_time_s": rec.wall_time_s,
            "exit_code": rec.exit_code,
            "metrics": rec.metrics,
            "environment": rec.environment,
            "error": rec.error,
            "log_tail": rec.log_tail,
            "progress": rec.progress,
            "node": rec.node,
        }
        with self._tx() as c:
            _set(c, rec.run_id, fields)
            c.execute("DELETE FROM samples WHERE run_id = ?", (rec.run_id,))
            c.executemany(
                "INSERT INTO samples VALUES (?, ?, ?, ?)",
                [
                    (rec.run_id, name, res.count, samples_mod.to_blob(res.values))
                    for name, res in (samples or {}).items()
                ],
            )

    # -- reading -------------------------------------------------------------------------
    def runs(self) -> list[RunRecord]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM runs ORDER BY seq").fetchall()
        return [row_to_record(r, self.directory) for r in rows]

    def unfinished(self) -> list[str]:
        """Ids of the runs not finished yet: those a cluster still runs first, then in order
        (cheap: no records are built)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT run_id FROM runs WHERE status != ? "
                "ORDER BY NOT (status IN (?, ?) AND backend_ref IS NOT NULL), seq",
                (RUN_FINISHED, *IN_FLIGHT),
            ).fetchall()
        return [r[0] for r in rows]

    def in_flight(self) -> dict[str, str]:
        """Runs a cluster was running (or had queued) when the last runner let go: id -> ref."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT run_id, backend_ref FROM runs WHERE status IN (?, ?) "
                "AND backend_ref IS NOT NULL ORDER BY seq",
                IN_FLIGHT,
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    @property
    def experiment_id(self) -> str:
        """A short unique id of this experiment (cluster job ids start with it); made if missing."""
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM meta WHERE key = 'experiment_id'"
            ).fetchone()
        if row is not None:
            return str(json.loads(row[0]))
        value = uuid.uuid4().hex[:12]
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO meta VALUES ('experiment_id', ?)", (json.dumps(value),)
            )
        return self.experiment_id

    def run(self, run_id: str) -> RunRecord:
        with self._lock:
            row = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(run_id)
        return row_to_record(row, self.directory)

    def record(self) -> ExperimentRecord:
        with self._lock:
            meta = read_meta(self._conn)
        return experiment_record(self.directory, meta, self.runs())

    def close(self) -> None:
        """Fold the WAL back into the database, so the directory is one self-contained copy."""
        with self._lock:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._conn.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass  # a reader holds it; the WAL stays and is still consistent
            self._conn.close()
            if self._runner_lock is not None:
                self._runner_lock.release()


def _set(c: sqlite3.Connection, run_id: str, fields: dict[str, Any]) -> None:
    """UPDATE one run's columns (JSON for metrics and environment) inside a transaction."""
    values = {k: json.dumps(v) if k in ("metrics", "environment") else v for k, v in fields.items()}
    cols = ", ".join(f"{k} = ?" for k in values)
    c.execute(f"UPDATE runs SET {cols} WHERE run_id = ?", (*values.values(), run_id))


class _Transaction:
    """`with store._tx() as conn:` one IMMEDIATE transaction under the store's lock."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock) -> None:
        self._conn, self._lock = conn, lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._conn.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._lock.release()
