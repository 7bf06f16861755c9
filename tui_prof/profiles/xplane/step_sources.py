"""Which host events mark the training steps, where TensorBoard's converter found none.

Contract: `choose_windows` looks at the host plane's events (with the stats step_num, _r,
group_id, step_name, tf_function_call) and returns the first step source that yields steps, in
the order documented in steps.py, as one Window per step: the marker event and its span.
`tpu_step_windows` takes them from TPU cores' own step markers where the host marks none.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tui_prof.profiles.xplane.line_events import MISSING
from tui_prof.profiles.xplane.xspace import PlaneEvents

_EXPLICIT_MARKER = re.compile(r"^(train|test|TraceContext)[^/]*$")
_TRAIN_FN = re.compile(r"train|step", re.IGNORECASE)
_INFERENCE = re.compile(r"^EagerLocalExecute: __inference_(.+)_\d+$")
KERAS_BATCH = "Profiled batch"

# Names worth reading stats of on a big host plane (the step finder reads no other host stats).
MARKER_CANDIDATE = re.compile(r"^(test|TraceContext)|train|step|Profiled batch", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """One step: its number, its marker's span on the host, and the marker event."""

    step: int
    begin_ps: int
    end_ps: int
    line: int  # index into the host PlaneEvents.lines
    index: int  # event index in that line


@dataclass(frozen=True)
class Choice:
    source: str
    detail: str
    windows: list[Window]
    by_group: bool = False  # the windows' steps are group ids that events carry
    roots: dict[tuple[int, int], int] | None = None  # events that start each step's call tree,
    # where it is not the window's one marker (an XLA:CPU run's thunks); they are compute


def _outermost(host: PlaneEvents, picked: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Drop markers nested inside another picked marker of the same thread."""
    kept = []
    by_line: dict[int, list[int]] = {}
    for li, i in picked:
        by_line.setdefault(li, []).append(i)
    for li, idx in by_line.items():
        le = host.lines[li]
        idx.sort(key=lambda i: (le.start_ps[i], -le.end_ps[i]))
        reach = -1
        for i in idx:
            if le.end_ps[i] <= reach:
                continue
            kept.append((li, i))
            reach = max(reach, int(le.end_ps[i]))
    return kept


def _windows(host: PlaneEvents, picked: list[tuple[int, int]], *, numbered: bool) -> list[Window]:
    picked = _outermost(host, picked)
    picked.sort(key=lambda p: host.lines[p[0]].start_ps[p[1]])
    nums = [host.lines[li].ints.value("step_num", i) for li, i in picked]
    if not numbered or MISSING in nums or len(set(nums)) != len(nums):
        nums = list(range(len(picked)))
    return [
        Window(
            step=int(n),
            begin_ps=int(host.lines[li].start_ps[i]),
            end_ps=int(host.lines[li].end_ps[i]),
            line=li,
            index=i,
        )
        for n, (li, i) in zip(nums, picked, strict=True)
    ]


def _named(host: PlaneEvents, test: Callable[[str], object]) -> list[tuple[int, int]]:
    names = host.meta.event_names
    ids = [k for k, v in names.items() if test(v)]
    out = []
    for li, le in enumerate(host.lines):
        for i in np.flatnonzero(np.isin(le.metadata_id, ids)).tolist():
            out.append((li, i))
    return out


def _group_windows(host: PlaneEvents) -> list[Window]:
    """A preprocessed CPU profile: per group, its longest explicit or named step marker."""
    names = host.meta.event_names
    best: dict[int, Window] = {}
    explicit = [k for k, v in names.items() if _EXPLICIT_MARKER.match(v)]
    for li, le in enumerate(host.lines):
        gid = le.ints["group_id"]
        marks = np.isin(le.metadata_id, explicit)
        marks[list(le.texts.get("step_name", {}))] = True
        for i in np.flatnonzero(marks & (gid != MISSING)).tolist():
            w = Window(int(gid[i]), int(le.start_ps[i]), int(le.end_ps[i]), li, i)
            old = best.get(w.step)
            if old is None or w.end_ps - w.begin_ps > old.end_ps - old.begin_ps:
                best[w.step] = w
    return [best[g] for g in sorted(best)]


def _official_markers(host: PlaneEvents) -> list[Window]:
    names = host.meta.event_names
    picked: list[tuple[int, int]] = []
    named: Counter[str] = Counter()
    explicit = [k for k, v in names.items() if _EXPLICIT_MARKER.match(v)]
    for li, le in enumerate(host.lines):
        marker = np.isin(le.metadata_id, explicit) | (le.ints["_r"] == 1)
        for i in np.flatnonzero(marker & (le.ints["step_num"] != MISSING)).tolist():
            picked.append((li, i))
            named[names.get(int(le.metadata_id[i]), "")] += 1
    if not picked:  # markers without step numbers: the most frequent explicit marker name
        counts = Counter(
            names[int(le.metadata_id[i])]
            for li, i in _named(host, lambda v: bool(_EXPLICIT_MARKER.match(v)))
            for le in [host.lines[li]]
        )
        if counts:
            top = counts.most_common(1)[0][0]
            picked = _named(host, lambda v: v == top)
    elif len(named) > 1:  # several marker names: keep the one that appears most (then outermost)
        top = named.most_common(1)[0][0]
        picked = [
            (li, i) for li, i in picked if names.get(int(host.lines[li].metadata_id[i])) == top
        ]
    return _windows(host, picked, numbered=True)


def _function_calls(host: PlaneEvents) -> tuple[str, list[Window]]:
    """The most-called train-like tf.function: its Python-side call events, else its executions."""
    names = host.meta.event_names
    calls: dict[str, list[tuple[int, int]]] = {}
    for li, le in enumerate(host.lines):
        for i, st in le.stats.items():
            name = names.get(int(le.metadata_id[i]), "")
            if "tf_function_call" in st and _TRAIN_FN.search(name):
                calls.setdefault(name, []).append((li, i))
    if not calls:
        for li, i in _named(host, lambda v: bool(_INFERENCE.match(v))):
            m = _INFERENCE.match(names[int(host.lines[li].metadata_id[i])])
            if m and _TRAIN_FN.search(m.group(1)):
                calls.setdefault(m.group(1), []).append((li, i))
    if not calls:
        return "", []
    name = max(calls, key=lambda k: len(calls[k]))
    return name, _windows(host, calls[name], numbered=False)


def choose_windows(host: PlaneEvents | None, *, prefer_official: bool) -> Choice | None:
    """The first step source, in the documented order, that finds at least one step."""
    if host is None:
        return None
    if prefer_official:
        windows = _group_windows(host)
        if windows:
            return Choice(
                "xprof_groups",
                "steps from the step groups recorded in the profile (group_id stats)",
                windows,
                by_group=True,
            )
        windows = _official_markers(host)
        if windows:
            name = host.meta.event_names.get(
                int(host.lines[windows[0].line].metadata_id[windows[0].index]), ""
            )
            return Choice(
                "step_markers",
                f"steps from the job's own '{name}' step markers, "
                "which TensorBoard's converter did not use",
                windows,
            )
    windows = _windows(host, _named(host, lambda v: v == KERAS_BATCH), numbered=True)
    if windows:
        return Choice(
            "keras_profiled_batch",
            "steps from Keras' 'Profiled batch' events (TensorBoard callback)",
            windows,
        )
    name, windows = _function_calls(host)
    if windows:
        return Choice(
            "tf_function_calls", f"steps from repeated calls of the tf.function '{name}'", windows
        )
    return None


# A TPU core's line of step markers (tsl kStepLineName), which the converter reads by its name on
# TPU cores (xprof xplane_to_step_events.cc, ConvertDeviceTraceXPlaneToStepEvents).
TPU_STEPS_LINE = "Steps"


def tpu_step_windows(devices: Sequence[PlaneEvents]) -> Choice | None:
    """The TPU cores' own step markers, where the host marks none: the events of each core's
    "Steps" line, keyed by their `group_id` as the converter keys them
    (ConvertDeviceStepInfoToStepMarkers), one window per step spanning every core's marker."""
    spans: dict[int, list[int]] = {}
    for pe in devices:
        for le in pe.lines:
            if le.name != TPU_STEPS_LINE or "group_id" not in le.ints:
                continue
            gid = le.ints["group_id"]
            for i in np.flatnonzero(gid != MISSING).tolist():
                lo, hi = int(le.start_ps[i]), int(le.end_ps[i])
                span = spans.setdefault(int(gid[i]), [lo, hi])
                span[0], span[1] = min(span[0], lo), max(span[1], hi)
    if not spans:
        return None
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    windows = [Window(n, lo, hi, -1, k) for k, (n, (lo, hi)) in enumerate(ordered)]
    return Choice(
        "tpu_step_markers",
        f'steps from the TPU cores\' own step markers (their "{TPU_STEPS_LINE}" lines, as '
        "XProf reads them)",
        windows,
    )
