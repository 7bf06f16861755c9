"""Summarise a PyTorch profiler (Kineto) session — one trace per rank — into a ProfileSummary.

Contract: `summarize(session, …)` reads every rank's trace (rank.analyse_file), then combines:
the session's steps are the step numbers every rank has, each taken from its slowest rank (a
synchronous job waits for it); ops and kernels are summed over ranks; each rank's own average
goes to `ranks` with the slowest flagged. A rank that cannot be read becomes a warning while
others can; ProfileError when none can. Where tuiprof and torch-tb-profiler differ on purpose
on this trace, a warning says so and by how much. Never imports a framework or textual.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import threading
from collections.abc import Sequence

from tui_prof.model import (
    Environment,
    KernelStat,
    OpStat,
    Precision,
    ProfileError,
    ProfileSummary,
    Progress,
    RankSummary,
    StepBreakdown,
)
from tui_prof.profiles.assemble import assemble, average
from tui_prof.profiles.discover import Session
from tui_prof.profiles.kineto import names
from tui_prof.profiles.kineto.ops import KernelTotals, OpTotals
from tui_prof.profiles.kineto.rank import RankResult, analyse_file
from tui_prof.profiles.kineto.session_efficiency import combine
from tui_prof.profiles.kineto.workers import PARALLEL_FROM
from tui_prof.profiles.timeline import store
from tui_prof.profiles.timeline.kineto import SessionRows

TOP_OPS_PER_SIDE = 100
STRAGGLER_PERCENT = 10.0  # a rank this much slower than the median rank is called out
LAG_NOTE_PERCENT = 10.0  # device work lagging its host span by this share of a step is said
# Traces of this much JSON or more are indexed for the timeline as the summary reads them (the
# size from which the read starts its decode workers; below it, the tab's own read of a whole
# session takes about a second).
INDEX_FROM = PARALLEL_FROM


def _read_ranks(
    session: Session,
    ignore_markers: bool,
    cancel: threading.Event | None,
    report: Progress,
    timeline: SessionRows | None,
) -> tuple[list[RankResult], list[str]]:
    results: list[RankResult] = []
    errors: list[str] = []
    n = len(session.hosts)
    for i, h in enumerate(session.hosts):
        label = f"reading {h.host}" + (f" ({i + 1}/{n})" if n > 1 else "")

        def sub(f: float, i: int = i, label: str = label) -> None:
            report(0.95 * (i + f) / n, label)

        rows = timeline.rank() if timeline is not None else None
        try:
            r = analyse_file(
                h.path,
                h.host,
                ignore_markers=ignore_markers,
                cancel=cancel,
                progress=sub,
                rows=rows,
            )
        except ProfileError as exc:
            if rows is not None:
                rows.close()
            if timeline is not None:  # without this rank it is not stored: read afresh later
                timeline.abandon()
                timeline = None
            if n == 1:
                raise
            errors.append(str(exc))
            continue
        except BaseException:
            if rows is not None:
                rows.close()
            raise
        results.append(r)
        if timeline is not None and rows is not None:
            timeline.add_rank(h.host, rows, r.steps)
    if not results:
        raise ProfileError(f"no rank could be read: {'; '.join(errors)}")
    return results, [f"Could not read {e}" for e in errors]


def _timeline(session: Session, ignore_markers: bool) -> SessionRows | None:
    """The timeline store to write while reading, so the Timeline tab needs no second pass:
    none where no timeline will be opened (headless: store.INDEX_ENV unset), the traces are
    small (the tab reads them in about a second, and a summary of
    many small runs, an experiment's, leaves no store behind each), one is stored already, the
    steps are not the timeline's (markers ignored) or the cache cannot be written."""
    if not store.index_while_reading() or ignore_markers:
        return None
    if _json_bytes(session) < INDEX_FROM or store.exists(session):
        return None
    build = SessionRows(session)
    if build.writer is None:
        build.abandon()
        return None
    return build


def _json_bytes(session: Session) -> int:
    """The traces' JSON size: a gzip file's is in its last 4 bytes (ISIZE, modulo 4 GiB)."""
    total = 0
    for h in session.hosts:
        try:
            size = h.path.stat().st_size
            if h.path.name.endswith(".gz") and size >= 18:
                with open(h.path, "rb") as f:
                    f.seek(-4, os.SEEK_END)
                    size = max(size, int.from_bytes(f.read(4), "little"))
        except OSError:
            continue
        total += size
    return total


def _session_steps(results: Sequence[RankResult]) -> tuple[list[StepBreakdown], str]:
    """Steps every rank has, each from its slowest rank; the note for the step source."""
    with_steps = [r for r in results if r.breakdowns]
    if not with_steps:
        return [], ""
    if len(with_steps) == 1:
        return with_steps[0].breakdowns, ""
    common = set.intersection(*({s.step for s in r.breakdowns} for r in with_steps))
    if not common:
        slowest = max(with_steps, key=lambda r: _mean(r.breakdowns))
        return slowest.breakdowns, f"; no step number in every rank: rank {slowest.name}'s steps"
    by_rank = [{s.step: s for s in r.breakdowns} for r in with_steps]
    steps = [max((m[n] for m in by_rank), key=lambda s: s.step_time_ms) for n in sorted(common)]
    return steps, f"; each step from the slowest of {len(with_steps)} ranks"


def _mean(steps: Sequence[StepBreakdown]) -> float:
    return sum(s.step_time_ms for s in steps) / len(steps) if steps else 0.0


def _ranks(results: Sequence[RankResult]) -> tuple[list[RankSummary], list[str]]:
    if len(results) < 2:
        return [], []
    out: list[RankSummary] = []
    means = {r.name: _mean(r.breakdowns) for r in results if r.breakdowns}
    slowest = max(means, key=lambda k: means[k]) if means else None
    for r in results:
        avg = average(r.breakdowns)
        out.append(
            RankSummary(
                name=r.name,
                rank=r.rank,
                steps=len(r.breakdowns),
                step_time_ms=avg.step_time_ms if avg else None,
                step_time_std_ms=avg.step_time_std_ms if avg else None,
                breakdown_ms=dict(avg.breakdown_ms) if avg else {},
                slowest=r.name == slowest,
            )
        )
    warnings = []
    if slowest is not None and len(means) >= 2:
        median = statistics.median(means.values())
        over = 100.0 * (means[slowest] / median - 1.0) if median > 0 else 0.0
        if over >= STRAGGLER_PERCENT:
            warnings.append(
                f"Rank {slowest} is the slowest: {means[slowest]:.2f} ms per step, {over:.0f}% "
                f"above the median rank ({median:.2f} ms); the others wait for it."
            )
    return out, warnings


def _plugin_notes(results: Sequence[RankResult], steps: Sequence[StepBreakdown]) -> list[str]:
    """Where torch-tb-profiler would show other numbers for this trace, and why."""
    notes = []
    step_ms = _mean(steps)
    today = [r for r in results if not r.runtime_2021 and r.breakdowns]
    runtime = max((r.runtime_ms_per_step for r in today), default=0.0)
    if runtime > 0.0 and step_ms > 0 and runtime >= 0.01 * step_ms:
        notes.append(
            f"torch-tb-profiler shows Runtime 0 for this trace and counts its {runtime:.2f} ms "
            "per step of CUDA/HIP runtime calls (kernel launches, copies, syncs) as CPU Exec or "
            "Other: it predates the cuda_runtime category. tuiprof counts them as Runtime in "
            "the plugin's categories, and as Kernel launch in its own but for calls that wait "
            "for the GPU (…Synchronize, memcpy), whose time the GPU does not cover is All others."
        )
    gpu_marks = sum(r.gpu_step_marks for r in results)
    if gpu_marks:
        copies = "copy" if gpu_marks == 1 else "copies"
        notes.append(
            f"torch-tb-profiler also counts the {gpu_marks} GPU-side {copies} of ProfilerStep#N "
            "(gpu_user_annotation) as steps; tuiprof does not."
        )
    if any(r.dataloader_annotations for r in results):
        notes.append(
            "torch-tb-profiler drops the DataLoader user_annotations of today's traces "
            "(DataLoader 0 there); tuiprof counts them as DataLoader / Input."
        )
    return notes


def _lag_note(results: Sequence[RankResult], step_ms: float) -> str:
    lags = [r.steps.device_lag_us for r in results if r.steps and r.steps.device_lag_us]
    if not lags or step_ms <= 0:
        return ""
    lag_ms = max(lags) / 1000.0
    if 100.0 * lag_ms / step_ms < LAG_NOTE_PERCENT:
        return ""
    return (
        f"; host spans, as the plugin keeps them on today's traces: the GPU finishes a step's "
        f"work about {lag_ms:.1f} ms after its host span ends, so one step's split mixes "
        "neighbouring steps' device work (averages do not)"
    )


def _kernels(results: Sequence[RankResult]) -> list[KernelStat]:
    total: dict[tuple[str, str], KernelTotals] = {}
    for r in results:
        for key, k in r.ops.kernels.items():
            t = total.setdefault(key, KernelTotals())
            t.calls += k.calls
            t.total_us += k.total_us
            t.occupancy_weighted += k.occupancy_weighted
            t.occupancy_weight += k.occupancy_weight
            t.eligible = t.eligible or k.eligible
    out = [
        KernelStat(
            name=name,
            op_name=op,
            occurrences=t.calls,
            total_duration_us=t.total_us,
            tensor_core_eligible=t.eligible,
            uses_tensor_core=names.uses_tensor_core(name),
            occupancy_percent=(
                t.occupancy_weighted / t.occupancy_weight if t.occupancy_weight > 0 else None
            ),
        )
        for (name, op), t in total.items()
    ]
    out.sort(key=lambda k: k.total_duration_us, reverse=True)
    return out


def _ops(results: Sequence[RankResult], flops: dict[str, float]) -> list[OpStat]:
    total: dict[str, OpTotals] = {}
    for r in results:
        for name, o in r.ops.ops.items():
            t = total.setdefault(name, OpTotals())
            t.calls += o.calls
            t.host_self_us += o.host_self_us
            t.device_self_us += o.device_self_us
    out: list[OpStat] = []
    for where, attr in (("Host", "host_self_us"), ("Device", "device_self_us")):
        side = sum(getattr(t, attr) for t in total.values())
        ranked = sorted(total.items(), key=lambda kv: getattr(kv[1], attr), reverse=True)
        for name, t in ranked[:TOP_OPS_PER_SIDE]:
            v = getattr(t, attr)
            if v <= 0:
                break
            out.append(
                OpStat(
                    name,
                    names.op_type(name),
                    where,
                    t.calls,
                    v,
                    100.0 * v / side if side else 0.0,
                    flops=flops.get(name),
                )
            )
    out.sort(key=lambda o: o.total_self_time_us, reverse=True)
    return out


def _environment(session: Session, results: Sequence[RankResult]) -> Environment:
    device_names: list[str] = []
    for r in results:
        for n in r.device_names:
            if n not in device_names:
                device_names.append(n)
    on_device = any(r.on_device for r in results)
    # XLA's word for an AMD GPU of a known architecture, so the hardware table finds its row
    arch = next((r.amd_arch for r in results if r.on_device and r.amd_arch), "")
    return Environment(
        device_type=(f"AMD GPU - {arch}" if arch else "GPU") if on_device else "CPU",
        device_count=sum(r.devices_used for r in results),
        hosts=tuple(h.host for h in session.hosts),
        device_names=tuple(device_names),
        world_size=next((r.world_size for r in results if r.world_size is not None), None),
        compute_capability=next((r.compute_capability for r in results if r.on_device), ""),
    )


def summarize(
    session: Session,
    *,
    force_fallback: bool = False,
    full: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> ProfileSummary:
    """Analyse every rank's trace of one session; `full` changes nothing here (no converter)."""

    def report(f: float, m: str) -> None:
        if progress is not None:
            progress(f, m)

    timeline = _timeline(session, force_fallback)
    try:
        summary = _summarize(session, force_fallback, cancel, report, timeline)
        if timeline is not None and timeline.pending:  # after the ranks' results are let go
            report(0.97, "indexing the timeline")
            with contextlib.suppress(OSError, ValueError):  # a full disk: the tab reads it later
                timeline.finish(cancel)
    finally:
        if timeline is not None:
            timeline.abandon()  # where it was not stored
    report(1.0, "done")
    return summary


def _summarize(
    session: Session,
    force_fallback: bool,
    cancel: threading.Event | None,
    report: Progress,
    timeline: SessionRows | None,
) -> ProfileSummary:
    results, warnings = _read_ranks(session, force_fallback, cancel, report, timeline)
    steps, rank_note = _session_steps(results)
    first = next((r.steps for r in results if r.steps), None)
    if first is None:
        source, detail = "none", "no timed events in the trace"
        warnings.append("No steps found: the trace has no timed events")
    else:
        source = first.source
        detail = first.detail + rank_note + _lag_note(results, _mean(steps))
        if force_fallback:
            detail = "forced; " + detail
    for r in results:
        warnings.extend(r.warnings)
        if r.steps:
            warnings.extend(w for w in r.steps.warnings if w not in warnings)
    ranks, straggler = _ranks(results)
    warnings.extend(straggler)
    warnings.extend(_plugin_notes(results, steps))
    env = _environment(session, results)
    compute = sum(r.ops.compute_us for r in results)
    sixteen = sum(r.ops.compute_16bit_us for r in results)
    prec = None
    if compute:
        p16 = 100.0 * sixteen / compute
        prec = Precision(p16, 100.0 - p16, source="kernels_and_op_types")
    startup_ms, startup_calls = _startup(results)
    device_us: dict[str, float] = {}
    for r in results:
        for name, o in r.ops.ops.items():
            device_us[name] = device_us.get(name, 0.0) + o.device_self_us
    kernels = _kernels(results)
    eff, memory, flops = combine(results, steps, env, device_us, kernels)
    summary = assemble(
        session,
        steps,
        source,
        detail,
        env,
        prec,
        kernels,
        _ops(results, flops),
        warnings,
        framework="pytorch",
        ranks=ranks,
        startup_ms=startup_ms,
        startup_calls=startup_calls,
        efficiency=eff,
        memory=memory,
    )
    metrics = [g for r in results for g in r.gpu_metrics]
    if len(results) == 1:  # one trace: no rank to tell its devices apart
        metrics = [dataclasses.replace(g, rank="") for g in metrics]
    return dataclasses.replace(summary, gpu_metrics=tuple(metrics))


def _startup(results: Sequence[RankResult]) -> tuple[float, list[tuple[str, float]]]:
    """One-off start-up calls inside the steps: ms per average step (the mean over ranks that
    have steps) and each call's total, largest first."""
    per_rank = [sum(r.startup_ms) / len(r.startup_ms) for r in results if r.startup_ms]
    calls: dict[str, float] = {}
    for r in results:
        for name, ms in r.startup_calls.items():
            calls[name] = calls.get(name, 0.0) + ms
    mean = sum(per_rank) / len(per_rank) if per_rank else 0.0
    return mean, sorted(calls.items(), key=lambda kv: -kv[1])
