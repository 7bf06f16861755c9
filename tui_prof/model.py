"""Plain frozen data shared by the core, the CLI and the TUI.

Contract: nothing here imports textual, rich or tensorflow; every number a screen or a report
shows comes from one of these objects, so the TUI and `tuiprof summary` cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tui_prof.device_use import DeviceUtilization, Efficiency, GpuMetric, MemoryUse

# TensorBoard's overview-page step-time categories, in its order, under our JSON names.
CATEGORIES: tuple[str, ...] = (
    "device_compute",
    "device_to_device",
    "device_collectives",
    "host_compute",
    "kernel_launch",
    "input",
    "output",
    "compilation",
    "other",
)

CATEGORY_LABELS: dict[str, str] = {
    "device_compute": "Device compute",
    "device_to_device": "Device to device",
    "device_collectives": "Device collectives",
    "host_compute": "Host compute",
    "kernel_launch": "Kernel launch",
    "input": "Input",
    "output": "Output",
    "compilation": "Compilation",
    "other": "All others",
}

# How the steps of a session were found; "official" means TensorBoard's converter found them.
STEP_SOURCE_OFFICIAL = "official"
# Steps are runs of one XLA program (a jitted JAX train step), found without step markers.
STEP_SOURCE_PROGRAM_RUNS = "xla_program_runs"
# Steps as an older TensorBoard computed them and saved them in its tool files (*.overview_page.pb).
STEP_SOURCE_PRECOMPUTED = "precomputed"

# The PyTorch profiler TensorBoard plugin's overview categories (torch-tb-profiler's ProfileRole),
# in its order, under our JSON names: a Kineto session's second vocabulary (`native_breakdown_ms`).
NATIVE_CATEGORIES: tuple[str, ...] = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
)

NATIVE_LABELS: dict[str, str] = {
    "kernel": "Kernel",
    "memcpy": "Memcpy",
    "memset": "Memset",
    "communication": "Communication",
    "runtime": "Runtime",
    "dataloader": "DataLoader",
    "cpu_exec": "CPU Exec",
    "other": "Other",
}


def _native(d: dict[str, float] | None) -> dict[str, float] | None:
    return None if d is None else {c: d.get(c, 0.0) for c in NATIVE_CATEGORIES}


@dataclass(frozen=True)
class StepBreakdown:
    """One training step: its time and how TensorBoard's categories split it (milliseconds).

    `native_breakdown_ms` is the same step in the profiler's own vocabulary where it has one
    (PyTorch: NATIVE_CATEGORIES); None, and absent from the JSON, for TensorFlow/JAX sessions.
    """

    step: int
    step_time_ms: float
    breakdown_ms: dict[str, float]
    native_breakdown_ms: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "step": self.step,
            "step_time_ms": self.step_time_ms,
            "breakdown_ms": {c: self.breakdown_ms.get(c, 0.0) for c in CATEGORIES},
        }
        if self.native_breakdown_ms is not None:
            d["native_breakdown_ms"] = _native(self.native_breakdown_ms)
        return d


@dataclass(frozen=True)
class StepAverage:
    """Average and standard deviation over steps; std is None where there is one step."""

    step_time_ms: float
    breakdown_ms: dict[str, float]
    step_time_std_ms: float | None = None
    breakdown_std_ms: dict[str, float | None] = field(default_factory=dict)
    min_step_time_ms: float | None = None
    max_step_time_ms: float | None = None
    native_breakdown_ms: dict[str, float] | None = None  # see StepBreakdown

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "step_time_ms": self.step_time_ms,
            "step_time_std_ms": self.step_time_std_ms,
            "min_step_time_ms": self.min_step_time_ms,
            "max_step_time_ms": self.max_step_time_ms,
            "breakdown_ms": {c: self.breakdown_ms.get(c, 0.0) for c in CATEGORIES},
            "breakdown_std_ms": {c: self.breakdown_std_ms.get(c) for c in CATEGORIES},
        }
        if self.native_breakdown_ms is not None:
            d["native_breakdown_ms"] = _native(self.native_breakdown_ms)
        return d


@dataclass(frozen=True)
class Precision:
    """Share of device compute time spent in 16-bit vs 32-bit ops (percent).

    source says what it was measured on: "steps" (the steps' device compute, TensorBoard's
    way), "hlo_ops" (device HLO ops by their types, where there are no steps), "kernel_names"
    (kernels whose names carry a 16-bit type), "precomputed" (an older TensorBoard's file) or
    "kernels_and_op_types" (PyTorch: every GPU kernel, 16-bit by its name or its op's input types).
    `measured` is False where the figure rests on nothing that says a type: kernels none of whose
    names say their number type (XLA's fusions) and no shapes or HLO types, where xprof's rule
    reads every such kernel, bf16 ones included, as 32-bit. The numbers are kept (they are
    TensorBoard's); the faces say the share is unknown and advice ignores it.
    """

    compute_16bit_percent: float
    compute_32bit_percent: float
    source: str = "steps"
    measured: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "compute_16bit_percent": self.compute_16bit_percent,
            "compute_32bit_percent": self.compute_32bit_percent,
            "source": self.source,
            "measured": self.measured,
        }


@dataclass(frozen=True)
class OpStat:
    """A framework op (TensorFlow op) by self time, on the host or a device."""

    name: str
    op_type: str
    where: str  # "Host" or "Device"
    occurrences: int
    total_self_time_us: float
    self_time_percent: float  # of its side's (host or device) total self time
    # Floating-point operations over all its calls (XLA's cost, the profiler's `flops` or its
    # shapes) and bytes it moved (XLA's cost); None where the profile cannot say.
    flops: float | None = None
    bytes_accessed: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.op_type,
            "where": self.where,
            "occurrences": self.occurrences,
            "total_self_time_us": self.total_self_time_us,
            "self_time_percent": self.self_time_percent,
            "flops": self.flops,
            "bytes": self.bytes_accessed,
        }


@dataclass(frozen=True)
class KernelStat:
    """A GPU kernel with its TensorCore eligibility (of the op) and use (of the kernel)."""

    name: str
    op_name: str
    occurrences: int
    total_duration_us: float
    tensor_core_eligible: bool
    uses_tensor_core: bool
    occupancy_percent: float | None = None
    # Launch shape, "x,y,z" ("" where unknown): one kernel launched in two shapes is two rows.
    grid: str = ""
    block: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_name": self.op_name,
            "occurrences": self.occurrences,
            "total_duration_us": self.total_duration_us,
            "tensor_core_eligible": self.tensor_core_eligible,
            "uses_tensor_core": self.uses_tensor_core,
            "occupancy_percent": self.occupancy_percent,
            "grid": self.grid,
            "block": self.block,
        }


@dataclass(frozen=True)
class TensorCoreUse:
    """Kernel time on TensorCores, of all kernel time and of TensorCore-eligible ops' time."""

    percent_of_kernel_time: float
    percent_of_eligible_time: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "percent_of_kernel_time": self.percent_of_kernel_time,
            "percent_of_eligible_time": self.percent_of_eligible_time,
        }


@dataclass(frozen=True)
class Environment:
    """Where the profile was taken."""

    device_type: str  # "GPU", "CPU", "TPU", ...
    device_count: int
    hosts: tuple[str, ...]
    device_names: tuple[str, ...] = ()
    world_size: int | None = None  # distributed jobs that record it (PyTorch's distributedInfo)
    # CUDA compute capability ("8.6") where the profile records it (PyTorch's deviceProperties of
    # an NVIDIA GPU); "" elsewhere. The hardware table reads it where the name is not enough.
    compute_capability: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "device_type": self.device_type,
            "device_count": self.device_count,
            "hosts": list(self.hosts),
            "device_names": list(self.device_names),
        }
        if self.world_size is not None:
            d["world_size"] = self.world_size
        if self.compute_capability:
            d["compute_capability"] = self.compute_capability
        return d


@dataclass(frozen=True)
class RankSummary:
    """One rank (one trace file) of a multi-rank session: its own steps' average.

    `slowest` marks the rank with the longest average step time when there are two or more.
    """

    name: str
    rank: int | None
    steps: int
    step_time_ms: float | None
    step_time_std_ms: float | None
    breakdown_ms: dict[str, float]
    slowest: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rank": self.rank,
            "steps": self.steps,
            "step_time_ms": self.step_time_ms,
            "step_time_std_ms": self.step_time_std_ms,
            "breakdown_ms": {c: self.breakdown_ms.get(c, 0.0) for c in CATEGORIES},
            "slowest": self.slowest,
        }


@dataclass(frozen=True)
class ProgramStat:
    """An XLA program (a jitted function) and how often it ran in the profile.

    time_ms is the device time of its runs where there are devices, else the span of its runs on
    the host (a CPU-only job).
    """

    name: str
    runs: int
    time_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "runs": self.runs, "time_ms": self.time_ms}


@dataclass(frozen=True)
class Finding:
    """One category's share of the average step (ms and percent of the step)."""

    category: str  # a CATEGORIES key
    percent: float
    ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "percent": self.percent, "ms": self.ms}


@dataclass(frozen=True)
class Verdict:
    """What dominates the average step, then the secondary findings, largest first.

    `kind` is XProf's word for the dominant category ("compute-bound", "input-bound",
    "launch-bound", …). `startup_ms` is one-off start-up time (context creation, first
    allocations) found inside the steps and kept out of the shares (0 where none).
    """

    kind: str
    dominant: Finding
    secondary: tuple[Finding, ...] = ()
    startup_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            **self.dominant.to_dict(),
            "secondary": [f.to_dict() for f in self.secondary],
            "startup_ms": self.startup_ms,
        }


@dataclass(frozen=True)
class ProfileSummary:
    """Everything tuiprof knows about one profile session (all its hosts)."""

    path: str
    hosts: tuple[str, ...]
    step_source: str
    step_source_detail: str
    steps: tuple[StepBreakdown, ...]
    average: StepAverage | None
    precision: Precision | None
    tensor_core: TensorCoreUse | None
    top_ops: tuple[OpStat, ...]  # every op, by self time (the diff needs all); views cut
    kernels: tuple[KernelStat, ...]  # every kernel row, by total time
    environment: Environment
    bottleneck: str
    recommendations: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    device_utilization: DeviceUtilization | None = None
    programs: tuple[ProgramStat, ...] = ()  # XLA programs run, most device time first
    # Set by readers that know it ("pytorch" for Kineto traces); "" leaves the JSON as it was.
    framework: str = ""
    # Multi-rank sessions (PyTorch: one trace per rank): each rank's average, the slowest flagged.
    ranks: tuple[RankSummary, ...] = ()
    # The verdict's parts (None without steps); `bottleneck` is its sentence.
    verdict: Verdict | None = None
    # One-off start-up runtime calls (name, ms in the steps), largest first, where found.
    startup_calls: tuple[tuple[str, float], ...] = ()
    # PyTorch traces: the plugin's GPU utilisation, SM efficiency and occupancy per device.
    gpu_metrics: tuple[GpuMetric, ...] = ()
    efficiency: Efficiency | None = None
    memory: MemoryUse | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self._core_dict()
        d["efficiency"] = self.efficiency.to_dict() if self.efficiency else None
        d["memory"] = self.memory.to_dict() if self.memory else None
        if self.framework:
            d["framework"] = self.framework
        if self.gpu_metrics:
            d["gpu_metrics"] = [g.to_dict() for g in self.gpu_metrics]
        if self.ranks:
            d["ranks"] = [r.to_dict() for r in self.ranks]
            slowest = next((r.name for r in self.ranks if r.slowest), None)
            d["slowest_rank"] = slowest
        return d

    def _core_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "hosts": list(self.hosts),
            "step_source": self.step_source,
            "step_source_detail": self.step_source_detail,
            "steps": [s.to_dict() for s in self.steps],
            "average": self.average.to_dict() if self.average else None,
            "precision": self.precision.to_dict() if self.precision else None,
            "tensor_core": self.tensor_core.to_dict() if self.tensor_core else None,
            "top_ops": [o.to_dict() for o in self.top_ops],
            "kernels": [k.to_dict() for k in self.kernels],
            "environment": self.environment.to_dict(),
            "bottleneck": self.bottleneck,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "startup_calls": [{"name": n, "ms": ms} for n, ms in self.startup_calls],
            "recommendations": list(self.recommendations),
            "warnings": list(self.warnings),
            "device_utilization": (
                self.device_utilization.to_dict() if self.device_utilization else None
            ),
            "xla_programs": [p.to_dict() for p in self.programs],
        }


# What long work reports as it goes: (fraction done 0..1, what it is doing). The result is ignored,
# so a TUI can pass `post_message` (which returns bool) directly.
Progress = Callable[[float, str], object]


class ProfileError(Exception):
    """A profile that cannot be read; the message is one line meant for the user."""


class UnreadableProfile(ProfileError):
    """The file itself cannot be read (permission, truncated, damaged): its session's error,
    never merely "no steps found" in an otherwise readable profile."""


def os_reason(exc: OSError) -> str:
    """Why a file could not be read, in the words users know ("permission denied")."""
    return (exc.strerror or str(exc)).lower()


class Cancelled(Exception):
    """The caller's cancel event was set; every long analysis raises this one type."""


class RunStatus(StrEnum):
    """A run's state; the values are the strings the results store records (and JSON shows)."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"  # exited non-zero, could not start, or was killed
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"  # tuiprof died or was stopped while it ran
    STOPPED = "stopped"  # the user stopped it
    QUEUED = "queued"  # submitted to a cluster, waiting for a node with the resources it asks for


# The names the runner, the store and the report use (the same members).
RUN_PENDING = RunStatus.PENDING
RUN_RUNNING = RunStatus.RUNNING
RUN_FINISHED = RunStatus.FINISHED
RUN_FAILED = RunStatus.FAILED
RUN_TIMEOUT = RunStatus.TIMEOUT
RUN_INTERRUPTED = RunStatus.INTERRUPTED
RUN_STOPPED = RunStatus.STOPPED
RUN_QUEUED = RunStatus.QUEUED


@dataclass(frozen=True)
class RunRecord:
    """One run of one variant of an experiment, as stored; metrics hold each metric's final value."""

    run_id: str
    variant: str
    repeat: int  # 0-based; warm-up runs have is_warmup=True and do not count
    status: RunStatus
    is_warmup: bool = False
    started_at: float | None = None  # Unix time
    ended_at: float | None = None
    wall_time_s: float | None = None
    exit_code: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    run_dir: str = ""  # the run's own TensorBoard logdir
    log_path: str = ""
    error: str | None = None
    profiler_port: int | None = None
    progress: str = ""  # e.g. "epoch 3/5", from the job's reports
    attempt: int = 1  # 2+ when `tuiprof run --resume` ran it again after an interrupted attempt
    log_tail: str = ""  # last lines of the run's output, kept for failed runs
    metrics_path: str = ""  # the run's JSON-lines metrics file (the whole series)
    node: str = ""  # the cluster node it ran on ("" for this machine)
    backend_ref: str | None = None  # the cluster's id of the attempt (a Ray submission id)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ExperimentRecord:
    """A stored experiment: its spec's essentials and every run so far."""

    name: str
    directory: str
    baseline: str
    variants: tuple[str, ...]
    metrics: tuple[str, ...]  # always includes "wall_time_s"
    repeats: int
    runs: tuple[RunRecord, ...]
