"""Which spans of a Kineto trace are training steps, and where each one ends.

Contract: `find_steps(collector)` returns the steps of one rank from the first source that has
any (the id is `Steps.source`):
  profiler_step   torch.profiler's `ProfilerStep#N` markers on the host (`cpu_op`, `Operator` or
                  `user_annotation`; not their `gpu_user_annotation` copies, which the plugin
                  counts as extra steps);
  optimizer_step  no markers (`export_chrome_trace` without `prof.step()`): a step ends where an
                  `Optimizer.step#…` span ends, so N optimizer steps give N-1 steps;
  trace_span      neither: the whole trace is one step, from its first to its last CPU op (the
                  plugin's fallback), or its first to its last event without CPU ops.
Then the plugin's rules for device work (event_parser.py, StepParser): a step's device work is
what the runtime calls inside its host span launched (by correlation id). On traces whose runtime
calls are in 2021's `Runtime` category (the only ones the plugin links to kernels), each step is
extended to the end of its device work, as the plugin does; on today's traces the plugin keeps
the host spans, and so does tuiprof, so step times equal its own. Either way, trailing steps
that launched no device work, or under 80% of the step before's, are dropped (the profiler
stopped before their kernels were recorded), as the plugin does.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

import numpy as np

from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.columns import Device

TAIL_KEEP_RATIO = 0.8  # the plugin's: a last step with fewer device events is cut short


@dataclass
class Steps:
    """Step spans (µs, as in the file), their numbers, where they came from and what to say."""

    spans: list[tuple[float, float]]
    numbers: list[int]
    source: str
    detail: str
    warnings: list[str] = field(default_factory=list)
    device_lag_us: float | None = None  # median lag of a step's device work behind its host span


def _marked(c: Collector) -> Steps | None:
    if c.step_marks:
        seen: dict[int, tuple[float, float]] = {}
        for ts, end, n in sorted(c.step_marks):
            seen.setdefault(n, (ts, end))
        ordered = sorted(seen.items(), key=lambda kv: kv[1][0])
        return Steps(
            [span for _, span in ordered],
            [n for n, _ in ordered],
            "profiler_step",
            "steps from torch.profiler's ProfilerStep#N markers",
        )
    if len(c.optimizer_marks) >= 2:
        ends = sorted(end for _, end in c.optimizer_marks)
        return Steps(
            list(itertools.pairwise(ends)),
            list(range(1, len(ends))),
            "optimizer_step",
            "no ProfilerStep#N markers: each step ends where an optimizer step "
            "(Optimizer.step#…) ends",
        )
    return None


def _whole(c: Collector) -> Steps | None:
    if c.cpu_lo <= c.cpu_hi:
        return Steps(
            [(c.cpu_lo, c.cpu_hi)],
            [0],
            "trace_span",
            "no step markers (ProfilerStep#N, Optimizer.step): the whole trace as one step, from "
            "its first to its last CPU op, as the PyTorch plugin does",
        )
    if c.lo <= c.hi:
        return Steps(
            [(c.lo, c.hi)],
            [0],
            "trace_span",
            "no step markers and no CPU ops: the whole trace as one step",
        )
    return None


def _device_work(
    dev: Device, steps: Steps
) -> tuple[list[tuple[float, float] | None], list[int], float | None]:
    """Per step: (first start, last end) of the device work its runtime calls launched, and how
    many device events; plus the end of the last unmatched device event before step 0's work
    (None when no runtime call inside a step launched anything: the plugin's is_use_gpu)."""
    n = len(steps.spans)
    work: list[tuple[float, float] | None] = [None] * n
    counts = [0] * n
    events = np.concatenate([dev.kernels[:, [3, 0, 1]], dev.copies[:, [2, 0, 1]]])
    linked = events[events[:, 0] >= 0]
    if not len(linked) or not dev.runtime.any():
        return work, counts, None
    order = np.argsort(linked[:, 0], kind="stable")
    corr = linked[order, 0]
    ids, first, sizes = np.unique(corr, return_index=True, return_counts=True)
    lo = np.minimum.reduceat(linked[order, 1], first)
    hi = np.maximum.reduceat(linked[order, 2], first)
    # the runtime calls that launched something (their host rows, in file order), then which
    # step each ran in: only those calls' columns are copied
    h = dev.host
    launch = dev.runtime.copy()
    rt_corr = h.corr[launch]
    at = np.minimum(np.searchsorted(ids, rt_corr), len(ids) - 1)
    launches = ids[at] == rt_corr
    del rt_corr
    launch[launch] = launches
    at = at[launches]
    spans = np.asarray(steps.spans, dtype=np.float64)
    step = np.searchsorted(spans[:, 0], h.ts[launch], side="right") - 1
    inside = step >= 0
    inside[inside] &= h.end[launch][inside] <= spans[step[inside], 1]
    if not inside.any():
        return work, counts, None
    s_idx, c_idx = step[inside], at[inside]
    w_lo = np.full(n, np.inf)
    w_hi = np.full(n, -np.inf)
    np.minimum.at(w_lo, s_idx, lo[c_idx])
    np.maximum.at(w_hi, s_idx, hi[c_idx])
    per_step = np.bincount(s_idx, weights=sizes[c_idx], minlength=n)
    for i in range(n):
        if per_step[i] > 0:
            work[i] = (float(w_lo[i]), float(w_hi[i]))
            counts[i] = int(per_step[i])
    prev = steps.spans[0][0]
    if work[0] is not None:
        matched = np.zeros(len(ids), dtype=bool)
        matched[c_idx] = True
        unmatched_ends = np.concatenate(
            [events[events[:, 0] < 0, 2], linked[~np.isin(linked[:, 0], ids[matched]), 2]]
        )
        before = unmatched_ends[unmatched_ends < work[0][0]]
        if len(before):
            prev = max(prev, float(before.max()))
    return work, counts, prev


def _align(steps: Steps, work: list[tuple[float, float] | None], prev: float) -> None:
    """The plugin's _update_steps_duration: each step runs to the end of its device work."""
    spans = []
    for (start, end), w in zip(steps.spans, work, strict=True):
        start = max(prev, start)
        end = max(end, start) if w is None else max(end, w[1])
        spans.append((start, end))
        prev = end
    steps.spans = spans


def _drop_tail(steps: Steps, counts: list[int]) -> None:
    if len(steps.spans) < 2:
        return
    last = max((i for i, n in enumerate(counts) if n > 0), default=-1)
    if last < 0:
        return
    keep = last + 1
    if last > 0 and counts[last - 1] * TAIL_KEEP_RATIO > counts[last]:
        keep = last
    dropped = len(steps.spans) - keep
    if dropped > 0:
        steps.spans = steps.spans[:keep]
        steps.numbers = steps.numbers[:keep]
        what = f"the last {dropped} steps: they" if dropped > 1 else "the last step: it"
        steps.warnings.append(
            f"Dropped {what} launched no device work or much less than the step before (the "
            "profiler stopped before it was recorded), as the PyTorch plugin does."
        )


def find_steps(c: Collector, dev: Device, *, ignore_markers: bool = False) -> Steps | None:
    """The steps of one rank's trace, or None when it has no timed events at all.

    `ignore_markers` skips the ProfilerStep#N markers (`tuiprof summary --fallback`)."""
    if ignore_markers:
        c = dataclasses.replace(c, step_marks=[])
    steps = _marked(c) or _whole(c)
    if steps is None:
        return None
    work, counts, prev = _device_work(dev, steps)
    if prev is None:
        return steps
    if c.runtime_2021 > 0:
        _align(steps, work, prev)
        steps.detail += ", each extended to the end of the GPU work it launched (the plugin's rule)"
    else:
        lags = sorted(w[1] - s[1] for w, s in zip(work, steps.spans, strict=True) if w)
        steps.device_lag_us = max(0.0, lags[len(lags) // 2]) if lags else None
    _drop_tail(steps, counts)
    return steps
