"""XLA program runs on the host plane: where a JAX (or any XLA) job has no step markers, one run of
its jitted train-step program is one step.

Contract: `find_programs(host, cpu_only)` lists every XLA program the host plane shows running,
each with one Window per run in time order:
  - with devices, the host side of each execution: XLA's `<module>:XLA GPU module` events, else
    the outermost `PjitFunction(<name>)` / `PmapFunction(<name>)` events (JAX's dispatch), named
    `jit_<name>` / `pmap_<name>` as XLA names the module; executions that overlap in time (one
    call running on several devices' threads) are one run. A run's kernels are those launched
    inside it, matched by launch (correlation) id in steps.py.
  - CPU-only, the events that carry a `run_id` stat (XLA:CPU's thunks and its wait for
    completion), grouped by run id and named by their `hlo_module` stat; they are the run's roots.
`choose_program` picks the steps' program: the one the user names (`--step-program`), else, among
the programs run at least twice and at least a quarter as often as the most-run one, the one with
the most time (device time where there are devices). Names from the profile are data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from tui_prof.model import ProfileError, ProgramStat
from tui_prof.profiles.xplane.line_events import MISSING
from tui_prof.profiles.xplane.step_sources import Window
from tui_prof.profiles.xplane.xspace import PlaneEvents

GPU_MODULE = re.compile(r"^(.+):XLA GPU module$")
DISPATCH = re.compile(r"^(Pjit|Pmap)Function\((.+)\)$")
# Host events the finder must keep for program runs (added to the step finder's candidates).
PROGRAM_CANDIDATE = re.compile(r"^(Pjit|Pmap)Function\(|:XLA GPU module$")
# XLA:CPU's wait for a run's thunks: it carries the run id but is waiting, not computing.
CPU_WAIT = re.compile(r"wait for completion", re.IGNORECASE)
MIN_RUNS = 2


@dataclass
class Program:
    """One XLA program and its runs on one host (windows in time order)."""

    name: str
    windows: list[Window]
    roots: dict[tuple[int, int], int] = field(default_factory=dict)  # CPU: run events -> run
    time_ms: float = 0.0  # device time of its runs, else their span on the host

    @property
    def runs(self) -> int:
        return len(self.windows)

    def stat(self) -> ProgramStat:
        return ProgramStat(self.name, self.runs, self.time_ms)


def program_name(dispatch_or_module: str) -> str:
    """`PjitFunction(step)` -> `jit_step`, `PmapFunction(f)` -> `pmap_f`; a module name as is."""
    m = DISPATCH.match(dispatch_or_module)
    if m:
        return f"{'jit' if m.group(1) == 'Pjit' else 'pmap'}_{m.group(2)}"
    m = GPU_MODULE.match(dispatch_or_module)
    return m.group(1) if m else dispatch_or_module


def matches(wanted: str, name: str) -> bool:
    """Whether the user's `--step-program` names this program: `jit_step`, `step` or
    `PjitFunction(step)` all name `jit_step`."""
    w = program_name(wanted.strip())
    return w == name or name.removeprefix("jit_").removeprefix("pmap_") == w


def _merge(spans: list[tuple[int, int, int, int]]) -> list[Window]:
    """(begin, end, line, index) executions -> runs: executions overlapping in time are one run."""
    spans.sort()
    windows: list[Window] = []
    for begin, end, li, i in spans:
        if windows and begin <= windows[-1].end_ps:
            last = windows[-1]
            windows[-1] = Window(
                last.step, last.begin_ps, max(last.end_ps, end), last.line, last.index
            )
        else:
            windows.append(Window(len(windows), begin, end, li, i))
    return windows


def _outermost(le_start: np.ndarray, le_end: np.ndarray, idx: list[int]) -> list[int]:
    idx = sorted(idx, key=lambda i: (int(le_start[i]), -int(le_end[i])))
    kept: list[int] = []
    reach = -1
    for i in idx:
        if int(le_end[i]) <= reach:
            continue
        kept.append(i)
        reach = int(le_end[i])
    return kept


def _executions(host: PlaneEvents, name_of: Callable[[str], str | None]) -> list[Program]:
    """Programs from named execution events (outermost per thread, overlaps merged)."""
    names = host.meta.event_names
    by_id = {k: n for k, v in names.items() if (n := name_of(v)) is not None}
    spans: dict[str, list[tuple[int, int, int, int]]] = {}
    for li, le in enumerate(host.lines):
        hit = np.flatnonzero(np.isin(le.metadata_id, list(by_id)))
        per_name: dict[str, list[int]] = {}
        for i in hit.tolist():
            per_name.setdefault(by_id[int(le.metadata_id[i])], []).append(i)
        for name, idx in per_name.items():
            for i in _outermost(le.start_ps, le.end_ps, idx):
                spans.setdefault(name, []).append((int(le.start_ps[i]), int(le.end_ps[i]), li, i))
    return [Program(name, _merge(s)) for name, s in spans.items()]


def _cpu_runs(host: PlaneEvents) -> list[Program]:
    """CPU-only: events grouped by their `run_id`, each run named by its `hlo_module`."""
    module_of_run: dict[int, str] = {}
    events: dict[int, list[tuple[int, int, int, int]]] = {}
    for li, le in enumerate(host.lines):
        run_ids = le.ints["run_id"]  # MISSING where an event has none
        has = np.flatnonzero(run_ids != MISSING)
        modules = le.texts.get("hlo_module", {})
        for i in has.tolist():
            rid = int(run_ids[i])
            events.setdefault(rid, []).append((int(le.start_ps[i]), int(le.end_ps[i]), li, i))
            if i in modules and rid not in module_of_run:
                module_of_run[rid] = modules[i]
    progs: dict[str, list[tuple[int, list[tuple[int, int, int, int]]]]] = {}
    for rid, evs in events.items():
        name = module_of_run.get(rid)
        if name:
            progs.setdefault(name, []).append((min(e[0] for e in evs), evs))
    out = []
    for name, runs in progs.items():
        runs.sort(key=lambda r: r[0])
        windows, roots = [], {}
        for k, (_, evs) in enumerate(runs):
            first = min(evs)
            windows.append(Window(k, first[0], max(e[1] for e in evs), first[2], first[3]))
            roots.update({(e[2], e[3]): k for e in evs})
        spans = sum(w.end_ps - w.begin_ps for w in windows) / 1e9
        out.append(Program(name, windows, roots, spans))
    return out


def find_programs(host: PlaneEvents | None, *, cpu_only: bool) -> list[Program]:
    """Every XLA program run on this host, most runs first (see the module's contract)."""
    if host is None:
        return []
    if cpu_only:
        progs = _cpu_runs(host)
    else:
        names = host.meta.event_names.values()
        if any(GPU_MODULE.match(v) for v in names):
            progs = _executions(host, lambda v: m.group(1) if (m := GPU_MODULE.match(v)) else None)
        else:
            progs = _executions(host, lambda v: program_name(v) if DISPATCH.match(v) else None)
        for p in progs:
            p.time_ms = sum(w.end_ps - w.begin_ps for w in p.windows) / 1e9
    return sorted(progs, key=lambda p: (-p.runs, p.name))


def choose_program(programs: Iterable[Program], wanted: str | None) -> Program:
    """The steps' program (see the module's contract); ProfileError with the programs it saw."""
    progs = list(programs)
    seen = ", ".join(f"{p.name} ×{p.runs}" for p in progs[:8]) or "none"
    if wanted:
        named = [p for p in progs if matches(wanted, p.name)]
        if not named:
            raise ProfileError(f"no XLA program {wanted!r} ran in this profile (programs: {seen})")
        best = max(named, key=lambda p: (p.runs, p.time_ms))
        if best.runs < 1:
            raise ProfileError(f"XLA program {best.name!r} has no complete run")
        return best
    most = max((p.runs for p in progs), default=0)
    floor = max(MIN_RUNS, most // 4)
    candidates = [p for p in progs if p.runs >= floor]
    if not candidates:
        raise ProfileError(
            "no step markers, Keras batches, train-step tf.function calls or repeated XLA "
            f"program runs found (programs: {seen})"
        )
    return max(candidates, key=lambda p: (p.time_ms, p.runs))
