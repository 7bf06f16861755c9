"""Steps from XLA program runs, for steps.py: which runs are steps and which device events each owns.

Contract: called where no other step source yields steps, or where the user named a program.
`device_program_steps` ties each device event to a run by its launch (correlation id) as
steps.py does for markers, adds up each program's device time, picks the program
(program_runs.choose_program) and returns the Choice with each device event's step;
`host_program_choice` does the same for a CPU-only profile, whose runs' roots are the events
carrying the run's `run_id`. Both record every program seen in the `ProgramFindings` they are
given, so a profile without steps can still list them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tui_prof.model import STEP_SOURCE_PROGRAM_RUNS, ProfileError, ProgramStat
from tui_prof.profiles.xplane.program_runs import Program, choose_program, find_programs
from tui_prof.profiles.xplane.step_events import launched_in
from tui_prof.profiles.xplane.step_sources import Choice
from tui_prof.profiles.xplane.xspace import PlaneEvents

XLA_MODULES_LINE = "XLA Modules"
_MODULE_RUN = re.compile(r"\(\d+\)$")  # "jit_f(12190760917235803885)" -> "jit_f"


@dataclass
class ProgramFindings:
    """What the program-run search saw on one host, for the summary."""

    programs: list[ProgramStat] = field(default_factory=list)
    run_interval_ms: float | None = None  # median start-to-start time of the kept steps
    run_ms: float | None = None  # median time of a kept run itself (its device or host span)


def _detail(chosen: Program, programs: list[Program], wanted: str | None) -> str:
    n = len(programs)
    how = (
        "named with --step-program"
        if wanted
        else f"most time of {n} program{'s' if n != 1 else ''}; --step-program picks another"
    )
    return f"steps from {chosen.runs} runs of the XLA program '{chosen.name}' ({how})"


def module_device_ms(devices: list[PlaneEvents]) -> dict[str, float]:
    """Device time per program from the devices' own "XLA Modules" lines (TPUs write them:
    one event `<module>(<program id>)` per run), summed over devices."""
    out: dict[str, float] = {}
    for pe in devices:
        for le in pe.lines:
            if le.name != XLA_MODULES_LINE:
                continue
            dur = (le.end_ps - le.start_ps).astype(np.float64)
            for mid, ps in zip(le.metadata_id.tolist(), dur.tolist(), strict=True):
                name = _MODULE_RUN.sub("", pe.meta.event_names.get(int(mid), ""))
                out[name] = out.get(name, 0.0) + ps / 1e9
    return out


def device_program_steps(
    ev: dict[str, np.ndarray],
    host: PlaneEvents | None,
    devices: list[PlaneEvents],
    wanted: str | None,
    findings: ProgramFindings,
) -> tuple[Choice, np.ndarray]:
    """(choice, each device event's step or -1) for runs of the chosen program."""
    programs = find_programs(host, cpu_only=False)
    if not programs:
        raise ProfileError(
            "no step markers, Keras batches, train-step tf.function calls or XLA program runs found"
        )
    if not (ev["corr"] >= 0).any():
        on_device = module_device_ms(devices)
        for p in programs:
            p.time_ms = on_device.get(p.name, 0.0)
        findings.programs = [p.stat() for p in sorted(programs, key=lambda p: -p.time_ms)]
        raise ProfileError(
            "XLA programs ran, but their device events carry no launch ids to tie them to runs "
            "(as on TPUs): mark the steps"
        )
    pairs = sorted(
        ((w, k) for k, p in enumerate(programs) for w in p.windows), key=lambda x: x[0].begin_ps
    )
    owner = np.array([k for _, k in pairs], dtype=np.int64)
    run = np.array([w.step for w, _ in pairs], dtype=np.int64)
    win = launched_in(ev, [w for w, _ in pairs], host)
    has = win >= 0
    device_ps = np.bincount(
        owner[win[has]], weights=(ev["end"] - ev["start"])[has], minlength=len(programs)
    )
    for p, ps in zip(programs, device_ps.tolist(), strict=True):
        p.time_ms = ps / 1e9
    findings.programs = [p.stat() for p in sorted(programs, key=lambda p: -p.time_ms)]
    busy = [p for p in programs if p.time_ms > 0] or programs
    chosen = choose_program(programs if wanted else busy, wanted)
    k = programs.index(chosen)
    safe = np.maximum(win, 0)
    step = np.where(has & (owner[safe] == k), run[safe], -1)
    return Choice(STEP_SOURCE_PROGRAM_RUNS, _detail(chosen, programs, wanted), chosen.windows), step


def host_program_choice(
    host: PlaneEvents | None, wanted: str | None, findings: ProgramFindings
) -> Choice:
    """The chosen program's runs on a CPU-only host, with each run's events as its roots."""
    programs = find_programs(host, cpu_only=True)
    findings.programs = [p.stat() for p in sorted(programs, key=lambda p: -p.time_ms)]
    chosen = choose_program(programs, wanted)
    return Choice(
        STEP_SOURCE_PROGRAM_RUNS,
        _detail(chosen, programs, wanted),
        chosen.windows,
        roots=chosen.roots,
    )


# A run's step lasts until the next run starts, as a marked step lasts until the next marker:
# the host's dispatch, input and Python between runs belong to the step (as host time or "all
# others"), so step times of jobs with and without markers compare. A gap longer than this many
# median start-to-start times (an evaluation pass, a checkpoint) is not part of any step: the
# step before it ends with its run.
GAP_FACTOR = 3.0


def until_next_run(begin_ps: np.ndarray, end_ps: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Each kept run's step end: the next kept run's start where the runs follow each other."""
    idx = np.flatnonzero(ok)
    cur, nxt = idx[:-1], idx[1:]
    follows = nxt - cur == 1
    if not follows.any():
        return end_ps
    gaps = begin_ps[nxt] - begin_ps[cur]
    typical = float(np.median(gaps[follows]))
    extend = follows & (gaps <= GAP_FACTOR * typical) & (begin_ps[nxt] > end_ps[cur])
    out = end_ps.copy()
    out[cur[extend]] = begin_ps[nxt[extend]]
    return out


def run_ms(begin_ps: np.ndarray, end_ps: np.ndarray, ok: np.ndarray) -> float | None:
    """Median time of a kept run itself."""
    if not ok.any():
        return None
    return float(np.median(end_ps[ok] - begin_ps[ok])) / 1e9


def run_interval_ms(begin_ps: np.ndarray, ok: np.ndarray) -> float | None:
    """Median time from one kept step's start to the next one's (consecutive runs only)."""
    idx = np.flatnonzero(ok)
    pairs = idx[1:][np.diff(idx) == 1]
    if not len(pairs):
        return None
    return float(np.median(begin_ps[pairs] - begin_ps[pairs - 1])) / 1e9
