"""A finished run's result survives a store that does not answer: another process holding
`experiment.sqlite` locked, or a full disk.

Contract: `finish(store, rec, samples)` first keeps the result beside the run's files
(`runs/<id>/result.json`), then commits it to the store, retrying with backoff while the store is
locked (each attempt already waits the connection's busy timeout); once committed the file goes.
Where the store still does not answer, `StoreUnavailable` says so in one line and the file
stays: `recover(store)` (on `--resume`, or opening the experiment again) records every kept
result, so a run whose job finished is never run again nor lost. A full disk (`disk_full`) is
not retried: waiting frees no space; the runner stops the experiment instead.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_prof.experiments import samples as samples_mod
from tui_prof.model import RUN_FINISHED, RunRecord

if TYPE_CHECKING:
    from tui_prof.experiments.writer import ExperimentStore

RESULT_FILE = "result.json"
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0)  # between attempts: with 30 s busy waits, ~3 min
_FIELDS = (
    "status",
    "ended_at",
    "wall_time_s",
    "exit_code",
    "metrics",
    "environment",
    "error",
    "log_tail",
    "progress",
    "node",
)


class StoreUnavailable(Exception):
    """The store did not take a finished run's result; the message is one line."""

    def __init__(self, message: str, *, full: bool = False) -> None:
        super().__init__(message)
        self.full = full  # the disk is full (else the store stayed locked)


def disk_full(exc: BaseException) -> bool:
    if isinstance(exc, StoreUnavailable):
        return exc.full
    if isinstance(exc, sqlite3.OperationalError):
        return "full" in str(exc)  # SQLite's "database or disk is full"
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class _Kept:
    """Samples as the store writes them (count and values), read back from a kept result."""

    def __init__(self, count: int, values: list[float]) -> None:
        self.count, self.values = count, values


def keep(rec: RunRecord, samples: Mapping[str, Any] | None) -> Path | None:
    """Write the result beside the run's files (atomically); None where even that fails."""
    path = Path(rec.run_dir) / RESULT_FILE
    doc = {
        "run_id": rec.run_id,
        **{f: getattr(rec, f) for f in _FIELDS},
        "samples": {n: [r.count, list(r.values)] for n, r in (samples or {}).items()},
    }
    tmp = path.with_name(RESULT_FILE + ".tmp")
    try:
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    except (OSError, ValueError):
        tmp.unlink(missing_ok=True)
        return None
    return path


def finish(
    store: ExperimentStore,
    rec: RunRecord,
    samples: Mapping[str, samples_mod.Reservoir] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    delays: tuple[float, ...] | None = None,
) -> None:
    """Commit the run's outcome, kept on disk until the store has it (see the module)."""
    kept = keep(rec, samples) if rec.status == RUN_FINISHED else None
    error: sqlite3.OperationalError | None = None
    for delay in (0.0, *(RETRY_DELAYS_S if delays is None else delays)):
        if delay:
            sleep(delay)
        try:
            store.finish(rec, samples)
        except sqlite3.OperationalError as exc:
            error = exc
            if disk_full(exc):
                break
            continue
        if kept is not None:
            kept.unlink(missing_ok=True)
        return
    where = f"; its result is kept in {kept}, recorded on --resume" if kept else ""
    full = error is not None and disk_full(error)
    raise StoreUnavailable(f"the store did not answer ({error}){where}", full=full)


def recover(store: ExperimentStore) -> list[str]:
    """Record the results kept on disk of runs the store has not finished; their ids."""
    done = []
    for run in store.runs():
        path = Path(run.run_dir) / RESULT_FILE
        if run.status == RUN_FINISHED or not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text())
            fields = {f: doc[f] for f in _FIELDS}
            kept = {n: _Kept(int(c), [float(x) for x in v]) for n, (c, v) in doc["samples"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged file: the run is run again
        store.finish(dataclasses.replace(run, **fields), kept)  # type: ignore[arg-type]
        path.unlink(missing_ok=True)
        done.append(run.run_id)
    return done
