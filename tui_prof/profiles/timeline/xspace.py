"""An XSpace session's timeline: per host its threads, per device its streams (XLA lines).

Why these steps: the spans are those of tuiprof's own step finder (xplane.steps.find_steps,
`FoundSteps.spans_ps`), the steps the summary shows wherever the converter found no step markers;
where it did, the converter's step times may differ slightly from these spans (see
docs/timeline.md). Categories are the converter's event types (step_events.classify_device /
classify_host, with_launches on a host with devices → CATEGORY_OF); GPU planes' derived lines
(XLA Ops, Modules) repeat the streams' kernels and are left out, as the step finder leaves them
out. TPU cores keep every line XProf shows (Steps, XLA Modules, XLA Ops, …, in that order); as
the summary counts a core's work, only its op lines (step_events.TPU_OP_LINES) are work, XLA's
collective ops as collectives; its step markers, its programs' runs (which also span the gaps
between their ops) and its other lines (`XLA TraceMe`: waits) are drawn as `other`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tui_prof.model import Cancelled, ProfileError
from tui_prof.printable import printable
from tui_prof.profiles import heap
from tui_prof.profiles.discover import Session
from tui_prof.profiles.timeline import store
from tui_prof.profiles.timeline.model import (
    CATEGORY_CODE,
    Source,
    StepSpan,
    Timeline,
    Track,
    make_track,
)
from tui_prof.profiles.xplane.line_events import MISSING
from tui_prof.profiles.xplane.step_events import (
    CATEGORY_OF,
    TPU_OP_LINES,
    classify_device,
    classify_host,
    classify_tpu,
    is_executor,
    types_of,
    with_launches,
)
from tui_prof.profiles.xplane.steps import FoundSteps, find_steps
from tui_prof.profiles.xplane.xspace import DERIVED_LINE_IDS, XSpaceFile, host_name

_INFO_STATS = ("level 0", "tf_op", "hlo_op", "hlo_module")
# A TPU core's lines as XProf names them (tsl xplane_schema): its step markers, then its
# programs' runs and their ops; SparseCores the same.
TPU_LINE_ORDER = (
    "Steps",
    "XLA Modules",
    "XLA Ops",
    "Async XLA Ops",
    "Sparse Core Steps",
    "Sparse Core Modules",
    "Sparse Core Ops",
)
_OTHER = CATEGORY_CODE["other"]
# xprof's event type → category code; a type the overview folds into none is "other".
_CODE = np.full(256, _OTHER, dtype=np.int8)
for _t, _c in CATEGORY_OF.items():
    _CODE[_t] = CATEGORY_CODE[_c]


def info_text(stats: dict[str, str]) -> str:
    """What an XSpace event records of its op: the TF annotation's input shapes (`level 0`'s
    `#shape=(half[4,1];int32[1])#`), the op (`level 0`, `tf_op`), the XLA op and module; ''
    where none."""
    parts = []
    ann = stats.get("level 0", "")
    op, _, rest = ann.partition("#")
    if "shape=(" in rest:
        shapes = rest.split("shape=(", 1)[1].split(")", 1)[0]
        parts.append(f"inputs {shapes.replace(';', ', ')}")
    op = op or stats.get("tf_op", "")
    if op and not op.endswith(":"):  # JAX's kernels say `XlaModule:`: nothing
        parts.append(f"op {op}")
    if stats.get("hlo_op"):
        module = stats.get("hlo_module")
        parts.append(f"XLA {stats['hlo_op']}" + (f" ({module})" if module else ""))
    return " · ".join(parts)


def _infos(texts: dict[str, dict[int, str]], n: int, ids: dict[str, int], infos: list[str]) -> Any:
    """Per event of a line: its info id (into `infos`, shared by the session), -1 for none.
    Each distinct combination of the stats is worded once (a line repeats a few ops' stats
    over its events, so the work is per combination, not per event)."""
    cols = [(name, col) for name, col in texts.items() if col]
    out = np.full(n, -1, dtype=np.int32)
    if not cols:
        return out
    codes = np.full((n, len(cols)), -1, dtype=np.int64)
    values: list[list[str]] = []
    for j, (_, col) in enumerate(cols):
        table: dict[str, int] = {}
        idx = np.fromiter(col.keys(), dtype=np.int64, count=len(col))
        codes[idx, j] = np.fromiter(
            (table.setdefault(v, len(table)) for v in col.values()), dtype=np.int64, count=len(col)
        )
        values.append(list(table))
    # one integer per event for its combination (mixed radix), so finding the distinct ones is
    # a 1-D unique, not a row-wise sort
    if math.prod(len(v) + 1 for v in values) < 2**62:
        key = np.zeros(n, dtype=np.int64)
        for j in range(len(cols)):
            key = key * (len(values[j]) + 1) + (codes[:, j] + 1)
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        combos = codes[first]
    else:  # too many distinct values to number them together: sort the rows
        combos, inverse = np.unique(codes, axis=0, return_inverse=True)
        uniq = combos
    per_combo = np.full(len(uniq), -1, dtype=np.int32)
    for c, row in enumerate(combos.tolist()):
        text = info_text({cols[j][0]: values[j][v] for j, v in enumerate(row) if v >= 0})
        if not text:
            continue
        k = ids.get(text)
        if k is None:
            k = ids[text] = len(infos)
            infos.append(printable(text))
        per_combo[c] = k
    out[:] = per_combo[inverse.reshape(-1)]
    return out


def _file_tracks(
    path: Path,
    names: dict[str, int],
    name_list: list[str],
    info_ids: dict[str, int],
    infos: list[str],
    base_ps: int,
    tick: Callable[[int], None],
) -> Iterator[Track]:
    """The file's tracks, one per line, each made as its line is read (in file order)."""
    with XSpaceFile(path) as space:
        host = host_name(path, space)
        for ref in space.planes:
            dev = ref.device
            if not ref.is_host and dev is None:
                continue
            meta = space.metadata(ref)
            wanted = {"correlation_id", *_INFO_STATS}
            stat_ids = {k: v for k, v in meta.stat_names.items() if v in wanted}
            derived = DERIVED_LINE_IDS if dev is not None and dev[0] == "GPU" else None
            tpu = dev is not None and dev[0] == "TPU"
            classify = classify_host if dev is None else classify_tpu if tpu else classify_device
            launches = dev is None and any(p.device is not None for p in space.planes)
            executor = (
                np.array([k for k, v in meta.event_names.items() if is_executor(v)], np.int64)
                if launches
                else None
            )
            group = host if dev is None else f"{dev[0]} {dev[1]}"
            # line by line, each made a track at once: one line's decoded events at a time
            for size, le in space.lines(
                ref, stat_ids, frozenset(_INFO_STATS), meta.stat_names, skip_ids=derived
            ):
                tick(size)
                if le is None or not len(le.start_ps):
                    continue
                types = types_of(le.metadata_id, meta.event_names, classify)
                corr = le.ints["correlation_id"]
                if executor is not None:  # a host with devices: its launches, as xprof's
                    ran = (corr != MISSING) | np.isin(le.metadata_id, executor)
                    types = with_launches(types, ran)
                cat = _CODE[np.clip(types, 0, 255)]
                if tpu and le.name not in TPU_OP_LINES:
                    cat[:] = _OTHER  # markers, program runs, waits: not work; the ops show it
                uniq, inverse = np.unique(le.metadata_id, return_inverse=True)
                ids = []
                for u in uniq.tolist():
                    n = meta.event_names.get(int(u), "")
                    i = names.get(n)
                    if i is None:
                        i = names[n] = len(name_list)
                        name_list.append(printable(n))
                    ids.append(i)
                nid = np.array(ids, dtype=np.int32)[inverse]
                start = (le.start_ps - base_ps).astype(np.float64) / 1e6
                end = (np.maximum(le.end_ps, le.start_ps) - base_ps).astype(np.float64) / 1e6
                name = f"{group} {le.name}" if dev is not None else le.name
                yield make_track(
                    name or f"line {le.line_id}",
                    "host" if dev is None else "device",
                    group,
                    start,
                    end,
                    nid,
                    cat,
                    np.where(corr == MISSING, -1, corr),
                    _infos(le.texts, len(start), info_ids, infos),
                )
                del le


def shown_order(t: Track) -> tuple[bool, str, int, int]:
    """Host threads, then each device's lines (a TPU's in XProf's order), busiest first."""
    return (t.kind == "device", t.group, _line_rank(t), -len(t.start))


def _line_rank(t: Track) -> int:
    """A TPU core's lines in XProf's order (steps, programs, ops), then the others."""
    line = t.name.removeprefix(f"{t.group} ")
    return TPU_LINE_ORDER.index(line) if line in TPU_LINE_ORDER else len(TPU_LINE_ORDER)


def read_session(
    session: Session,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
) -> Timeline | None:
    """Find the steps and read the events into the store; None where it was stored (load it
    from there), else the timeline (the cache cannot be written)."""
    paths = [h.path for h in session.hosts]
    found = find_steps(
        paths,
        cancel=cancel,
        progress=(lambda f, m: progress(0.5 * f, m)) if progress else None,
    )
    heap.release()  # the step finder's columns
    return write_session(
        session, found, cancel, (lambda f, m: progress(0.5 + 0.5 * f, m)) if progress else None
    )


def write_session(
    session: Session,
    found: FoundSteps,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
    *,
    keep: bool = True,
) -> Timeline | None:
    """The session's tracks with the steps `found` (the summary's own, where it found them),
    written to the store line by line as they are read, so no more than one line's events
    are held; None where stored, else the timeline, kept in memory (the cache cannot be
    written; with `keep` False, nothing is read then). Raises OSError where the store fails
    midway."""
    if not found.spans_ps:
        raise ProfileError("no step spans in this profile")
    paths = [h.path for h in session.hosts]
    labels = [h.host for h in session.hosts]  # one per file, unlike recorded hostnames
    base = min(s[2] for s in found.spans_ps)
    total = sum(max(p.stat().st_size, 1) for p in paths)
    done = [0]

    def tick(n: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("timeline cancelled")
        done[0] += n
        if progress:
            progress(min(1.0, done[0] / total), "reading events")

    names: dict[str, int] = {}
    name_list: list[str] = []
    info_ids: dict[str, int] = {}
    infos: list[str] = []
    try:
        writer: store.Writer | None = store.Writer(session)
    except OSError:
        if not keep:
            return None
        writer = None
    sources = []
    try:
        for p, label in zip(paths, labels, strict=True):
            spans = [
                StepSpan(num, (b - base) / 1e6, (e - base) / 1e6)
                for f, num, b, e in found.spans_ps
                if f == str(p)
            ]
            tracks = _file_tracks(p, names, name_list, info_ids, infos, base, tick)
            if writer is not None:
                writer.source(label, spans, tracks, order=shown_order)
            else:
                sources.append(Source(label, sorted(tracks, key=shown_order), spans))
        if writer is None:
            return Timeline(name_list, sources, infos)
        writer.finish(name_list, infos)
        writer = None
        return None
    finally:
        if writer is not None:
            writer.abandon()
