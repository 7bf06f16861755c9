"""The verdict and what to try next, from a session's average step and the facts of the profile.

Contract: one place for the rules.
- The verdict names the category that dominates the average step (the largest share), with its
  share and time, in XProf's words where they exist ("compute-bound on the GPU", "input-bound",
  "launch-bound"); categories over the thresholds below (TensorBoard's overview: input above
  20% of step time, kernel launch and "all others" at 10%/20%) follow as secondary findings,
  largest first. A minor category is never named over the dominant one.
- One-off start-up calls found inside the steps (context creation, first allocations: see
  kineto.names.is_startup_call) are kept out of the shares and reported as start-up.
- The advice comes from remedies.py with `Facts`: the framework's vocabulary, the device's row
  of the hardware table and the measured 16-bit share.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from tui_prof.model import (
    CATEGORY_LABELS,
    Finding,
    StepAverage,
    TensorCoreUse,
    Verdict,
)
from tui_prof.profiles import remedies
from tui_prof.profiles.remedies import Facts

INPUT_BOUND_PERCENT = 20.0
OTHER_BOUND_PERCENT = 20.0
LAUNCH_BOUND_PERCENT = 10.0
HOST_COMPUTE_PERCENT = 10.0
COMPILE_PERCENT = 10.0
COLLECTIVES_PERCENT = 10.0
DEVICE_TO_DEVICE_PERCENT = 10.0
DEVICE_COMPUTE_PERCENT = 20.0
LOW_16BIT_PERCENT = remedies.PARTLY_16BIT_PERCENT  # below it, mixed precision leads the tips
LOW_MATRIX_UNIT_PERCENT = 50.0
# Start-up below this share of the step is not worth a sentence.
STARTUP_NOTE_PERCENT = 1.0

# Secondary findings: a category at or above its threshold (percent of step time).
THRESHOLDS: dict[str, float] = {
    "device_compute": DEVICE_COMPUTE_PERCENT,
    "input": INPUT_BOUND_PERCENT,
    "kernel_launch": LAUNCH_BOUND_PERCENT,
    "host_compute": HOST_COMPUTE_PERCENT,
    "compilation": COMPILE_PERCENT,
    "device_collectives": COLLECTIVES_PERCENT,
    "device_to_device": DEVICE_TO_DEVICE_PERCENT,
    "other": OTHER_BOUND_PERCENT,
}

PROGRAM_RUNS_TIP = (
    "XLA programs ran repeatedly here: `tuiprof summary --step-program NAME` (in the TUI: `P`) "
    "takes each run of one as a step, e.g. {name} ({runs} runs)."
)


def _kind(category: str, f: Facts) -> str:
    """XProf's word for a dominant category (its overview and bottleneck analysis)."""
    if category == "device_compute":
        return f"compute-bound on the {f.device}"
    if category == "host_compute":
        return "compute-bound on the CPU" if f.cpu_only else "host-bound"
    return {
        "input": "input-bound",
        "output": "output-bound",
        "kernel_launch": "launch-bound",
        "device_collectives": "communication-bound",
        "device_to_device": "copy-bound",
        "compilation": "compilation-bound",
        "other": "host-bound" if not f.cpu_only else "overhead-bound",
    }.get(category, category)


_WHAT: dict[str, str] = {
    "device_compute": "device compute",
    "host_compute": "host compute",
    "input": "waiting for input",
    "output": "output",
    "kernel_launch": "kernel launch",
    "device_collectives": "device collectives",
    "device_to_device": "device-to-device copies",
    "compilation": "compilation",
    "other": "all others (time no op, kernel or copy covers: Python, dispatch, waits)",
}


def _ms(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def shares(
    avg: StepAverage, startup_ms: float = 0.0
) -> tuple[float, dict[str, float], dict[str, float]]:
    """(the step without start-up, ms per category, percent of that step per non-empty category).

    Start-up calls sit in kernel launch (runtime calls); they are not a per-step cost."""
    breakdown = dict(avg.breakdown_ms)
    startup = min(max(0.0, startup_ms), breakdown.get("kernel_launch", 0.0))
    breakdown["kernel_launch"] = breakdown.get("kernel_launch", 0.0) - startup
    step = avg.step_time_ms - startup
    if step <= 0:
        return step, breakdown, {}
    return step, breakdown, {c: 100.0 * v / step for c, v in breakdown.items() if v > 0}


def verdict(
    avg: StepAverage | None,
    f: Facts,
    startup_ms: float = 0.0,
    startup_calls: Sequence[tuple[str, float]] = (),
) -> tuple[str, Verdict | None, list[str]]:
    """(the sentence, its parts, the categories that deserve a remedy: dominant first)."""
    if avg is None:
        return "No steps found: no step-time breakdown.", None, []
    step, breakdown, share = shares(avg, startup_ms)
    startup = avg.step_time_ms - step
    if step <= 0:
        return "Steps of zero length: no step-time breakdown.", None, []
    if not share:
        return "Steps without time in any category.", None, []
    top = max(share, key=lambda c: share[c])
    dominant = Finding(top, share[top], breakdown[top])
    secondary = tuple(
        Finding(c, share[c], breakdown[c])
        for c in sorted(share, key=lambda c: -share[c])
        if c != top and share[c] >= THRESHOLDS.get(c, 100.0)
    )
    kind = _kind(top, f)
    text = (
        f"{kind[0].upper() + kind[1:]}: {_WHAT[top]} is {dominant.percent:.1f}% "
        f"({_ms(dominant.ms)} ms) of the {_ms(step)} ms step."
    )
    if secondary:
        text += (
            " Also: "
            + "; ".join(
                f"{CATEGORY_LABELS[s.category].lower()} {s.percent:.1f}% ({_ms(s.ms)} ms)"
                for s in secondary
            )
            + "."
        )
    if startup > 0 and 100.0 * startup / avg.step_time_ms >= STARTUP_NOTE_PERCENT:
        calls = ", ".join(f"{n} {_ms(ms)} ms" for n, ms in startup_calls[:3])
        text += (
            f" Start-up took {_ms(startup)} ms more and is left out: one-off runtime calls "
            f"({calls or 'context, streams, first allocations and launches'})."
        )
    v = Verdict(kind=kind, dominant=dominant, secondary=secondary, startup_ms=startup)
    return text, v, [top, *(s.category for s in secondary)]


def recommendations(
    flagged: Sequence[str],
    f: Facts,
    tensor_core: TensorCoreUse | None,
    device_compute_percent: float | None = None,
) -> list[str]:
    """Mixed precision first where little compute is 16-bit, then remedies for the flagged
    categories (dominant first), then matrix-unit use; each says how to go 16-bit at most once.

    Mixed precision and the matrix units shorten device compute only: where it is under
    DEVICE_COMPUTE_PERCENT of the step (`device_compute_percent`, None where unknown), those tips
    come after the remedies for what the step waits on, and say how little they can gain."""
    small = device_compute_percent is not None and device_compute_percent < DEVICE_COMPUTE_PERCENT
    compute_tips: list[str] = []
    if (
        not f.cpu_only
        and not f.tpu
        and f.precision is not None
        and f.precision.compute_16bit_percent < LOW_16BIT_PERCENT
    ):
        tip = remedies.mixed_precision(f)
        if tip:
            compute_tips.append(tip)
            f = replace(f, sixteen_bit_said=True)
    tips: list[str] = [] if small else list(compute_tips)
    for cat in flagged:
        tip = remedies.remedy(cat, f)
        if tip and tip not in tips:
            tips.append(tip)
            if cat == "device_compute":  # it gave the 16-bit recipe (or the 32-bit rest's note),
                f = replace(f, compute_said=True, sixteen_bit_said=True)  # TF32, shapes: once
    if (
        tensor_core is not None
        and tensor_core.percent_of_eligible_time is not None
        and tensor_core.percent_of_eligible_time < LOW_MATRIX_UNIT_PERCENT
    ):
        tip = remedies.matrix_unit_use(f, tensor_core.percent_of_eligible_time)
        if tip:
            (compute_tips if small else tips).append(tip)
    if small and compute_tips and device_compute_percent is not None:
        bound = remedies.small_compute_bound(f, device_compute_percent)
        tips.extend(f"{tip} {bound}" for tip in compute_tips)
    return tips


# The changes a new experiment can try, and the words by which advice names them (any format's
# tips: TensorFlow's above, and PyTorch's or JAX's where their readers word them alike).
CHANGES: dict[str, str] = {
    "mixed_precision": r"mixed precision|mixed_float16|mixed_bfloat16|bfloat16|autocast|\bAMP\b|16-bit",
    "xla": r"\bXLA\b(?! program)|jit_compile|torch\.compile",  # not "XLA programs ran …"
    "batch_size": r"larger batch|batch size|per-device batch",
    "input_pipeline": r"input pipeline|prefetch|num_parallel_calls|num_workers|DataLoader|tf\.data",
}


def suggested_changes(recommendations: Sequence[str]) -> tuple[str, ...]:
    """The CHANGES the advice names, in the order it names them (first tip first)."""
    found: list[str] = []
    for tip in recommendations:
        hits = []
        for change, pattern in CHANGES.items():
            m = re.search(pattern, tip, re.IGNORECASE if change != "xla" else 0)
            if m:
                hits.append((m.start(), change))
        found.extend(c for _, c in sorted(hits) if c not in found)
    return tuple(found)
