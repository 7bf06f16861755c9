"""Summaries cached on disk by (path, size, mtime) of every host file, so reopening is instant.

Contract: `cached_summary(session, compute)` returns the stored ProfileSummary when no host file
changed since it was computed, else computes, stores atomically and returns it. The cache lives
under $TUIPROF_CACHE_DIR, else $XDG_CACHE_HOME/tuiprof, else ~/.cache/tuiprof; a cache that
cannot be read or written is skipped silently (it is an optimisation, never a source of errors).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui_prof import __version__
from tui_prof.model import (
    Allocator,
    DeviceBusy,
    DeviceMemory,
    DeviceUtilization,
    Efficiency,
    Environment,
    Finding,
    GpuMetric,
    GpuStepMetric,
    KernelStat,
    MemoryUse,
    OpStat,
    Precision,
    ProfileSummary,
    ProgramStat,
    RankSummary,
    StepAverage,
    StepBreakdown,
    TensorCoreUse,
    UnmodelledOp,
    Verdict,
)
from tui_prof.profiles.discover import Session, display_path

# 2: top_ops holds every op (the diff needs them all), no longer the first 50.
# 3: device utilisation, XLA programs, the precision's source.
# 4: kernels carry their launch shape (grid, block).
# 5: names made printable (tui_prof.printable) before they are stored.
# 6: efficiency (FLOPs, MFU) and memory; ops carry their FLOPs and bytes.
# 7: PyTorch traces: the plugin's GPU figures (gpu_metrics).
# 8: the verdict's parts (dominant, secondary, start-up) and start-up calls.
SCHEMA = 8


def cache_dir() -> Path:
    if os.environ.get("TUIPROF_CACHE_DIR"):
        return Path(os.environ["TUIPROF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tuiprof"


def cache_key(session: Session, variant: str = "") -> str:
    """Changes whenever a host file, tuiprof's version or the analysis variant changes."""
    h = hashlib.sha256(f"{SCHEMA}|{__version__}|{variant}".encode())
    for host in sorted(session.hosts, key=lambda x: str(x.path)):
        for path in (host.path, *host.extra):
            st = path.stat()
            h.update(b"|" + os.fsencode(os.path.abspath(path)))
            h.update(f"|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def summary_from_dict(d: dict[str, Any]) -> ProfileSummary:
    avg = d.get("average")
    env = d["environment"]
    return ProfileSummary(
        path=d["path"],
        hosts=tuple(d["hosts"]),
        step_source=d["step_source"],
        step_source_detail=d.get("step_source_detail", ""),
        steps=tuple(
            StepBreakdown(
                s["step"], s["step_time_ms"], s["breakdown_ms"], s.get("native_breakdown_ms")
            )
            for s in d["steps"]
        ),
        average=StepAverage(
            step_time_ms=avg["step_time_ms"],
            breakdown_ms=avg["breakdown_ms"],
            step_time_std_ms=avg.get("step_time_std_ms"),
            breakdown_std_ms=avg.get("breakdown_std_ms", {}),
            min_step_time_ms=avg.get("min_step_time_ms"),
            max_step_time_ms=avg.get("max_step_time_ms"),
            native_breakdown_ms=avg.get("native_breakdown_ms"),
        )
        if avg
        else None,
        precision=Precision(**d["precision"]) if d.get("precision") else None,
        tensor_core=TensorCoreUse(**d["tensor_core"]) if d.get("tensor_core") else None,
        top_ops=tuple(
            OpStat(
                o["name"],
                o["type"],
                o["where"],
                o["occurrences"],
                o["total_self_time_us"],
                o["self_time_percent"],
                o.get("flops"),
                o.get("bytes"),
            )
            for o in d["top_ops"]
        ),
        kernels=tuple(KernelStat(**k) for k in d["kernels"]),
        environment=Environment(
            device_type=env["device_type"],
            device_count=env["device_count"],
            hosts=tuple(env["hosts"]),
            device_names=tuple(env.get("device_names", ())),
            world_size=env.get("world_size"),
        ),
        bottleneck=d["bottleneck"],
        recommendations=tuple(d["recommendations"]),
        warnings=tuple(d.get("warnings", ())),
        device_utilization=_utilization(d.get("device_utilization")),
        programs=tuple(ProgramStat(**p) for p in d.get("xla_programs") or ()),
        framework=d.get("framework", ""),
        ranks=tuple(RankSummary(**r) for r in d.get("ranks", ())),
        verdict=_verdict(d.get("verdict")),
        startup_calls=tuple((c["name"], c["ms"]) for c in d.get("startup_calls") or ()),
        gpu_metrics=tuple(_gpu_metric(g) for g in d.get("gpu_metrics", ())),
        efficiency=_efficiency(d.get("efficiency")),
        memory=_memory(d.get("memory")),
    )


def _verdict(d: dict[str, Any] | None) -> Verdict | None:
    if not d:
        return None
    return Verdict(
        kind=d["kind"],
        dominant=Finding(d["category"], d["percent"], d["ms"]),
        secondary=tuple(Finding(**f) for f in d.get("secondary") or ()),
        startup_ms=d.get("startup_ms", 0.0),
    )


def _efficiency(d: dict[str, Any] | None) -> Efficiency | None:
    if not d:
        return None
    return Efficiency(
        flops_source=d["flops_source"],
        flops_total=d["flops_total"],
        flops_per_step=d["flops_per_step"],
        achieved_tflops=d["achieved_tflops"],
        peak_tflops=d["peak_tflops"],
        peak_format=d["peak_format"],
        peak_source=d["peak_source"],
        devices=d["devices"],
        mfu_percent=d["mfu_percent"],
        step_flops=tuple(d.get("step_flops") or ()),
        formats=dict(d.get("formats") or {}),
        modelled_device_percent=d.get("modelled_device_percent"),
        unmodelled=tuple(UnmodelledOp(**u) for u in d.get("unmodelled_ops") or ()),
        memory_bandwidth_gbs=d.get("memory_bandwidth_gbs"),
    )


def _memory(d: dict[str, Any] | None) -> MemoryUse | None:
    if not d:
        return None
    return MemoryUse(
        source=d["source"],
        peak_allocated_mb=d["peak_allocated_mb"],
        peak_reserved_mb=d["peak_reserved_mb"],
        devices=tuple(DeviceMemory(**x) for x in d.get("devices") or ()),
        step_peak_allocated_mb=tuple(d.get("step_peak_allocated_mb") or ()),
        series_mb=tuple((float(t), float(v)) for t, v in d.get("series_mb") or ()),
        top_allocators=tuple(Allocator(**a) for a in d.get("top_allocators") or ()),
        relative=bool(d.get("relative")),
    )


def _gpu_metric(d: dict[str, Any]) -> GpuMetric:
    def figures(x: dict[str, Any]) -> tuple[float, float | None, float | None]:
        return (
            x["gpu_utilization_percent"],
            x["est_sm_efficiency_percent"],
            x["est_achieved_occupancy_percent"],
        )

    return GpuMetric(
        d["rank"],
        d["device"],
        d["name"],
        *figures(d),
        steps=tuple(GpuStepMetric(s["step"], *figures(s)) for s in d["steps"]),
    )


def _utilization(d: dict[str, Any] | None) -> DeviceUtilization | None:
    if not d:
        return None
    return DeviceUtilization(
        profile_ms=d["profile_ms"],
        busy_percent=d["busy_percent"],
        devices=tuple(DeviceBusy(**x) for x in d.get("devices") or ()),
        rule=d.get("rule", "profile"),
    )


def load(key: str) -> ProfileSummary | None:
    try:
        with open(cache_dir() / f"{key}.json", encoding="utf-8") as f:
            return summary_from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(key: str, summary: ProfileSummary) -> None:
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(summary.to_dict(), f)
        os.replace(tmp, directory / f"{key}.json")
    except OSError:
        return


def cached_summary(
    session: Session, compute: Callable[[], ProfileSummary], variant: str = ""
) -> ProfileSummary:
    try:
        key = cache_key(session, variant)
    except OSError:
        return compute()
    hit = load(key)
    if hit is not None:
        return dataclasses.replace(hit, path=display_path(session.path))
    summary = compute()
    store(key, summary)
    return summary
