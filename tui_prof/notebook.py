"""A Python API for notebooks: profiles and experiments as pandas DataFrames.

    import tui_prof
    sessions = tui_prof.load("logs/")          # every session under the path
    s = sessions[0]
    s.steps                                    # one row per step: step_time_ms and each category
    s.ops.head(10)                             # framework ops by self time
    s.kernels                                  # GPU kernels by time
    tui_prof.load_experiment("tuiprof-experiments/…").runs   # one row per run, metrics as columns

The numbers are those of `tuiprof summary` (the same readers and cache); `summary` holds the whole
ProfileSummary. pandas is an optional extra (`pip install 'tuiprof[pandas]'`), imported here only,
never on the browse path. Sessions that cannot be read are in `errors`, never raised one by one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_prof.experiments.store import load_experiment as _load_record
from tui_prof.model import ExperimentRecord, KernelStat, OpStat, ProfileError, ProfileSummary
from tui_prof.profiles.discover import Problem, discover
from tui_prof.profiles.load import load_summary

if TYPE_CHECKING:
    import pandas as pd

PANDAS_MISSING = "pandas is an optional extra for the notebook API: pip install 'tuiprof[pandas]'"


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    return pandas


@dataclass(frozen=True)
class SessionFrames:
    """One profile session: its summary, and its steps, ops and kernels as DataFrames."""

    summary: ProfileSummary

    @property
    def path(self) -> str:
        return self.summary.path

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step (index `step`): `step_time_ms` and each category's ms."""
        rows = [
            {"step": s.step, "step_time_ms": s.step_time_ms, **s.breakdown_ms}
            for s in self.summary.steps
        ]
        return (
            _pandas()
            .DataFrame(rows, columns=_columns(rows, ["step", "step_time_ms"]))
            .set_index("step")
        )

    @property
    def ops(self) -> pd.DataFrame:
        """Framework ops by self time: name, op_type, where (Host/Device), occurrences, µs, %."""
        return _frame([o.to_dict() for o in self.summary.top_ops], OpStat)

    @property
    def kernels(self) -> pd.DataFrame:
        """GPU kernels by total time, with Tensor Core eligibility and use and launch shape."""
        return _frame([k.to_dict() for k in self.summary.kernels], KernelStat)

    def to_dict(self) -> dict[str, Any]:
        """The session as `tuiprof summary --json` writes it."""
        return self.summary.to_dict()


@dataclass(frozen=True)
class Sessions(Sequence[SessionFrames]):
    """The sessions found under a path (most recent listing order), and those that failed."""

    sessions: tuple[SessionFrames, ...]
    errors: tuple[tuple[str, str], ...] = field(default=())  # (path, one-line reason)

    def __getitem__(self, i: Any) -> Any:
        return self.sessions[i]

    def __len__(self) -> int:
        return len(self.sessions)

    def __iter__(self) -> Iterator[SessionFrames]:
        return iter(self.sessions)

    @property
    def averages(self) -> pd.DataFrame:
        """One row per session: the average step time and each category's ms."""
        rows = []
        for s in self.sessions:
            avg = s.summary.average
            rows.append(
                {
                    "path": s.path,
                    "step_source": s.summary.step_source,
                    "steps": len(s.summary.steps),
                    "step_time_ms": avg.step_time_ms if avg else None,
                    **(avg.breakdown_ms if avg else {}),
                }
            )
        return _frame(rows)


@dataclass(frozen=True)
class ExperimentFrames:
    """An experiment directory: its record, and its runs as a DataFrame."""

    record: ExperimentRecord

    @property
    def runs(self) -> pd.DataFrame:
        """One row per run (index `run_id`): variant, repeat, status, wall time, node, and each
        reported metric as a column."""
        rows = []
        for r in self.record.runs:
            rows.append(
                {
                    "run_id": r.run_id,
                    "variant": r.variant,
                    "repeat": r.repeat,
                    "warmup": r.is_warmup,
                    "status": str(r.status),
                    "wall_time_s": r.wall_time_s,
                    "node": r.node,
                    **r.metrics,
                }
            )
        fixed = ["run_id", "variant", "repeat", "warmup", "status", "wall_time_s", "node"]
        return _pandas().DataFrame(rows, columns=_columns(rows, fixed)).set_index("run_id")


def _columns(rows: list[dict[str, Any]], first: list[str]) -> list[str]:
    """The given columns first, then every other key in the order rows first name it."""
    out = dict.fromkeys(first)
    for row in rows:
        out.update(dict.fromkeys(row))
    return list(out)


def _frame(rows: list[dict[str, Any]], of: type | None = None) -> pd.DataFrame:
    """Rows as a DataFrame; with none, the columns of `of`'s fields (an empty table of kernels
    still has its columns)."""
    first = [f.name for f in fields(of)] if of is not None and not rows else []
    return _pandas().DataFrame(rows, columns=_columns(rows, first))


def load(path: str | Path, *, fallback: bool = False, use_cache: bool = True) -> Sessions:
    """Every profile session under `path` (a logdir, run, session or one file), summarised as
    `tuiprof summary` does. `fallback=True` uses tuiprof's own step finder (`--fallback`)."""
    _pandas()  # say what is missing before reading anything
    found = discover(path)  # FileNotFoundError for a missing path, as the CLI
    sessions: list[SessionFrames] = []
    errors = [(p.path, p.reason) for p in found.problems if isinstance(p, Problem) and p.unreadable]
    for sess in found.sessions:
        try:
            summary = load_summary(sess, use_cache=use_cache, force_fallback=fallback)
        except (ProfileError, OSError) as exc:
            errors.append((str(sess.path), str(exc)))
            continue
        sessions.append(SessionFrames(summary))
    return Sessions(tuple(sessions), tuple(errors))


def load_experiment(path: str | Path) -> ExperimentFrames:
    """An experiment directory (what `tuiprof run` made), read-only and safe while it runs."""
    _pandas()
    return ExperimentFrames(_load_record(path))
