"""An XSpace session's timeline: per host its threads, per device its streams (XLA lines).

Why these steps: the spans are those of tuiprof's own step finder (xplane.steps.find_steps,
`FoundSteps.spans_ps`), the steps the summary shows wherever the converter found no step markers;
where it did, the converter's step times may differ slightly from these spans (see
docs/timeline.md). Categories are the converter's event types (step_events.classify_device /
classify_host → CATEGORY_OF); GPU planes' derived lines (XLA Ops, Modules) repeat the streams'
kernels and are left out, as the step finder leaves them out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tui_prof.model import Cancelled, ProfileError
from tui_prof.printable import printable
from tui_prof.profiles.discover import Session
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
    classify_device,
    classify_host,
    types_of,
)
from tui_prof.profiles.xplane.steps import find_steps
from tui_prof.profiles.xplane.xspace import XSpaceFile, host_name, read_plane

_OTHER = CATEGORY_CODE["other"]
# xprof's event type → category code; a type the overview folds into none is "other".
_CODE = np.full(256, _OTHER, dtype=np.int8)
for _t, _c in CATEGORY_OF.items():
    _CODE[_t] = CATEGORY_CODE[_c]


def _read_file(
    path: Path,
    names: dict[str, int],
    name_list: list[str],
    base_ps: int,
    tick: Callable[[int], None],
) -> tuple[str, list[Track]]:
    tracks: list[Track] = []
    with XSpaceFile(path) as space:
        host = host_name(path, space)
        for ref in space.planes:
            dev = ref.device
            if not ref.is_host and dev is None:
                continue
            pe = read_plane(
                space,
                ref,
                stats=("correlation_id",),
                skip_derived=dev is not None and dev[0] == "GPU",
                tick=tick,
            )
            classify = classify_host if dev is None else classify_device
            group = host if dev is None else f"{dev[0]} {dev[1]}"
            for le in pe.lines:
                types = types_of(le.metadata_id, pe.meta.event_names, classify)
                cat = _CODE[np.clip(types, 0, 255)]
                uniq, inverse = np.unique(le.metadata_id, return_inverse=True)
                ids = []
                for u in uniq.tolist():
                    n = pe.meta.event_names.get(int(u), "")
                    i = names.get(n)
                    if i is None:
                        i = names[n] = len(name_list)
                        name_list.append(printable(n))
                    ids.append(i)
                nid = np.array(ids, dtype=np.int32)[inverse]
                corr = le.ints["correlation_id"]
                start = (le.start_ps - base_ps).astype(np.float64) / 1e6
                end = (np.maximum(le.end_ps, le.start_ps) - base_ps).astype(np.float64) / 1e6
                name = f"{group} {le.name}" if dev is not None else le.name
                tracks.append(
                    make_track(
                        name or f"line {le.line_id}",
                        "host" if dev is None else "device",
                        group,
                        start,
                        end,
                        nid,
                        cat,
                        np.where(corr == MISSING, -1, corr),
                    )
                )
    tracks.sort(key=lambda t: (t.kind == "device", t.group, -len(t.start)))
    return host, tracks


def read_session(
    session: Session,
    cancel: threading.Event | None = None,
    progress: Callable[[float, str], object] | None = None,
) -> Timeline:
    paths = [h.path for h in session.hosts]
    found = find_steps(
        paths,
        cancel=cancel,
        progress=(lambda f, m: progress(0.5 * f, m)) if progress else None,
    )
    if not found.spans_ps:
        raise ProfileError("no step spans in this profile")
    base = min(s[2] for s in found.spans_ps)
    total = sum(max(p.stat().st_size, 1) for p in paths)
    done = [0]

    def tick(n: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("timeline cancelled")
        done[0] += n
        if progress:
            progress(0.5 + 0.5 * min(1.0, done[0] / total), "reading events")

    names: dict[str, int] = {}
    name_list: list[str] = []
    sources = []
    for p in paths:
        host, tracks = _read_file(p, names, name_list, base, tick)
        spans = [
            StepSpan(num, (b - base) / 1e6, (e - base) / 1e6)
            for h, num, b, e in found.spans_ps
            if h == host
        ]
        sources.append(Source(host, tracks, spans))
    return Timeline(name_list, sources)
