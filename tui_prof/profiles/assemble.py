"""What every reader shares once it has steps: averages, Tensor Core use, the verdict and advice.

Contract: a reader (xplane, kineto, legacy …) finds steps, devices, ops and kernels in its own
format and hands them to `assemble`, so the same rules judge every format. Pure; no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from tui_prof.device_use import DeviceUtilization, Efficiency, MemoryUse
from tui_prof.model import (
    CATEGORIES,
    NATIVE_CATEGORIES,
    Environment,
    KernelStat,
    OpStat,
    Precision,
    ProfileSummary,
    ProgramStat,
    RankSummary,
    StepAverage,
    StepBreakdown,
    TensorCoreUse,
    UnreadableProfile,
)
from tui_prof.profiles import advice, remedies
from tui_prof.profiles.discover import Session, display_path
from tui_prof.profiles.hardware import row_of, vendor_of
from tui_prof.profiles.hardware_table import DeviceSpec
from tui_prof.profiles.kernel_names import says_its_type


def fmt_ms(v: float | None) -> str:
    """A time in ms as every face prints it: three significant digits, whole ms from 100."""
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def step_time_words(avg: StepAverage, n: int) -> tuple[str, str]:
    """The step time as the headline writes it: the mean, then its spread and the steps, e.g.
    ("21.3 ms", " ± 0.41 ms per step  (8 steps, 20.9–21.9 ms)"). One place, as the first
    numbers a cold start shows (the analysis' progress) must read as the headline after it."""
    rest = f" ± {fmt_ms(avg.step_time_std_ms)} ms" if avg.step_time_std_ms is not None else ""
    rest += f" per step  ({n} step{'s' if n != 1 else ''}"
    if avg.min_step_time_ms is not None and n > 1:
        rest += f", {fmt_ms(avg.min_step_time_ms)}–{fmt_ms(avg.max_step_time_ms)} ms"
    return f"{fmt_ms(avg.step_time_ms)} ms", rest + ")"


def average(steps: Sequence[StepBreakdown]) -> StepAverage | None:
    """Mean and sample standard deviation (n-1) over steps, as TensorBoard's overview computes them."""
    if not steps:
        return None
    n = len(steps)

    def mean_std(values: list[float]) -> tuple[float, float | None]:
        m = sum(values) / n
        if n < 2:
            return m, None
        return m, math.sqrt(max(0.0, sum((v - m) ** 2 for v in values) / (n - 1)))

    st, st_sd = mean_std([s.step_time_ms for s in steps])
    means: dict[str, float] = {}
    sds: dict[str, float | None] = {}
    for c in CATEGORIES:
        means[c], sds[c] = mean_std([s.breakdown_ms.get(c, 0.0) for s in steps])
    native: dict[str, float] | None = None
    if all(s.native_breakdown_ms is not None for s in steps):
        native = {
            c: sum((s.native_breakdown_ms or {}).get(c, 0.0) for s in steps) / n
            for c in NATIVE_CATEGORIES
        }
    return StepAverage(
        step_time_ms=st,
        breakdown_ms=means,
        step_time_std_ms=st_sd,
        breakdown_std_ms=sds,
        min_step_time_ms=min(s.step_time_ms for s in steps),
        max_step_time_ms=max(s.step_time_ms for s in steps),
        native_breakdown_ms=native,
    )


def tensor_core_use(ks: Sequence[KernelStat]) -> TensorCoreUse | None:
    total = sum(k.total_duration_us for k in ks)
    if total <= 0:
        return None
    used = sum(k.total_duration_us for k in ks if k.uses_tensor_core)
    eligible = sum(k.total_duration_us for k in ks if k.tensor_core_eligible)
    used_of_eligible = sum(
        k.total_duration_us for k in ks if k.tensor_core_eligible and k.uses_tensor_core
    )
    return TensorCoreUse(
        percent_of_kernel_time=100.0 * used / total,
        percent_of_eligible_time=100.0 * used_of_eligible / eligible if eligible > 0 else None,
    )


def device_row(env: Environment) -> DeviceSpec | None:
    """The hardware table's row for a profile's devices: a model's name first (PyTorch's
    deviceProperties, XLA's device planes), else the device type ("TPU v4", "AMD GPU - gfx942"),
    else the CUDA compute capability (an A10G, an RTX card: the architecture's formats)."""
    return row_of((*env.device_names, env.device_type), env.compute_capability)


# Where the 16-bit share comes from types (HLO ops', PyTorch ops' inputs), it is measured.
TYPED_SOURCES = ("hlo_ops", "kernels_and_op_types")


def measured_precision(prec: Precision | None, kernels: Sequence[KernelStat]) -> Precision | None:
    """The 16-bit share where it measures something: from types, or from kernel names of which
    some say their type. XLA's fusion kernels say none, so xprof's name rule reads a bf16 JAX job
    on a GPU as 0% 16-bit; advice must not tell it to try mixed precision."""
    if prec is None or prec.source in TYPED_SOURCES:
        return prec
    if kernels and not any(says_its_type(k.name) for k in kernels):
        return None
    return prec


def facts(
    env: Environment,
    prec: Precision | None,
    framework: str,
    is_training: bool | None = None,
    has_events: bool = False,
) -> remedies.Facts:
    spec = device_row(env)
    vendor = spec.vendor if spec is not None else ""
    for name in (env.device_type, *env.device_names):
        vendor = vendor or vendor_of(name)
    return remedies.Facts(
        framework=framework,
        device_type=env.device_type,
        spec=spec,
        vendor=vendor,
        precision=prec,
        is_training=is_training,
        has_events=has_events,
    )


def matrix_units(env: Environment) -> str:
    """The vendor's word for the profile's matrix units ("Tensor Cores", "Matrix Cores",
    "MXU"); "" where the device's vendor is unknown."""
    return facts(env, None, "").matrix_units


# The longest time a profile may hold: a day. Longer, or not finite, is a damaged file, refused here
# (where numbers enter the summary) rather than drawn as a bar no terminal can hold.
MAX_MS = 86_400_000.0


def check_numbers(
    session: Session,
    steps: Sequence[StepBreakdown],
    ops: Sequence[OpStat],
    kernels: Sequence[KernelStat],
) -> None:
    """UnreadableProfile, naming the file, for a time that is not finite, negative or absurd."""

    def bad(ms: float) -> bool:
        return not (-1e-3 <= ms <= MAX_MS)  # NaN fails both; rounding may leave -1e-12

    def refuse(what: str, ms: float) -> UnreadableProfile:
        return UnreadableProfile(
            f"{session.file_names}: damaged times ({what} of {ms!r} ms; "
            "times must be finite, not negative and at most a day)"
        )

    for s in steps:
        for what, ms in (("a step", s.step_time_ms), *s.breakdown_ms.items()):
            if bad(ms):
                raise refuse(what if what == "a step" else f"step {s.step}'s {what}", ms)
    for what, us in (
        *((f"op {o.name}", o.total_self_time_us) for o in ops),
        *((f"kernel {k.name}", k.total_duration_us) for k in kernels),
    ):
        if bad(us / 1000):
            raise refuse(what, us / 1000)


def assemble(
    session: Session,
    steps: list[StepBreakdown],
    source: str,
    detail: str,
    env: Environment,
    prec: Precision | None,
    kernels: list[KernelStat],
    ops: list[OpStat],
    warnings: list[str],
    *,
    utilization: DeviceUtilization | None = None,
    programs: Sequence[ProgramStat] = (),
    framework: str = "",
    ranks: Sequence[RankSummary] = (),
    is_training: bool | None = None,
    startup_ms: float = 0.0,
    startup_calls: Sequence[tuple[str, float]] = (),
    efficiency: Efficiency | None = None,
    memory: MemoryUse | None = None,
) -> ProfileSummary:
    """The verdict and advice come from the same rules whichever reader found the numbers;
    a profile without steps gets how to mark them (and the programs that could be steps);
    `framework` picks the advice's vocabulary (remedies.BY_FRAMEWORK), the device's row of the
    hardware table its number formats; `startup_ms` (per step) is kept out of the verdict."""
    check_numbers(session, steps, ops, kernels)
    avg = average(steps)
    tc = tensor_core_use(kernels)
    measured = measured_precision(prec, kernels)
    if prec is not None and measured is None:
        prec = dataclasses.replace(prec, measured=False)
    f = facts(env, measured, framework, is_training, session.has_events)
    sentence, verdict, flagged = advice.verdict(avg, f, startup_ms, startup_calls)
    compute_share = (
        advice.shares(avg, startup_ms)[2].get("device_compute", 0.0)
        if verdict is not None and avg is not None
        else None
    )
    tips = advice.recommendations(flagged, f, tc, compute_share)
    if avg is None:
        repeated = [p for p in programs if p.runs >= 2]
        if repeated and "TPU" not in env.device_type:  # TPU events carry no launch ids
            tips.insert(
                0, advice.PROGRAM_RUNS_TIP.format(name=repeated[0].name, runs=repeated[0].runs)
            )
        tips.insert(0, remedies.step_markers(f))
    # Names from the file are data: the reader seam (load.summarize_session) makes them printable.
    return ProfileSummary(
        path=display_path(session.path),
        hosts=env.hosts,
        step_source=source,
        step_source_detail=detail,
        steps=tuple(steps),
        average=avg,
        precision=prec,
        tensor_core=tc,
        top_ops=tuple(ops),
        kernels=tuple(kernels),
        environment=env,
        bottleneck=sentence,
        recommendations=tuple(tips),
        warnings=tuple(warnings),
        device_utilization=utilization,
        programs=tuple(programs),
        framework=framework,
        ranks=tuple(ranks),
        efficiency=efficiency,
        memory=memory,
        verdict=verdict,
        startup_calls=tuple(startup_calls),
    )
