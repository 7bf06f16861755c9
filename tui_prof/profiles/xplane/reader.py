"""Summarise a TensorBoard/XProf profile session (`*.xplane.pb`, all hosts) into a ProfileSummary.

Contract: TensorBoard's own converter first, so every number it has is its number; where it finds
no steps ("No step marker observed"), tuiprof's own step finder reads the raw XPlane events and
the summary says which step source it used (for a JAX job without markers, the runs of its
train-step XLA program; `step_program` names that program and skips the converter's steps).
Where tuiprof reads the raw events (no official steps, large profiles), the summary also has the
devices (TPU and GPU planes by name) and their utilisation over the profile; the converter's
fast path stays as fast as before. The 16-bit share comes from the steps where the converter has
them, else from the device HLO ops' types, the own steps' kernels or the kernel names. Never
imports TensorFlow or textual.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_prof.model import (
    STEP_SOURCE_OFFICIAL,
    STEP_SOURCE_PROGRAM_RUNS,
    Cancelled,
    Environment,
    KernelStat,
    OpStat,
    Precision,
    ProfileError,
    ProfileSummary,
    ProgramStat,
    Progress,
    StepBreakdown,
    UnreadableProfile,
    os_reason,
)
from tui_prof.profiles import forked
from tui_prof.profiles.assemble import assemble, average, check_numbers, step_time_words
from tui_prof.profiles.discover import Session
from tui_prof.profiles.xplane import convert_worker, converter, memory, op_precision, tb_tables
from tui_prof.profiles.xplane.convert_worker import large_profile_bytes
from tui_prof.profiles.xplane.cost import hlo_efficiency, with_hlo, xla_efficiency
from tui_prof.profiles.xplane.framework import framework_of
from tui_prof.profiles.xplane.memory import memory_use

if TYPE_CHECKING:
    from tui_prof.profiles.xplane.device_ops import DeviceOps
    from tui_prof.profiles.xplane.hlo_cost import HloFlops
    from tui_prof.profiles.xplane.steps import FoundSteps

OFFICIAL_DETAIL = "steps from TensorBoard's converter (official step markers)"
# The plane that keeps the programs' HLO (hlo_cost.METADATA_PLANE, whose import brings numpy)
METADATA_PLANE_BYTES = b"/host:metadata"
AHEAD_NICE = 10  # the read-ahead thread's niceness
# Program runs that leave the device idle for more than this share of the time between them.
IDLE_BETWEEN_RUNS = 0.3


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled()


def _validate(paths: Sequence[Path]) -> None:
    """Open each file once: the converter reports an unreadable file as "not an XSpace profile"."""
    for p in paths:
        try:
            with open(p, "rb") as f:
                size = os.fstat(f.fileno()).st_size
        except OSError as exc:
            raise UnreadableProfile(f"{p.name}: cannot read ({os_reason(exc)})") from exc
        if size == 0:
            raise UnreadableProfile(f"{p.name}: empty file (0 bytes) — the capture wrote nothing")


@dataclass
class _Own:
    """What tuiprof's own step finder returned (or why it found no steps)."""

    steps: list[StepBreakdown]
    source: str
    detail: str
    found: FoundSteps | None = None
    programs: tuple[ProgramStat, ...] = ()


def _own_steps(
    paths: Sequence[Path],
    cancel: threading.Event | None,
    report: Progress,
    lo: float,
    hi: float,
    program: str | None,
) -> _Own:
    """tuiprof's streaming step finder."""
    from tui_prof.profiles.xplane.steps import NoStepsFound, find_steps

    def sub_progress(f: float, m: str) -> None:
        report(lo + (hi - lo) * f, m)

    try:
        found = find_steps(paths, program=program, cancel=cancel, progress=sub_progress)
    except UnreadableProfile:
        raise  # a damaged file is its session's error, not a profile without steps
    except NoStepsFound as exc:
        return _Own([], "none", str(exc), None, exc.programs)
    except ProfileError as exc:
        return _Own([], "none", str(exc))
    return _Own(list(found.steps), found.source, found.detail, found, found.programs)


def _pace_warning(own: _Own) -> list[str]:
    """Program runs that leave the devices idle in between: the host sets the pace."""
    found = own.found
    if own.source != STEP_SOURCE_PROGRAM_RUNS or found is None or not own.steps:
        return []
    interval, run_ms = found.run_interval_ms, found.run_ms
    if not interval or run_ms is None or run_ms >= (1 - IDLE_BETWEEN_RUNS) * interval:
        return []
    idle = 100.0 * (1 - run_ms / interval)
    return [
        f"A run takes {run_ms:.3g} ms but runs start every {interval:.3g} ms: the devices are "
        f"idle {idle:.0f}% of the time between runs, waiting for the host (Python dispatch, "
        "input, synchronisation)."
    ]


def _precision(
    device_type: str,
    official: Precision | None,
    tables: dict[str, Any],
    found: FoundSteps | None,
    kernels: list[KernelStat],
) -> Precision | None:
    """The 16-bit share: the converter's (of its steps), else the device HLO ops', else the
    own steps' device compute, else the kernel names'."""
    if device_type == "CPU":
        return None
    if official is not None:
        return official
    hlo = op_precision.hlo_precision(tables.get(converter.HLO_STATS))
    if hlo is not None:
        return hlo
    p16 = found.device_compute_16bit_percent if found is not None else None
    if p16 is not None:
        return Precision(p16, 100.0 - p16, "steps")
    return op_precision.kernel_precision(kernels)


def summarize(
    session: Session,
    *,
    force_fallback: bool = False,
    full: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    step_program: str | None = None,
) -> ProfileSummary:
    """Analyse every host file of one session; raises ProfileError with a one-line reason.

    Sessions of `large_profile_bytes()` or more are read by tuiprof's streaming reader alone
    (TensorBoard's converter needs about 11× the file's size in memory), unless `full`.
    """
    report = progress or (lambda _f, _m: None)
    paths = [h.path for h in session.hosts]
    _validate(paths)
    _check(cancel)
    if not full and session.size >= large_profile_bytes():
        return _summarize_streaming(session, paths, cancel, report, step_program)
    report(0.05, "running TensorBoard's converter")
    own_path = force_fallback or bool(step_program)

    # The memory profile always (not required: older converters lack it), beside the others
    # or after them (convert_worker.MEMORY_BESIDE).
    beside = convert_worker.summary_beside()

    def hlo_if_no_steps(done: dict[str, Any]) -> tuple[str, ...]:
        """Device HLO ops' types give the 16-bit share where the converter's steps do not."""
        steps = [] if own_path else tb_tables.overview_steps(done[converter.OVERVIEW])
        if steps:
            _report_step_time(session, steps, report)
        memory_after = () if beside else (converter.MEMORY_PROFILE,)
        return memory_after if steps else (converter.HLO_STATS, *memory_after)

    converter.start()  # before the read-ahead thread: a fork is only safe while one runs
    ahead = _Ahead(paths, gpu=_names_gpu_planes(paths))
    converted: dict[str, Any] = {}

    def tables_meanwhile(first: dict[str, Any]) -> None:
        """The op and kernel tables (completed from the device planes where the converter
        names no device op), read while the converter's process makes the memory profile."""
        raw = tb_tables.kernels(first[converter.KERNEL_STATS])
        ops = tb_tables.top_ops(first[converter.OP_STATS])
        converted["raw_kernels"] = raw
        converted["ops"], converted["kernels"] = _with_device_ops(paths, ops, raw, ahead)
        converted["hlo"] = _hlo_flops(paths, gpu=bool(raw))  # GPU kernels: count the HLO's math

    tables = converter.convert(
        paths,
        then=hlo_if_no_steps,
        meanwhile=tables_meanwhile,
        beside=beside,
        decoders={converter.MEMORY_PROFILE: memory.decode},
    )
    _check(cancel)
    overview = tables[converter.OVERVIEW]
    props = tb_tables.overview_properties(overview)
    steps = [] if own_path else tb_tables.overview_steps(overview)
    warnings: list[str] = []
    own = _Own(steps, STEP_SOURCE_OFFICIAL, OFFICIAL_DETAIL)
    utilization = None
    if not steps:
        report(0.5, "no official step markers: finding steps in the raw events")
        own = _own_steps(paths, cancel, report, 0.5, 0.9, step_program)
        if step_program:
            why = ""
        elif force_fallback:
            why = "forced"
        else:
            why = "TensorBoard's converter found no step markers"
        if own.source == "none":
            warnings.append(f"No steps found: {own.detail}")
        elif why:
            own.detail = f"{why}; {own.detail}"
        _check(cancel)
        # The raw events are being read anyway (not on the converter's fast path): the devices.
        report(0.92, "devices")
        from tui_prof.profiles.xplane.utilization import device_utilization

        utilization = device_utilization(paths)
    device_type = props.get("device_type") or props.get("hardware_type") or "Unknown"
    try:
        device_count = int(props.get("device_core_count", "0"))
    except ValueError:
        device_count = 0
    names = tuple(d.name for d in utilization.devices) if utilization is not None else ()
    env = Environment(
        device_type=device_type,
        device_count=device_count or len(names),
        hosts=tuple(h.host for h in session.hosts),
        device_names=names,
        compute_capability=ahead.capability() if "GPU" in device_type.upper() else "",
    )
    official = tb_tables.precision(props) if own.source == STEP_SOURCE_OFFICIAL else None
    training = props.get("is_training")
    prec = _precision(device_type, official, tables, own.found, converted["raw_kernels"])
    ops, kernels = converted["ops"], converted["kernels"]  # + ops only in kernels' annotations
    hlo = converted.get("hlo")
    ops, from_hlo = with_hlo(ops, hlo)
    report(1.0, "done")
    return assemble(
        session,
        own.steps,
        own.source,
        own.detail,
        env,
        prec,
        kernels,
        ops,
        warnings + _pace_warning(own),
        utilization=utilization,
        programs=own.programs,
        framework=ahead.framework(),
        is_training=True if training == "true" else None,
        efficiency=xla_efficiency(ops, own.steps, env, prec, kernels, utilization, hlo, from_hlo),
        memory=memory_use(tables.get(converter.MEMORY_PROFILE)),
    )


def _report_step_time(session: Session, steps: list[StepBreakdown], report: Progress) -> None:
    """The step time as soon as the converter's overview has it, worded as the headline will
    word it: a cold first screen shows it while the op and kernel tables and the memory profile
    are still being read."""
    try:
        check_numbers(session, steps, (), ())
    except UnreadableProfile:
        return  # the summary's own error says it
    avg = average(steps)
    if avg is not None:
        mean, rest = step_time_words(avg, len(steps))
        report(0.4, f"{mean}{rest}; reading ops, kernels and memory …")


def _summarize_streaming(
    session: Session,
    paths: Sequence[Path],
    cancel: threading.Event | None,
    report: Progress,
    step_program: str | None,
) -> ProfileSummary:
    """A large session: steps, breakdown, devices and 16-bit share from the raw events alone."""
    from tui_prof.profiles.xplane.utilization import device_utilization
    from tui_prof.profiles.xplane.xspace import amd_device_type, plane_summary

    mb = session.size / 2**20
    report(0.02, f"large profile ({mb:,.0f} MB): reading it with tuiprof's streaming reader")
    own = _own_steps(paths, cancel, report, 0.05, 0.85, step_program)
    _check(cancel)
    planes = plane_summary(paths)
    amd = amd_device_type(paths) if planes["device_type"] == "GPU" else ""
    env = Environment(
        device_type=amd or planes["device_type"],
        device_count=planes["device_count"],
        hosts=tuple(h.host for h in session.hosts),
        device_names=tuple(planes["device_names"]),
        compute_capability=_compute_capability(paths) if planes["device_type"] == "GPU" else "",
    )
    report(0.9, "devices")
    utilization = device_utilization(paths)
    p16 = own.found.device_compute_16bit_percent if own.found is not None else None
    prec = Precision(p16, 100.0 - p16) if p16 is not None and env.device_type != "CPU" else None
    warnings = [
        f"Large profile ({mb:,.0f} MB): steps and breakdown read by tuiprof's streaming reader; "
        "top ops and kernels need TensorBoard's converter (about 11× the file size in memory): "
        "`tuiprof summary --full`."
    ]
    if own.source == "none":
        warnings.append(f"No steps found: {own.detail}")
    if own.found is not None and step_program is None:
        _store_timeline(session, own.found, cancel, report)
    report(1.0, "done")
    return assemble(
        session,
        own.steps,
        own.source,
        own.detail,
        env,
        prec,
        [],
        [],
        warnings + _pace_warning(own),
        utilization=utilization,
        programs=own.programs,
        framework=framework_of(paths),
        efficiency=hlo_efficiency(
            _hlo_flops(paths, gpu=planes["device_type"] == "GPU"), own.steps, env, utilization
        ),
    )


def _store_timeline(
    session: Session, found: FoundSteps, cancel: threading.Event | None, report: Progress
) -> None:
    """Write the timeline's store with the steps just found, so that the Timeline tab of a
    large session opens from it instead of finding them again (timeline/xspace.py: its events
    read line by line, one line held at a time). Skipped where it is stored already or cannot
    be written, and in headless summaries (store.INDEX_ENV unset); a failure leaves the tab to
    read the session itself."""
    from tui_prof.profiles.timeline import store
    from tui_prof.profiles.timeline.xspace import write_session

    if not store.index_while_reading() or store.exists(session):
        return

    def sub(f: float, _m: str) -> None:
        report(0.92 + 0.07 * f, "indexing the timeline")

    with contextlib.suppress(OSError, ValueError, ProfileError):
        write_session(session, found, cancel, sub, keep=False)


def _hlo_flops(paths: Sequence[Path], gpu: bool) -> HloFlops | None:
    """The GPUs' FLOPs from the profile's own HLO (xplane/hlo_cost.py), where it keeps it; the
    raw decoder (and numpy with it) is imported only for a GPU profile whose bytes name the
    plane that keeps the HLO."""
    if not gpu or not paths or not _mentions(paths, METADATA_PLANE_BYTES):
        return None
    from tui_prof.profiles.xplane.hlo_cost import has_hlo, hlo_flops

    try:
        return hlo_flops(paths) if has_hlo(paths) else None
    except ProfileError:  # a damaged device line: the rest of the summary stands without it
        return None


def _compute_capability(paths: Sequence[Path]) -> str:
    """The GPU planes' compute capability, read only for a GPU profile (gpu_planes: upb, no
    numpy), so a CPU session's first screen does not wait for it."""
    if not paths:
        return ""
    from tui_prof.profiles.xplane.gpu_planes import compute_capability

    return compute_capability(paths)


def _with_device_ops(
    paths: Sequence[Path], ops: list[OpStat], kernels: list[KernelStat], ahead: _Ahead
) -> tuple[list[OpStat], list[KernelStat]]:
    """`device_ops.with_device_ops`, imported only where there are GPU kernels to complete."""
    if not kernels:
        return ops, kernels
    from tui_prof.profiles.xplane.device_ops import with_device_ops

    return with_device_ops(paths, ops, kernels, ahead.device_ops())


class _Ahead:
    """What this process reads of the files itself, in a thread of its own started now: it only
    waits while the converter's process works, so this costs no wall time there. The framework
    (a scan of the bytes), and with `gpu` the GPU planes: the compute capability (an error is the
    converter's to report, as it reads the same file: `""`) and, where the planes' kernels name
    their op only in an annotation, never in the stat the converter reads, the device ops the
    tables will then ask for (an error: None, and they are read again where needed, which
    raises it)."""

    def __init__(self, paths: Sequence[Path], *, gpu: bool) -> None:
        self._framework = ""
        self._capability = ""
        self._device_ops: DeviceOps | None = None
        self._thread = threading.Thread(
            target=self._run, args=(paths, gpu), name="tuiprof-ahead", daemon=True
        )
        self._thread.start()

    def _run(self, paths: Sequence[Path], gpu: bool) -> None:
        # Nothing waits for this before the converter's tables: the overview (the first
        # screen's step time) is what does, so on busy cores this thread yields to it.
        forked.yield_cpu(AHEAD_NICE)
        self._framework = framework_of(paths)
        if gpu:
            self._read_gpu_planes(paths)

    def _read_gpu_planes(self, paths: Sequence[Path]) -> None:
        from tui_prof.profiles.xplane.device_ops import DeviceOps, add_plane, names_ops
        from tui_prof.profiles.xplane.gpu_planes import gpu_planes, plane_capability

        capability: str | None = None
        stat_only = converter_stat = False  # a plane names ops in annotations; in tf_op
        with contextlib.suppress(Exception):
            for plane in gpu_planes(paths):  # one at a time: a plane can be tens of MB
                if capability is None:
                    capability = plane_capability(plane)
                    self._capability = capability or ""
                annotation, stat = names_ops(plane)
                stat_only |= annotation
                converter_stat |= stat
                if capability is not None and converter_stat:
                    break  # the converter names the ops: the tables will not ask
            if stat_only and not converter_stat:
                found = DeviceOps()
                for plane in gpu_planes(paths):
                    add_plane(found, plane)
                self._device_ops = found

    def _join(self) -> None:
        self._thread.join()

    def framework(self) -> str:
        self._join()
        return self._framework

    def capability(self) -> str:
        self._join()
        return self._capability

    def device_ops(self) -> DeviceOps | None:
        self._join()
        return self._device_ops


def _names_gpu_planes(paths: Sequence[Path]) -> bool:
    """Whether a host file names a GPU plane (`/device:GPU:0`), so a CPU session never reads
    its planes."""
    return _mentions(paths, b"/device:GPU:")


def _mentions(paths: Sequence[Path], needle: bytes) -> bool:
    """Whether a host file holds these bytes: a search of the mapped file (milliseconds)."""
    for p in paths:
        with (
            contextlib.suppress(OSError, ValueError),
            open(p, "rb") as f,
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
        ):
            if m.find(needle) >= 0:
                return True
    return False
