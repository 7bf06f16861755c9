"""Summarise a TensorBoard/XProf profile session (`*.xplane.pb`, all hosts) into a ProfileSummary.

Contract: TensorBoard's own converter first, so every number it has is its number; where it finds
no steps ("No step marker observed"), tuiprof's own step finder reads the raw XPlane events and
the summary says which step source it used. Never imports TensorFlow or textual.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from tui_prof.model import (
    CATEGORIES,
    STEP_SOURCE_OFFICIAL,
    Cancelled,
    Environment,
    ProfileError,
    ProfileSummary,
    StepAverage,
    StepBreakdown,
)
from tui_prof.profiles import advice, cache, converter, tb_tables
from tui_prof.profiles.discover import Session, discover, display_path, host_name

Progress = Callable[[float, str], None]

OFFICIAL_DETAIL = "steps from TensorBoard's converter (official step markers)"


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled()


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
    return StepAverage(
        step_time_ms=st,
        breakdown_ms=means,
        step_time_std_ms=st_sd,
        breakdown_std_ms=sds,
        min_step_time_ms=min(s.step_time_ms for s in steps),
        max_step_time_ms=max(s.step_time_ms for s in steps),
    )


def _validate(paths: Sequence[Path]) -> None:
    for p in paths:
        try:
            size = p.stat().st_size
        except OSError as exc:
            raise ProfileError(f"{p.name}: cannot read ({exc.strerror})") from exc
        if size == 0:
            raise ProfileError(f"{p.name}: empty file (0 bytes) — the capture wrote nothing")


def session_of(path: str | Path) -> Session:
    """The one session a path names (a session dir or one .xplane.pb)."""
    found = discover(path).sessions
    if not found:
        raise ProfileError(f"{path}: no .xplane.pb files here")
    if len(found) > 1:
        raise ProfileError(f"{path}: holds {len(found)} sessions; name one of them")
    return found[0]


def summarize_session(
    session: Session | str | Path,
    *,
    force_fallback: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> ProfileSummary:
    """Analyse every host file of one session; raises ProfileError with a one-line reason."""
    if not isinstance(session, Session):
        session = session_of(session)
    report = progress or (lambda _f, _m: None)
    paths = [h.path for h in session.hosts]
    _validate(paths)
    _check(cancel)
    report(0.05, "running TensorBoard's converter")
    tables = converter.convert(paths)
    _check(cancel)
    overview = tables[converter.OVERVIEW]
    props = tb_tables.overview_properties(overview)
    steps = [] if force_fallback else tb_tables.overview_steps(overview)
    warnings: list[str] = []
    if steps:
        source, detail = STEP_SOURCE_OFFICIAL, OFFICIAL_DETAIL
    else:
        report(0.5, "no official step markers: finding steps in the raw events")
        from tui_prof.profiles.steps import find_steps

        def sub_progress(f: float, m: str) -> None:
            report(0.5 + 0.45 * f, m)

        try:
            found = find_steps(paths, cancel=cancel, progress=sub_progress)
            steps, source, detail = list(found.steps), found.source, found.detail
        except ProfileError as exc:
            source, detail = "none", str(exc)
            warnings.append(f"No steps found: {exc}")
    _check(cancel)
    avg = average(steps)
    device_type = props.get("device_type") or props.get("hardware_type") or "Unknown"
    try:
        device_count = int(props.get("device_core_count", "0"))
    except ValueError:
        device_count = 0
    hosts = tuple(h.host for h in session.hosts)
    env = Environment(device_type=device_type, device_count=device_count, hosts=hosts)
    prec = tb_tables.precision(props) if device_type != "CPU" else None
    kernels = tb_tables.kernels(tables[converter.KERNEL_STATS])
    tc = tb_tables.tensor_core_use(kernels)
    verdict, flagged = advice.bottleneck(avg, device_type)
    recs = advice.recommendations(flagged, device_type, prec, tc)
    report(1.0, "done")
    return ProfileSummary(
        path=display_path(session.path),
        hosts=hosts,
        step_source=source,
        step_source_detail=detail,
        steps=tuple(steps),
        average=avg,
        precision=prec,
        tensor_core=tc,
        top_ops=tuple(tb_tables.top_ops(tables[converter.OP_STATS])),
        kernels=tuple(kernels),
        environment=env,
        bottleneck=verdict,
        recommendations=tuple(recs),
        warnings=tuple(warnings),
    )


def load_summary(
    session: Session | str | Path,
    *,
    use_cache: bool = True,
    force_fallback: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> ProfileSummary:
    """summarize_session through the on-disk cache: what the CLI and the TUI call."""
    if not isinstance(session, Session):
        session = session_of(session)
    sess = session

    def compute() -> ProfileSummary:
        return summarize_session(sess, force_fallback=force_fallback, cancel=cancel, progress=progress)

    if not use_cache:
        return compute()
    return cache.cached_summary(sess, compute, variant="fallback" if force_fallback else "")


__all__ = ["Cancelled", "average", "host_name", "load_summary", "session_of", "summarize_session"]
