"""Summarise a session of an older TensorBoard's tool files (no xplane) into a ProfileSummary.

Contract: the numbers are the ones TensorBoard computed back then and saved per host
(`step_source` "precomputed"): steps, run environment and 16-bit share from
`<host>.overview_page.pb` (else the steps from `<host>.input_pipeline.pb`), top ops from
`<host>.tensorflow_stats.pb`, kernels from `<host>.kernel_stats.pb`; `<host>.trace.json.gz` is
not needed. TF1-era Cloud TPU sessions (`*.overview_page.json`, `*.input_pipeline.json`: no
protobuf) give their steps, TensorCore compute, input and idle time, TPU type and core count
(datatable.py). Several hosts: the steps every host has, each from its slowest host. A host's
damaged file is one line (ProfileError) when it is the one that carries the steps, else a
warning. Imports the schemas from `xprof` only when a legacy session is read.
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

from tui_prof.device_use import MemoryUse
from tui_prof.model import (
    STEP_SOURCE_PRECOMPUTED,
    Cancelled,
    Environment,
    KernelStat,
    OpStat,
    Precision,
    ProfileError,
    ProfileSummary,
    Progress,
    StepBreakdown,
)
from tui_prof.profiles.assemble import assemble
from tui_prof.profiles.discover import LEGACY_MEMORY_SUFFIX, Session, legacy_suffix
from tui_prof.profiles.legacy import datatable, tools

DETAIL = "steps as TensorBoard computed them when the profile was taken (its saved overview)"


def _by_suffix(paths: list[Path]) -> dict[str, Path]:
    """`.overview_page.pb` → path, for one host's files (the host name may hold dots, or be
    absent: a TF1-era bare `overview_page.json`)."""
    return {s: p for p in paths if (s := legacy_suffix(p.name)) is not None}


def _json_steps(files: dict[str, Path], env: dict[str, Any]) -> list[StepBreakdown]:
    """Steps and environment from the TF1-era JSON tool files (overview first)."""
    steps: list[StepBreakdown] = []
    for suffix in (".overview_page.json", ".input_pipeline.json"):
        if suffix not in files:
            continue
        tool = datatable.read(files[suffix])
        if tool.device_type:
            env.setdefault("device_type", tool.device_type)
        if tool.device_name:
            env.setdefault("device_names", [tool.device_name])
        if tool.device_count:
            env.setdefault("device_count", tool.device_count)
        steps = steps or tool.steps
    return steps


def _host_steps(files: dict[str, Path], env: dict[str, Any]) -> tuple[list[StepBreakdown], Any]:
    """One host's steps, and its overview analysis (or None); fills env from the overview."""
    from xprof.protobuf import input_pipeline_pb2, overview_page_pb2

    analysis = None
    pipeline = None
    if not {".overview_page.pb", ".input_pipeline.pb"} & files.keys():
        return _json_steps(files, env), None
    if ".overview_page.pb" in files:
        page = tools.parse(
            files[".overview_page.pb"], overview_page_pb2.OverviewPage, "overview page"
        )
        run = page.run_environment
        env.setdefault("device_type", run.device_type)
        env.setdefault("device_count", run.device_core_count)
        env.setdefault("hostnames", list(run.hostnames.values()))
        analysis = page.analysis if page.HasField("analysis") else None
        pipeline = page.input_analysis if page.HasField("input_analysis") else None
    if (pipeline is None or not pipeline.step_details) and ".input_pipeline.pb" in files:
        pipeline = tools.parse(
            files[".input_pipeline.pb"],
            input_pipeline_pb2.InputPipelineAnalysisResult,
            "input pipeline analysis",
        )
        env.setdefault("device_type", pipeline.hardware_type)
    if pipeline is None:
        return [], analysis
    if pipeline.tag:
        env.setdefault("warnings", []).append(
            "TPU step details (TensorBoard's TPU input-pipeline format) are not read by tuiprof"
        )
        return [], analysis
    return tools.generic_steps(pipeline), analysis


def _combine(per_host: list[list[StepBreakdown]]) -> list[StepBreakdown]:
    """Steps every host has, each from its slowest host."""
    found = [h for h in per_host if h]
    if not found:
        return []
    common = set.intersection(*({s.step for s in h} for h in found))
    return [
        max((s for h in found for s in h if s.step == n), key=lambda s: s.step_time_ms)
        for n in sorted(common)
    ]


def _memory(path: Path) -> tuple[MemoryUse | None, list[str]]:
    """An older session's saved memory profile (the tool's JSON, gzipped)."""
    from tui_prof.profiles.xplane.memory import memory_use

    try:
        with gzip.open(path, "rb") as f:
            return memory_use(json.loads(f.read())), []
    except (OSError, EOFError, ValueError) as exc:
        return None, [f"{path.name}: the saved memory profile cannot be read ({exc})"]


def summarize(
    session: Session,
    *,
    force_fallback: bool = False,
    full: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> ProfileSummary:
    """Read every host's tool files (force_fallback and full do not apply: nothing to recompute)."""
    report = progress or (lambda _f, _m: None)
    env: dict[str, Any] = {}
    per_host: list[list[StepBreakdown]] = []
    precisions: list[Precision] = []
    ops: list[OpStat] = []
    kernels: list[KernelStat] = []
    warnings: list[str] = []
    memory: MemoryUse | None = None
    for i, host in enumerate(session.hosts):
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        report(i / max(len(session.hosts), 1), f"reading {host.host}'s tool files")
        files = _by_suffix([host.path, *host.extra])
        steps, analysis = _host_steps(files, env)
        per_host.append(steps)
        if analysis is not None and (p := tools.precision(analysis)) is not None:
            precisions.append(p)
        try:
            if ".tensorflow_stats.pb" in files:
                ops.extend(tools.top_ops(files[".tensorflow_stats.pb"]))
        except ProfileError as exc:  # the steps stand without the op table
            warnings.append(str(exc))
        if memory is None and LEGACY_MEMORY_SUFFIX in files:
            memory, problem = _memory(files[LEGACY_MEMORY_SUFFIX])
            warnings.extend(problem)
        try:
            if ".kernel_stats.pb" in files:
                kernels.extend(tools.kernels(files[".kernel_stats.pb"]))
        except ProfileError as exc:
            warnings.append(str(exc))
    steps = _combine(per_host)
    warnings += env.get("warnings", [])
    if not steps:
        warnings.append("No steps found: the saved overview holds no per-step details")
    if len(session.hosts) > 1:  # every host's ops in one list: the longest first
        ops.sort(key=lambda o: o.total_self_time_us, reverse=True)
        kernels.sort(key=lambda k: k.total_duration_us, reverse=True)
    device_type = str(env.get("device_type") or "Unknown")
    environment = Environment(
        device_type=device_type,
        device_count=int(env.get("device_count") or 0),
        hosts=tuple(h.host for h in session.hosts),
        device_names=tuple(env.get("device_names") or ()),
    )
    prec = None
    if precisions and device_type != "CPU":
        prec = Precision(
            sum(p.compute_16bit_percent for p in precisions) / len(precisions),
            sum(p.compute_32bit_percent for p in precisions) / len(precisions),
            "precomputed",
        )
    report(1.0, "done")
    return assemble(
        session,
        steps,
        STEP_SOURCE_PRECOMPUTED if steps else "none",
        DETAIL if steps else "the saved overview holds no per-step details",
        environment,
        prec,
        kernels,
        ops,
        warnings,
        memory=memory,
    )
