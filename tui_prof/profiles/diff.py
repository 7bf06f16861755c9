"""Op-by-op and kernel-by-kernel difference of two profiles, or of two sets of profiles.

Contract: pure, from ProfileSummary objects to a ProfileDiff; no I/O. Times are per step: an
op's total self time in a profile ÷ that profile's steps (a kernel's total time likewise). A side
may hold several profiles (an experiment variant's runs): its value is the mean over them and its
spread their standard deviation; an op missing from one of them counts 0 there. Where a profile
has no steps, every time is per profile instead, and the diff says so. Ops are keyed by (where,
name), kernels by name (summed over the ops that launch them). Rows are sorted by |delta|, the
effect on step time, largest first; delta = B − A, so negative means B spends less.

What the deltas add up to: ops' self times do not overlap within one side (host or device), so
the sum of one side's op deltas is the change in that side's op time per step. It equals the
change in step time only where that side's ops fill the step; the rest is time outside any op
(Python, gaps, idle) on that side. Host and device ops overlap each other: never add them up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_prof.model import ProfileSummary

PER_STEP = "step"
PER_PROFILE = "profile"

ONLY_IN_A = "only_in_a"
ONLY_IN_B = "only_in_b"
IN_BOTH = "both"


@dataclass(frozen=True)
class DiffRow:
    """One op or kernel in A and B (milliseconds and calls per step, or per profile)."""

    name: str
    where: str  # ops: "Host" or "Device" (as the reader says); kernels: "Device"
    kind: str  # ops: the op type; kernels: the ops that launch it, comma-separated
    a_ms: float
    b_ms: float
    a_calls: float
    b_calls: float
    status: str  # IN_BOTH, ONLY_IN_A or ONLY_IN_B
    a_sd_ms: float | None = None  # spread over A's profiles; None with one profile
    b_sd_ms: float | None = None

    @property
    def delta_ms(self) -> float:
        return self.b_ms - self.a_ms

    @property
    def change_percent(self) -> float | None:
        """B against A in percent; None where A is zero (an op that appears)."""
        return 100.0 * self.delta_ms / self.a_ms if self.a_ms > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "where": self.where,
            "type": self.kind,
            "a_ms": self.a_ms,
            "b_ms": self.b_ms,
            "delta_ms": self.delta_ms,
            "change_percent": self.change_percent,
            "a_calls": self.a_calls,
            "b_calls": self.b_calls,
            "status": self.status,
            "a_sd_ms": self.a_sd_ms,
            "b_sd_ms": self.b_sd_ms,
        }


@dataclass(frozen=True)
class DiffSide:
    """What one side of the diff is: its profiles, their steps and step time."""

    label: str
    paths: tuple[str, ...]
    steps: int  # over all its profiles
    step_time_ms: float | None  # mean over its profiles of their mean step time
    step_time_sd_ms: float | None  # over its profiles; None with fewer than two
    device_type: str
    has_ops: bool
    has_kernels: bool
    # Means over its profiles where every one has them (else None): see EFFICIENCY_FIELDS.
    efficiency: dict[str, float | None] = field(default_factory=dict)

    @property
    def profiles(self) -> int:
        return len(self.paths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "paths": list(self.paths),
            "profiles": self.profiles,
            "steps": self.steps,
            "step_time_ms": self.step_time_ms,
            "step_time_sd_ms": self.step_time_sd_ms,
            "device_type": self.device_type,
            **{k: self.efficiency.get(k) for k in EFFICIENCY_FIELDS},
        }


@dataclass(frozen=True)
class Total:
    a_ms: float
    b_ms: float

    @property
    def delta_ms(self) -> float:
        return self.b_ms - self.a_ms

    def to_dict(self) -> dict[str, float]:
        return {"a_ms": self.a_ms, "b_ms": self.b_ms, "delta_ms": self.delta_ms}


@dataclass(frozen=True)
class ProfileDiff:
    """A against B: step time, every op and kernel, and what to keep in mind reading it."""

    a: DiffSide
    b: DiffSide
    per: str  # PER_STEP or PER_PROFILE
    ops: tuple[DiffRow, ...]
    kernels: tuple[DiffRow, ...]
    notes: tuple[str, ...] = ()

    @property
    def step_time(self) -> Total | None:
        if self.a.step_time_ms is None or self.b.step_time_ms is None:
            return None
        return Total(self.a.step_time_ms, self.b.step_time_ms)

    @property
    def only_in_a(self) -> list[str]:
        return [r.name for r in self.ops if r.status == ONLY_IN_A]

    @property
    def only_in_b(self) -> list[str]:
        return [r.name for r in self.ops if r.status == ONLY_IN_B]

    def op_totals(self) -> dict[str, Total]:
        """Sum of op times per side of the machine ("Host", "Device"); see the module docstring."""
        out: dict[str, Total] = {}
        for r in self.ops:
            t = out.get(r.where, Total(0.0, 0.0))
            out[r.where] = Total(t.a_ms + r.a_ms, t.b_ms + r.b_ms)
        return out

    def kernel_total(self) -> Total:
        return Total(sum(r.a_ms for r in self.kernels), sum(r.b_ms for r in self.kernels))

    def delta_se(self, row: DiffRow) -> float | None:
        """Standard error of a row's delta (Welch), where both sides have several profiles."""
        if row.a_sd_ms is None or row.b_sd_ms is None:
            return None
        return math.sqrt(row.a_sd_ms**2 / self.a.profiles + row.b_sd_ms**2 / self.b.profiles)

    def to_dict(self) -> dict[str, Any]:
        step = self.step_time
        return {
            "per": self.per,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "step_time": step.to_dict() if step else None,
            "ops": [r.to_dict() for r in self.ops],
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "kernels": [r.to_dict() for r in self.kernels],
            "kernels_only_in_a": [r.name for r in self.kernels if r.status == ONLY_IN_A],
            "kernels_only_in_b": [r.name for r in self.kernels if r.status == ONLY_IN_B],
            "totals": {
                "ops": {w: t.to_dict() for w, t in sorted(self.op_totals().items())},
                "kernels": self.kernel_total().to_dict(),
            },
            "efficiency": self.efficiency_changes(),
            "notes": list(self.notes),
        }

    def efficiency_changes(self) -> dict[str, dict[str, float | None]]:
        """MFU, FLOP rate, FLOPs per step and peak memory of A and B, where either has them."""
        out: dict[str, dict[str, float | None]] = {}
        for k in EFFICIENCY_FIELDS:
            va, vb = self.a.efficiency.get(k), self.b.efficiency.get(k)
            if va is None and vb is None:
                continue
            delta = vb - va if va is not None and vb is not None else None
            out[k] = {"a": va, "b": vb, "delta": delta}
        return out


# -- computing ---------------------------------------------------------------------------
Key = tuple[str, str]  # (where, name)


@dataclass
class _Acc:
    """One op or kernel over a side's profiles: per-profile times and calls, normalised."""

    kind: str
    ms: list[float]
    calls: list[float]


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None
    return m, math.sqrt(max(0.0, sum((v - m) ** 2 for v in values) / (n - 1)))


def _divisor(s: ProfileSummary, per: str) -> float:
    return float(len(s.steps)) if per == PER_STEP else 1.0


def _op_rows(profiles: Sequence[ProfileSummary], per: str) -> dict[Key, _Acc]:
    """Per-profile ms and calls of each (where, name), zero where a profile lacks it."""
    out: dict[Key, _Acc] = {}
    n = len(profiles)
    for i, s in enumerate(profiles):
        d = _divisor(s, per)
        for o in s.top_ops:
            acc = out.setdefault((o.where, o.name), _Acc(o.op_type, [0.0] * n, [0.0] * n))
            acc.ms[i] += o.total_self_time_us / 1000.0 / d
            acc.calls[i] += o.occurrences / d
    return out


def _kernel_rows(
    profiles: Sequence[ProfileSummary], per: str
) -> tuple[dict[Key, _Acc], dict[Key, list[str]]]:
    """Kernels by name, summed over the op rows a reader splits them into."""
    out: dict[Key, _Acc] = {}
    launched_by: dict[Key, list[str]] = {}
    n = len(profiles)
    for i, s in enumerate(profiles):
        d = _divisor(s, per)
        for k in s.kernels:
            key = ("Device", k.name)
            acc = out.setdefault(key, _Acc("", [0.0] * n, [0.0] * n))
            acc.ms[i] += k.total_duration_us / 1000.0 / d
            acc.calls[i] += k.occurrences / d
            ops = launched_by.setdefault(key, [])
            if k.op_name and k.op_name not in ops:
                ops.append(k.op_name)
    return out, launched_by


def _rows(
    a: dict[Key, _Acc], b: dict[Key, _Acc], kinds: dict[Key, str] | None = None
) -> tuple[DiffRow, ...]:
    rows = []
    for key in a.keys() | b.keys():
        ra, rb = a.get(key), b.get(key)
        a_ms, a_sd = _mean_sd(ra.ms) if ra else (0.0, None)
        b_ms, b_sd = _mean_sd(rb.ms) if rb else (0.0, None)
        first = ra if ra is not None else rb
        kind = kinds.get(key, "") if kinds is not None else (first.kind if first else "")
        rows.append(
            DiffRow(
                name=key[1],
                where=key[0],
                kind=kind,
                a_ms=a_ms,
                b_ms=b_ms,
                a_calls=sum(ra.calls) / len(ra.calls) if ra else 0.0,
                b_calls=sum(rb.calls) / len(rb.calls) if rb else 0.0,
                status=IN_BOTH if ra and rb else (ONLY_IN_A if ra else ONLY_IN_B),
                a_sd_ms=a_sd if ra else None,
                b_sd_ms=b_sd if rb else None,
            )
        )
    rows.sort(key=lambda r: (-abs(r.delta_ms), -max(r.a_ms, r.b_ms), r.where, r.name))
    return tuple(rows)


def _side(label: str, profiles: Sequence[ProfileSummary]) -> DiffSide:
    stepped = [s.average.step_time_ms for s in profiles if s.average is not None and s.steps]
    st, sd = _mean_sd(stepped) if len(stepped) == len(profiles) else (None, None)
    types = sorted({s.environment.device_type for s in profiles})
    return DiffSide(
        label=label,
        paths=tuple(s.path for s in profiles),
        steps=sum(len(s.steps) for s in profiles),
        step_time_ms=st,
        step_time_sd_ms=sd,
        device_type="/".join(types),
        has_ops=any(s.top_ops for s in profiles),
        has_kernels=any(s.kernels for s in profiles),
        efficiency=_efficiency(profiles),
    )


# What a diff compares beyond time, by the JSON names `tuiprof summary` uses.
EFFICIENCY_FIELDS = ("mfu_percent", "achieved_tflops", "flops_per_step", "peak_allocated_mb")


def _efficiency(profiles: Sequence[ProfileSummary]) -> dict[str, float | None]:
    def value(s: ProfileSummary, k: str) -> float | None:
        if k == "peak_allocated_mb":
            return s.memory.peak_allocated_mb if s.memory is not None else None
        return getattr(s.efficiency, k) if s.efficiency is not None else None

    out: dict[str, float | None] = {}
    for k in EFFICIENCY_FIELDS:
        values = [value(s, k) for s in profiles]
        known = [v for v in values if v is not None]
        out[k] = sum(known) / len(known) if known and len(known) == len(values) else None
    return out


def _notes(a: DiffSide, b: DiffSide, per: str) -> list[str]:
    notes = []
    if per == PER_PROFILE:
        notes.append(
            "Some profiles have no steps: times are per profile (the whole capture), not per "
            "step, so captures of different lengths do not compare."
        )
    if a.profiles == 1 and b.profiles == 1:
        notes.append(
            "One profile per side, so no spread: small changes may be noise "
            "(diff an experiment's variants to see it)."
        )
    elif a.profiles == 1 or b.profiles == 1:
        notes.append("One side has a single profile: its spread is unknown.")
    if a.device_type != b.device_type:
        notes.append(f"A ran on {a.device_type}, B on {b.device_type}.")
    for side, name in ((a, "A"), (b, "B")):
        if not side.has_ops and (a.has_ops or b.has_ops):
            notes.append(
                f"{name} has no op table (a large profile read by the streaming reader? "
                "try --full): ops are left out rather than shown as gone."
            )
    return notes


def diff_summaries(
    a: ProfileSummary | Sequence[ProfileSummary],
    b: ProfileSummary | Sequence[ProfileSummary],
    *,
    label_a: str | None = None,
    label_b: str | None = None,
) -> ProfileDiff:
    """Compare A with B (each one profile, or several of the same job: means and spreads)."""
    pa = [a] if isinstance(a, ProfileSummary) else list(a)
    pb = [b] if isinstance(b, ProfileSummary) else list(b)
    if not pa or not pb:
        raise ValueError("each side of a diff needs at least one profile")
    per = PER_STEP if all(s.steps for s in (*pa, *pb)) else PER_PROFILE
    side_a = _side(label_a or pa[0].path, pa)
    side_b = _side(label_b or pb[0].path, pb)
    ops: tuple[DiffRow, ...] = ()
    if side_a.has_ops and side_b.has_ops:
        ops = _rows(_op_rows(pa, per), _op_rows(pb, per))
    ka, by_a = _kernel_rows(pa, per)
    kb, by_b = _kernel_rows(pb, per)
    kinds = {
        key: ", ".join(dict.fromkeys(by_a.get(key, []) + by_b.get(key, [])))
        for key in ka.keys() | kb.keys()
    }
    kernels = _rows(ka, kb, kinds)
    return ProfileDiff(
        a=side_a,
        b=side_b,
        per=per,
        ops=ops,
        kernels=kernels,
        notes=tuple(_notes(side_a, side_b, per)),
    )
