"""What to try next, as a variant: where a profile's advice names a change (mixed precision,
XLA, batch size, input pipeline) and the job's command exposes it, the command that makes it.

Contract:
- `run_context(path)` finds the run a profile belongs to: a path inside
  `<experiment>/runs/<run_id>/` of an experiment directory. Its command is the run's variant's
  argv and environment in the experiment's stored spec; outside an experiment there is none.
- `propose(context, changes)` gives, per change in the advice's order, the variant that makes
  it, found in one of two ways and nowhere else (nothing is guessed):
  1. an option in the command with a value tuiprof knows how to change:
     `--precision float32|fp32` -> `mixed`; `--xla`/`--jit-compile`/`--jit_compile`/`--amp`/
     `--mixed-precision` with 0|false|off|no -> the matching 1|true|on|yes;
     `--batch-size`/`--batch_size`/`--bs` N -> 2N; `--num-workers`/`--num_workers`/
     `--workers` N -> max(4, 2N); the flag `--input-bound` (the example's deliberately slow
     input pipeline) -> dropped;
  2. a setting the job said it reads through tui_prof.instrument.settings (its runs report
     `tuiprof_settings`), or that the variant's environment already sets: TUIPROF_PRECISION=mixed,
     TUIPROF_XLA=1, TUIPROF_BATCH_SIZE=2N, TUIPROF_PREFETCH=1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tui_prof.experiments.protocol import SETTING_VARS, SETTINGS_KEY

CHANGE_LABELS = {
    "mixed_precision": "mixed precision",
    "xla": "XLA",
    "batch_size": "a larger batch",
    "input_pipeline": "the input pipeline",
}
VARIANT_NAMES = {
    "mixed_precision": "mixed",
    "xla": "xla",
    "batch_size": "batch2x",
    "input_pipeline": "pipeline",
}
_FLAGS = {"0": "1", "false": "true", "off": "on", "no": "yes"}


@dataclass(frozen=True)
class RunContext:
    """The command behind a profile: which experiment, run and variant, and how it was run."""

    experiment_dir: Path
    run_id: str
    variant: str
    argv: tuple[str, ...]
    env: dict[str, str]  # the variant's own environment (not the whole process's)
    workdir: str
    repeats: int
    experiment: str
    settings: dict[str, str] = field(default_factory=dict)  # TUIPROF_* the job reads: value


@dataclass(frozen=True)
class Proposal:
    change: str  # a key of tui_prof.profiles.advice.CHANGES
    name: str  # the new variant's name
    argv: tuple[str, ...]
    env: dict[str, str]
    how: str  # where tuiprof found the knob, for the dialog


def run_context(path: str | Path) -> RunContext | None:
    """The run a profile path belongs to, if it lies in an experiment's `runs/<run_id>/`."""
    from tui_prof.experiments.store import (
        DB_NAME,
        RUNS_DIR,
        StoreError,
        load_experiment,
        load_spec_from,
    )

    p = Path(path).resolve()
    for run_dir in (p, *p.parents):
        exp_dir = run_dir.parent.parent
        if run_dir.parent.name == RUNS_DIR and (exp_dir / DB_NAME).is_file():
            break
    else:
        return None
    try:
        spec = load_spec_from(exp_dir)
        exp = load_experiment(exp_dir)
    except (StoreError, OSError, ValueError, KeyError):
        return None
    run = next((r for r in exp.runs if r.run_id == run_dir.name), None)
    if run is None:
        return None
    try:
        v = spec.variant(run.variant)
    except KeyError:
        return None
    reported = run.environment.get("reported", {}) if isinstance(run.environment, dict) else {}
    settings = reported.get(SETTINGS_KEY, {}) if isinstance(reported, dict) else {}
    return RunContext(
        experiment_dir=exp_dir,
        run_id=run.run_id,
        variant=run.variant,
        argv=tuple(spec.argv(run.variant)),
        env=dict(v.env),
        workdir=spec.workdir,
        repeats=spec.repeats,
        experiment=spec.name,
        settings={str(k): str(x) for k, x in settings.items()}
        if isinstance(settings, dict)
        else {},
    )


def _option(argv: list[str], names: tuple[str, ...]) -> tuple[int, str, bool] | None:
    """(index of the value, the value, whether it is `--opt=value`) of the first option named."""
    for i, word in enumerate(argv):
        for n in names:
            if word == n and i + 1 < len(argv):
                return i + 1, argv[i + 1], False
            if word.startswith(n + "="):
                return i, word[len(n) + 1 :], True
    return None


def _set(argv: list[str], at: tuple[int, str, bool], value: str) -> tuple[str, ...]:
    i, _, joined = at
    out = list(argv)
    out[i] = out[i].split("=", 1)[0] + "=" + value if joined else value
    return tuple(out)


def _from_argv(change: str, argv: list[str]) -> tuple[tuple[str, ...], str] | None:
    """The changed argv and which option it changed, or None."""
    if change == "mixed_precision":
        at = _option(argv, ("--precision",))
        if at and at[1].lower() in ("float32", "fp32", "32", "full"):
            return _set(argv, at, "mixed"), "--precision in the command"
        at = _option(argv, ("--amp", "--mixed-precision", "--mixed_precision"))
        if at and at[1].lower() in _FLAGS:
            return _set(argv, at, _FLAGS[at[1].lower()]), f"{argv[at[0] - 1]} in the command"
    elif change == "xla":
        at = _option(argv, ("--xla", "--jit-compile", "--jit_compile", "--jit"))
        if at and at[1].lower() in _FLAGS:
            name = argv[at[0]].split("=")[0] if at[2] else argv[at[0] - 1]
            return _set(argv, at, _FLAGS[at[1].lower()]), f"{name} in the command"
    elif change == "batch_size":
        at = _option(argv, ("--batch-size", "--batch_size", "--bs"))
        if at and re.fullmatch(r"[1-9][0-9]*", at[1]):
            name = argv[at[0]].split("=")[0] if at[2] else argv[at[0] - 1]
            return _set(argv, at, str(2 * int(at[1]))), f"{name} in the command"
    elif change == "input_pipeline":
        if "--input-bound" in argv:
            return tuple(a for a in argv if a != "--input-bound"), "--input-bound in the command"
        at = _option(argv, ("--num-workers", "--num_workers", "--workers"))
        if at and re.fullmatch(r"[0-9]+", at[1]):
            name = argv[at[0]].split("=")[0] if at[2] else argv[at[0] - 1]
            return _set(argv, at, str(max(4, 2 * int(at[1])))), f"{name} in the command"
    return None


_SETTING_OF = {
    "mixed_precision": "precision",
    "xla": "xla",
    "batch_size": "batch_size",
    "input_pipeline": "prefetch",
}


def _from_settings(change: str, ctx: RunContext) -> tuple[dict[str, str], str] | None:
    """The changed environment and which setting it changed, or None."""
    var = SETTING_VARS[_SETTING_OF[change]]
    current = ctx.env.get(var, ctx.settings.get(var))
    if current is None:
        return None
    if change == "mixed_precision":
        value = None if current.strip().lower() == "mixed" else "mixed"
    elif change == "batch_size":
        value = str(2 * int(current)) if re.fullmatch(r"[1-9][0-9]*", current.strip()) else None
    else:
        value = None if current.strip().lower() in ("1", "true", "yes", "on") else "1"
    if value is None:
        return None
    how = f"{var}, which the job reads (tui_prof.instrument.settings)"
    if var in ctx.env:
        how = f"{var} in the variant's environment"
    return {**ctx.env, var: value}, how


def propose(ctx: RunContext, changes: tuple[str, ...]) -> list[Proposal]:
    """One proposal per change the command exposes, in the order of `changes`."""
    out: list[Proposal] = []
    for change in changes:
        if change not in CHANGE_LABELS:
            continue
        name = VARIANT_NAMES[change]
        if name == ctx.variant:
            name += "2"
        by_arg = _from_argv(change, list(ctx.argv))
        if by_arg is not None:
            out.append(Proposal(change, name, by_arg[0], dict(ctx.env), by_arg[1]))
            continue
        by_env = _from_settings(change, ctx)
        if by_env is not None:
            out.append(Proposal(change, name, ctx.argv, by_env[0], by_env[1]))
    return out
