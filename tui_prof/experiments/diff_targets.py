"""What `tuiprof diff` and the TUI's Diff view compare: paths or experiment variants → ProfileDiff.

Contract: a target is one profile session (a session directory, a profile file, or a run
directory or logdir holding exactly one session) or an experiment variant (the profile sessions
of its finished, non-warm-up runs, the runs `tuiprof compare` counts). A variant's profiles are
averaged, not represented by one run picked from them: per op, the mean over runs and their
spread, as the box plots show a metric. Loading goes through the summary cache and takes a cancel
event and a progress callback. Errors are ProfileError with one line for the user; in a variant,
a run whose profile cannot be read is left out and named in the diff's notes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path

from tui_prof.experiments.store import DB_NAME, StoreError, load_experiment
from tui_prof.model import RUN_FINISHED, Cancelled, ProfileError, ProfileSummary, Progress
from tui_prof.profiles.diff import ProfileDiff, diff_summaries
from tui_prof.profiles.discover import Session, discover, display_path
from tui_prof.profiles.efficiency import with_peak
from tui_prof.profiles.load import load_summary, session_of


@dataclass(frozen=True)
class Target:
    """One side of a diff: a label for people and the sessions it averages."""

    label: str
    sessions: tuple[Session, ...]
    single: bool = True  # one named session: a failure to read it is the diff's failure


def path_target(path: str | Path, label: str | None = None) -> Target:
    """A session directory, a profile file, or a directory holding exactly one session."""
    try:
        session = session_of(path)
    except OSError as exc:
        raise ProfileError(str(exc)) from None
    return Target(label or display_path(Path(path)), (session,))


def session_target(session: Session) -> Target:
    return Target(f"{session.run}/{session.name}", (session,))


def variant_target(experiment_dir: str | Path, variant: str) -> Target:
    """The profile sessions of one variant's counted runs (finished, not warm-ups)."""
    try:
        exp = load_experiment(experiment_dir)
    except StoreError as exc:
        raise ProfileError(str(exc)) from None
    if variant not in exp.variants:
        known = ", ".join(exp.variants)
        raise ProfileError(f"{exp.name}: no variant {variant!r} (variants: {known})")
    runs = [r for r in exp.runs if r.variant == variant and not r.is_warmup]
    finished = [r for r in runs if r.status == RUN_FINISHED]
    sessions: list[Session] = []
    for run in finished:
        try:
            found = discover(run.run_dir).sessions
        except OSError:
            continue
        sessions.extend(replace(s, run=run.run_id) for s in found)
    if not sessions:
        raise ProfileError(
            f"{exp.name}/{variant}: none of its {len(finished)} finished run(s) wrote a profile "
            "that tuiprof can read"
        )
    return Target(f"{variant} ({len(sessions)} of {len(finished)} runs)", tuple(sessions), False)


@dataclass(frozen=True)
class VariantRef:
    """An experiment variant named before its runs are looked up (the TUI resolves it in a worker)."""

    experiment_dir: str
    variant: str


TargetRef = Session | VariantRef


def resolve(ref: TargetRef) -> Target:
    """The Target a session or a variant reference names; ProfileError if there is none."""
    if isinstance(ref, VariantRef):
        return variant_target(ref.experiment_dir, ref.variant)
    return session_target(ref)


def experiment_variants(experiment_dir: str | Path) -> tuple[str, tuple[str, ...]]:
    """(baseline, variants) of an experiment, for `tuiprof diff EXPERIMENT_DIR`."""
    try:
        exp = load_experiment(experiment_dir)
    except StoreError as exc:
        raise ProfileError(str(exc)) from None
    return exp.baseline, exp.variants


def is_experiment(path: str | Path) -> bool:
    return (Path(path) / DB_NAME).is_file()


def _load(
    target: Target,
    cancel: threading.Event | None,
    report: Progress,
    done: int,
    total: int,
    use_cache: bool,
    peak_tflops: float | None,
) -> tuple[list[ProfileSummary], list[str]]:
    summaries: list[ProfileSummary] = []
    problems: list[str] = []
    for i, session in enumerate(target.sessions):
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        n = done + i

        def sub(f: float, m: str, n: int = n, name: str = session.name) -> None:
            report((n + f) / total, f"{name}: {m}")

        try:
            loaded = load_summary(session, use_cache=use_cache, cancel=cancel, progress=sub)
            summaries.append(with_peak(loaded, peak_tflops))
        except ProfileError as exc:
            if target.single:
                raise ProfileError(f"{display_path(session.path)}: {exc}") from None
            problems.append(f"{session.run}: left out, {exc}")
    if not summaries:
        raise ProfileError(f"{target.label}: none of its profiles could be read")
    return summaries, problems


def diff_targets(
    a: Target,
    b: Target,
    *,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    use_cache: bool = True,
    peak_tflops: float | None = None,
) -> ProfileDiff:
    """Load both sides (through the cache) and compare them; MFU against `peak_tflops` per
    device where given (`--peak-tflops`)."""
    report: Progress = progress or (lambda _f, _m: None)
    total = len(a.sessions) + len(b.sessions)
    sa, pa = _load(a, cancel, report, 0, total, use_cache, peak_tflops)
    sb, pb = _load(b, cancel, report, len(a.sessions), total, use_cache, peak_tflops)
    diff = diff_summaries(sa, sb, label_a=a.label, label_b=b.label)
    report(1.0, "done")
    problems = [f"A: {p}" for p in pa] + [f"B: {p}" for p in pb]
    return replace(diff, notes=diff.notes + tuple(problems)) if problems else diff
