"""tuiprof's own step finder: training steps and TensorBoard's step-time breakdown from raw XPlane events.

Contract: used where TensorBoard's converter reports "No step marker observed". Steps come from the
first source that yields any, in this order (the id is `FoundSteps.source`):
  xprof_groups          step groups already in the file (`group_id` stats of a preprocessed profile);
  step_markers          the job's own markers: `train`/`test`/`TraceContext` events or `_r=1` roots
                        with a `step_num` (these two are skipped when prefer_official_markers=False);
  keras_profiled_batch  the "Profiled batch" events of Keras 3's TensorBoard callback;
  tf_function_calls     repeated calls of a train-step tf.function (e.g. `multi_step_on_iterator`);
  tpu_step_markers      a TPU core's own "Steps" line (by group_id), where the host marks none.
Each step is split with the converter's own rules (xprof xplane_to_step_events.cc, event_span.cc,
step_events_to_steps_db.cc): events get its event types, overlaps go to the higher-priority type,
and each type's covered time inside the step is summed; "other" is the step time not covered.
A step's events are those of its marker's call tree, found as tsl's grouping finds them: events
nested in it on its thread, then events linked to those across threads (producer/consumer `_p`/`_c`
stats, an executor's step id for async IteratorGetNext), and so on. With devices, only device
events count (as in xprof 2.24): the kernels and copies whose launch (CUPTI correlation id) lies in
the call tree (on a TPU core, its "XLA Ops" line's ops, as xprof reads a core's work: its
programs' runs only widen the span); the step lasts from the first to the last of them on its
busiest device. CPU-only, the call tree's host events count, and the marker's span is the step.
Like the converter, a host with more than 5 well-formed steps loses its first and last (by group
id, else by time), which may be cut by the profile's edges; not Keras' profiled batches (whole).
Hosts of one session: the steps whose number every host has, each taken from its slowest host.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tui_prof.model import (
    CATEGORIES,
    STEP_SOURCE_PROGRAM_RUNS,
    Cancelled,
    ProfileError,
    ProgramStat,
    Progress,
    StepBreakdown,
    UnreadableProfile,
)
from tui_prof.profiles.xplane.line_events import MISSING, LineEvents
from tui_prof.profiles.xplane.program_runs import CPU_WAIT, PROGRAM_CANDIDATE
from tui_prof.profiles.xplane.program_steps import (
    ProgramFindings,
    device_program_steps,
    host_program_choice,
    run_interval_ms,
    run_ms,
    until_next_run,
)
from tui_prof.profiles.xplane.step_events import (
    CATEGORY_OF,
    DEVICE_COMPUTE_16,
    DEVICE_COMPUTE_32,
    HOST_COMPUTE,
    TPU_OP_LINES,
    classify_device,
    classify_host,
    classify_tpu,
    coverage,
    host_groups,
    launched_in,
    types_of,
)
from tui_prof.profiles.xplane.step_sources import (
    MARKER_CANDIDATE,
    TPU_STEPS_LINE,
    Choice,
    choose_windows,
    tpu_step_windows,
)
from tui_prof.profiles.xplane.xspace import (
    PlaneEvents,
    XSpaceFile,
    host_name,
    read_plane,
)

# What the device and host step finders return: (choice, step numbers, step begins (ps), step
# spans, owned time per event type, which steps are well formed).
_Found = tuple[Choice, list[int], np.ndarray, np.ndarray, dict[int, np.ndarray], np.ndarray]

_DEVICE_STATS = ("correlation_id", "group_id")
_DROP_EDGES_ABOVE = 5  # xprof's kDropIncomplteteStepThreshold
# Host stats: those before "_p" mark steps and launches; the rest link a CPU-only step's threads.
_HOST_STATS = (
    "step_num",
    "_r",
    "group_id",
    "tf_function_call",
    "correlation_id",
    "_p",
    "_pt",
    "_c",
    "_ct",
    "id",
    "iter_num",
    "run_id",
)
_HOST_TEXT_STATS = ("step_name", "hlo_module")


def _host_candidate(name: str) -> bool:
    return bool(MARKER_CANDIDATE.search(name) or PROGRAM_CANDIDATE.search(name))


class NoStepsFound(ProfileError):
    """No steps; `programs` lists the XLA programs the profile ran all the same."""

    def __init__(self, message: str, programs: Sequence[ProgramStat] = ()) -> None:
        super().__init__(message)
        self.programs = tuple(programs)


@dataclass(frozen=True)
class FoundSteps:
    """Steps found without TensorBoard's converter, and how they were found."""

    source: str  # e.g. "keras_profiled_batch"
    detail: str  # one sentence for users: how the steps were found
    steps: tuple[StepBreakdown, ...]
    hosts: tuple[str, ...] = ()
    device_compute_16bit_percent: float | None = (
        None  # share of device compute, where devices exist
    )
    programs: tuple[ProgramStat, ...] = ()  # XLA programs run, most time first
    run_interval_ms: float | None = None  # program runs: median start-to-start time of steps
    run_ms: float | None = None  # program runs: median time of a run itself
    # Every host's kept steps: (file path, step number, begin, end) in the file's picoseconds,
    # so a timeline can cut a step out with the very span the summary timed (by path: two
    # hosts' files may record the same hostname).
    spans_ps: tuple[tuple[str, int, int, int], ...] = ()


@dataclass
class _HostResult:
    """One host file's steps: number -> (step time, breakdown), in milliseconds."""

    host: str
    source: str
    detail: str
    steps: dict[int, tuple[float, dict[str, float]]]
    compute_ps: tuple[float, float]  # (16-bit, 32-bit) device compute
    findings: ProgramFindings
    spans_ps: tuple[tuple[str, int, int, int], ...] = ()  # see FoundSteps.spans_ps


def _complete(ok: np.ndarray, source: str) -> np.ndarray:
    """The well-formed steps the converter keeps: with more than 5, not the first and the last
    (xprof step_events_to_steps_db.cc, kDropIncomplteteStepThreshold: they may be cut by the
    profile's start and end). Not for Keras' profiled batches: the callback starts and stops the
    trace at batch boundaries, so its first and last batches are whole and are the ones asked for."""
    kept = np.flatnonzero(ok)
    if source == "keras_profiled_batch" or len(kept) <= _DROP_EDGES_ABOVE:
        return ok
    ok = ok.copy()
    ok[[kept[0], kept[-1]]] = False
    return ok


def _step_dicts(
    numbers: list[int], span_ps: np.ndarray, owned: dict[int, np.ndarray], ok: np.ndarray
) -> dict[int, tuple[float, dict[str, float]]]:
    out = {}
    for k, num in enumerate(numbers):
        if not ok[k]:
            continue  # xprof drops steps that are not "well formed", then the edge steps
        cats: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
        for t, ps in owned.items():
            if t in CATEGORY_OF:
                cats[CATEGORY_OF[t]] = cats.get(CATEGORY_OF[t], 0.0) + float(ps[k]) / 1e9
        total = float(span_ps[k]) / 1e9
        cats["other"] = max(0.0, total - sum(v for c, v in cats.items() if c != "other"))
        out[num] = (total, cats)
    return out


def _program_spans(
    begin: np.ndarray, end: np.ndarray, ok: np.ndarray, findings: ProgramFindings
) -> np.ndarray:
    """Program runs' steps run until the next run starts (program_steps.until_next_run); the
    runs' own pace is kept for the summary's warning."""
    kept = _complete(ok, STEP_SOURCE_PROGRAM_RUNS)
    findings.run_interval_ms = run_interval_ms(begin, kept)
    findings.run_ms = run_ms(begin, end, kept)
    return until_next_run(begin, end, ok)


def _device_steps(
    devices: list[PlaneEvents],
    read_host: Callable[[], PlaneEvents | None],
    prefer_official: bool,
    program: str | None,
    findings: ProgramFindings,
) -> _Found:
    """(choice, step numbers, step spans, owned time per type, well-formed) from device events."""
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("start", "end", "type", "dev", "corr", "group")
    }
    for d, pe in enumerate(devices):
        tpu = pe.plane.device is not None and pe.plane.device[0] == "TPU"
        for le in pe.lines:
            if le.name == TPU_STEPS_LINE:
                continue  # a TPU core's step markers: not work
            n = len(le.start_ps)
            if tpu and le.name not in TPU_OP_LINES:  # its programs' runs, …: the span only
                types = np.zeros(n, dtype=np.int64)
            else:
                classify = classify_tpu if tpu else classify_device
                types = types_of(le.metadata_id, pe.meta.event_names, classify)
            shaped = [(i, "half" in v) for i, v in le.texts["shape"].items() if v]
            if shaped:  # the converter judges precision by the shapes where there are some
                idx, half = (np.array(x) for x in zip(*shaped, strict=True))
                compute = types[idx] >= DEVICE_COMPUTE_32
                types[idx[compute]] = np.where(half[compute], DEVICE_COMPUTE_16, DEVICE_COMPUTE_32)
            corr = np.where(le.ints["correlation_id"] == MISSING, -1, le.ints["correlation_id"])
            group = np.where(le.ints["group_id"] == MISSING, -1, le.ints["group_id"])
            for col, arr in (
                ("start", le.start_ps),
                ("end", le.end_ps),
                ("type", types),
                ("dev", np.full(n, d)),
                ("corr", corr),
                ("group", group),
            ):
                cols[col].append(arr)
    ev = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in cols.items()}
    ok_ev = ev["corr"] >= 0
    if program is None and prefer_official and (ok_ev & (ev["group"] >= 0)).any():
        choice = Choice(
            "xprof_groups",
            "steps from the step groups recorded in the profile (group_id stats of device events)",
            [],
            by_group=True,
        )
        numbers = sorted(set(ev["group"][ok_ev & (ev["group"] >= 0)].tolist()))
        step = np.searchsorted(numbers, ev["group"])
        step[~ok_ev | (ev["group"] < 0)] = -1
    else:
        host = read_host()  # only now: a preprocessed profile never needs its host plane
        found = None if program else choose_windows(host, prefer_official=prefer_official)
        if found is None and program is None:  # no host markers: a TPU core's own, if any
            found = tpu_step_windows(devices)
        if found is None:  # a JAX/XLA job: one step per run of its train-step program
            choice, step = device_program_steps(ev, host, devices, program, findings)
        else:
            choice, step = found, launched_in(ev, found.windows, host)
        numbers = [w.step for w in choice.windows]
    keep = step >= 0
    ev = {k: v[keep] for k, v in ev.items()}
    step = step[keep]
    n_steps, n_dev = len(numbers), max(len(devices), 1)
    slot = step * n_dev + ev["dev"]
    lo = np.full(n_steps * n_dev, np.iinfo(np.int64).max)
    hi = np.full(n_steps * n_dev, np.iinfo(np.int64).min)
    np.minimum.at(lo, slot, ev["start"])
    np.maximum.at(hi, slot, ev["end"])
    dur = np.where(hi > lo, hi - lo, -1).reshape(n_steps, n_dev)
    busiest = dur.argmax(axis=1) if n_steps else np.zeros(0, dtype=np.int64)
    pick = np.arange(n_steps) * n_dev + busiest
    begin, end = lo[pick], hi[pick]
    ok = np.zeros(n_steps, dtype=bool)
    ok[step[ev["type"] >= DEVICE_COMPUTE_32]] = True
    ok &= end > begin
    begin, end = np.where(ok, begin, 0), np.where(ok, end, 1)
    if choice.source == STEP_SOURCE_PROGRAM_RUNS:
        end = _program_spans(begin, end, ok, findings)
    work = ev["type"] > 0
    owned = coverage(step[work], ev["start"][work], ev["end"][work], ev["type"][work], begin, end)
    return choice, numbers, begin, end - begin, owned, ok


def _host_steps(
    host: PlaneEvents | None, prefer_official: bool, program: str | None, findings: ProgramFindings
) -> _Found:
    """The same as _device_steps, for a CPU-only profile: from host events."""
    if host is None:
        raise ProfileError("no host events to find steps in")
    choice = None if program else choose_windows(host, prefer_official=prefer_official)
    if choice is None:  # a JAX/XLA CPU job: one step per run of its train-step program
        choice = host_program_choice(host, program, findings)
    windows = choice.windows
    if choice.by_group:
        index = {w.step: k for k, w in enumerate(windows)}
        groups = []
        numbers = np.array(sorted(index), dtype=np.int64)
        for le in host.lines:
            gid = le.ints["group_id"]
            k = np.clip(np.searchsorted(numbers, gid), 0, max(len(numbers) - 1, 0))
            groups.append(np.where((gid != MISSING) & (numbers[k] == gid), k, -1))
    else:
        roots = choice.roots or {(w.line, w.index): k for k, w in enumerate(windows)}
        groups = host_groups(host.lines, roots, host.meta.event_names)
    cols: dict[str, list[np.ndarray]] = {"step": [], "start": [], "end": [], "type": []}
    # Markers are not compute; an XLA run's roots are its thunks (compute) and its wait (not).
    markers = set() if choice.roots else {(w.line, w.index) for w in windows}
    waits = [k for k, v in host.meta.event_names.items() if CPU_WAIT.search(v)]
    for li, (le, g) in enumerate(zip(host.lines, groups, strict=True)):
        types = types_of(le.metadata_id, host.meta.event_names, classify_host)
        if choice.roots:
            types[np.isin(le.metadata_id, waits)] = 0
        for i in [*le.texts["step_name"], *(i for lj, i in markers if lj == li)]:
            types[i] = 0  # markers and implicit markers are not compute
        keep = (g >= 0) & (types > 0) & (le.end_ps > le.start_ps)  # instants own no time
        for key, arr in (("step", g), ("start", le.start_ps), ("end", le.end_ps), ("type", types)):
            cols[key].append(arr[keep])
    ev = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in cols.items()}
    begin = np.array([w.begin_ps for w in windows], dtype=np.int64)
    end = np.array([w.end_ps for w in windows], dtype=np.int64)
    owned = coverage(ev["step"], ev["start"], ev["end"], ev["type"], begin, end)
    ok = np.zeros(len(windows), dtype=bool)
    ok[ev["step"][ev["type"] == HOST_COMPUTE]] = True
    if choice.source == STEP_SOURCE_PROGRAM_RUNS:
        end = _program_spans(begin, end, ok, findings)
        owned = coverage(ev["step"], ev["start"], ev["end"], ev["type"], begin, end)
    return choice, [w.step for w in windows], begin, end - begin, owned, ok


def _linked(le: LineEvents, picked: np.ndarray) -> np.ndarray:
    """Host events a GPU step needs: marker candidates, launches, and events that link threads
    (grouping spreads by time containment, so plain events in between are not needed)."""
    ints = le.ints
    keep: np.ndarray = picked | (ints["correlation_id"] != MISSING)
    for name in ("_p", "_c", "iter_num"):
        keep |= ints[name] != MISSING
    return keep


def _read_host(
    path: Path, prefer_official: bool, program: str | None, tick: Callable[[int], None]
) -> _HostResult:
    with XSpaceFile(path) as space:
        host_ref = next((p for p in space.planes if p.is_host), None)
        dev_refs = [p for p in space.planes if p.device and p.device[0] in ("GPU", "TPU")]
        devices = [
            read_plane(
                space, p, stats=_DEVICE_STATS, text_stats=("shape",), skip_derived=True, tick=tick
            )
            for p in dev_refs
        ]

        def host() -> PlaneEvents | None:
            if host_ref is None:
                return None
            if not dev_refs:  # CPU-only: every host event may belong to a step
                return read_plane(
                    space,
                    host_ref,
                    stats=_HOST_STATS,
                    text_stats=_HOST_TEXT_STATS,
                    want=_host_candidate,
                    tick=tick,
                )
            return read_plane(  # with devices, hold only markers, launches and linked events
                space,
                host_ref,
                stats=_HOST_STATS,
                text_stats=_HOST_TEXT_STATS,
                want=_host_candidate,
                tick=tick,
                keep=_linked,
            )

        findings = ProgramFindings()
        try:
            if dev_refs:  # as in xprof 2.24: with devices, host events only mark steps, launches
                choice, numbers, begin, span, owned, ok = _device_steps(
                    devices, host, prefer_official, program, findings
                )
            else:
                choice, numbers, begin, span, owned, ok = _host_steps(
                    host(), prefer_official, program, findings
                )
        except (NoStepsFound, UnreadableProfile):
            raise  # a damaged file is its session's error, not a profile without steps
        except ProfileError as exc:
            raise NoStepsFound(str(exc), findings.programs) from exc
        name = host_name(path, space)
    steps = _step_dicts(numbers, span, owned, _complete(ok, choice.source))
    if not steps:
        raise NoStepsFound(
            f"{name}: {len(numbers)} candidate steps ({choice.source}) but none holds any compute",
            findings.programs,
        )
    c16 = float(owned.get(DEVICE_COMPUTE_16, np.zeros(len(ok)))[ok].sum()) if dev_refs else 0.0
    c32 = float(owned.get(DEVICE_COMPUTE_32, np.zeros(len(ok)))[ok].sum()) if dev_refs else 0.0
    spans = tuple(
        (str(path), num, int(begin[k]), int(begin[k] + span[k]))
        for k, num in enumerate(numbers)
        if num in steps
    )
    return _HostResult(name, choice.source, choice.detail, steps, (c16, c32), findings, spans)


def _combine(results: list[_HostResult]) -> dict[int, tuple[float, dict[str, float]]]:
    """Steps every host has (by number, else by position), each from its slowest host."""
    common = set(results[0].steps)
    for r in results[1:]:
        common &= set(r.steps)
    if not common and len({len(r.steps) for r in results}) == 1:
        seqs = [sorted(r.steps) for r in results]
        return {
            seqs[0][k]: max(
                (r.steps[s[k]] for r, s in zip(results, seqs, strict=True)), key=lambda v: v[0]
            )
            for k in range(len(seqs[0]))
        }
    return {n: max((r.steps[n] for r in results), key=lambda v: v[0]) for n in sorted(common)}


def find_steps(
    xplane_paths: Sequence[Path],
    *,
    prefer_official_markers: bool = True,
    program: str | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> FoundSteps:
    """Find the steps of one session (its hosts' files) and their breakdown from the raw events;
    `program` names the XLA program whose runs are the steps (no other source is tried then).

    Raises ProfileError when a file is not a readable profile, NoStepsFound (a ProfileError)
    when no steps are found, Cancelled when cancel is set.
    """
    paths = [Path(p) for p in xplane_paths]
    if not paths:
        raise ProfileError("no .xplane.pb files to read")
    total = sum(max(p.stat().st_size, 1) if p.exists() else 1 for p in paths)
    done = [0]
    label = [""]

    def tick(n: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("step search cancelled")
        done[0] += n
        if progress:
            progress(min(1.0, done[0] / total), label[0])

    results = []
    for p in paths:
        label[0] = f"reading {p.name}"
        tick(0)
        results.append(_read_host(p, prefer_official_markers, program, tick))
    programs = _programs(results)
    steps = _combine(results)
    if not steps:
        raise NoStepsFound(
            "the hosts' steps do not line up (no step number common to all)", programs
        )
    first = results[0]
    c16 = sum(r.compute_ps[0] for r in results)
    c32 = sum(r.compute_ps[1] for r in results)
    detail = first.detail + (
        f" (steps common to all {len(results)} hosts)" if len(results) > 1 else ""
    )
    if progress:
        progress(1.0, "steps found")
    return FoundSteps(
        source=first.source,
        detail=detail,
        steps=tuple(
            StepBreakdown(step=n, step_time_ms=t, breakdown_ms=b)
            for n, (t, b) in sorted(steps.items())
        ),
        hosts=tuple(r.host for r in results),
        device_compute_16bit_percent=100.0 * c16 / (c16 + c32) if c16 + c32 > 0 else None,
        programs=programs,
        run_interval_ms=first.findings.run_interval_ms,
        run_ms=first.findings.run_ms,
        spans_ps=tuple(s for r in results for s in r.spans_ps),
    )


def _programs(results: list[_HostResult]) -> tuple[ProgramStat, ...]:
    """Each program once across hosts: its runs on the host that ran it most, time summed."""
    merged: dict[str, ProgramStat] = {}
    for r in results:
        for p in r.findings.programs:
            old = merged.get(p.name)
            merged[p.name] = (
                p
                if old is None
                else ProgramStat(p.name, max(p.runs, old.runs), old.time_ms + p.time_ms)
            )
    return tuple(sorted(merged.values(), key=lambda p: (-p.time_ms, p.name)))
