"""Summarise a TensorBoard/XProf profile session (`*.xplane.pb`, all hosts) into a ProfileSummary.

Contract: TensorBoard's own converter first, so every number it has is its number; where it finds
no steps ("No step marker observed"), tuiprof's own step finder reads the raw XPlane events and
the summary says which step source it used. Never imports TensorFlow or textual.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui_prof.model import (
    STEP_SOURCE_OFFICIAL,
    Cancelled,
    Environment,
    Precision,
    ProfileError,
    ProfileSummary,
    Progress,
    StepBreakdown,
    UnreadableProfile,
    os_reason,
)
from tui_prof.profiles.assemble import assemble
from tui_prof.profiles.discover import Session
from tui_prof.profiles.xplane import converter, tb_tables

OFFICIAL_DETAIL = "steps from TensorBoard's converter (official step markers)"


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled()


def _validate(paths: Sequence[Path]) -> None:
    """Open each file once: the converter reports an unreadable file as "not an XSpace profile"."""
    for p in paths:
        try:
            with open(p, "rb") as f:
                size = os.fstat(f.fileno()).st_size
        except OSError as exc:
            raise UnreadableProfile(f"{p.name}: cannot read ({os_reason(exc)})") from exc
        if size == 0:
            raise UnreadableProfile(f"{p.name}: empty file (0 bytes) — the capture wrote nothing")


def large_profile_bytes() -> int:
    """Sessions at least this big skip the converter unless asked (`TUIPROF_LARGE_MB`, default 200)."""
    try:
        return int(float(os.environ.get("TUIPROF_LARGE_MB", "200")) * 2**20)
    except ValueError:
        return 200 * 2**20


def _own_steps(
    paths: Sequence[Path], cancel: threading.Event | None, report: Progress, lo: float, hi: float
) -> tuple[list[StepBreakdown], str, str, Any]:
    """tuiprof's streaming step finder; (steps, source, detail, found-or-None)."""
    from tui_prof.profiles.xplane.steps import find_steps

    def sub_progress(f: float, m: str) -> None:
        report(lo + (hi - lo) * f, m)

    try:
        found = find_steps(paths, cancel=cancel, progress=sub_progress)
    except UnreadableProfile:
        raise  # a damaged file is its session's error, not a profile without steps
    except ProfileError as exc:
        return [], "none", str(exc), None
    return list(found.steps), found.source, found.detail, found


def summarize(
    session: Session,
    *,
    force_fallback: bool = False,
    full: bool = False,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> ProfileSummary:
    """Analyse every host file of one session; raises ProfileError with a one-line reason.

    Sessions of `large_profile_bytes()` or more are read by tuiprof's streaming reader alone
    (TensorBoard's converter needs about 11× the file's size in memory), unless `full`.
    """
    report = progress or (lambda _f, _m: None)
    paths = [h.path for h in session.hosts]
    _validate(paths)
    _check(cancel)
    if not full and session.size >= large_profile_bytes():
        return _summarize_streaming(session, paths, cancel, report)
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
        steps, source, detail, _ = _own_steps(paths, cancel, report, 0.5, 0.95)
        why = "forced" if force_fallback else "TensorBoard's converter found no step markers"
        if source == "none":
            warnings.append(f"No steps found: {detail}")
        else:
            detail = f"{why}; {detail}"
    _check(cancel)
    device_type = props.get("device_type") or props.get("hardware_type") or "Unknown"
    try:
        device_count = int(props.get("device_core_count", "0"))
    except ValueError:
        device_count = 0
    hosts = tuple(h.host for h in session.hosts)
    env = Environment(device_type=device_type, device_count=device_count, hosts=hosts)
    prec = tb_tables.precision(props) if device_type != "CPU" else None
    kernels = tb_tables.kernels(tables[converter.KERNEL_STATS])
    report(1.0, "done")
    return assemble(
        session,
        steps,
        source,
        detail,
        env,
        prec,
        kernels,
        tb_tables.top_ops(tables[converter.OP_STATS]),
        warnings,
    )


def _summarize_streaming(
    session: Session, paths: Sequence[Path], cancel: threading.Event | None, report: Progress
) -> ProfileSummary:
    """A large session: steps, breakdown, devices and 16-bit share from the raw events alone."""
    from tui_prof.profiles.xplane.xspace import plane_summary

    mb = session.size / 2**20
    report(0.02, f"large profile ({mb:,.0f} MB): reading it with tuiprof's streaming reader")
    steps, source, detail, found = _own_steps(paths, cancel, report, 0.05, 0.9)
    _check(cancel)
    planes = plane_summary(paths)
    env = Environment(
        device_type=planes["device_type"],
        device_count=planes["device_count"],
        hosts=tuple(h.host for h in session.hosts),
        device_names=tuple(planes["device_names"]),
    )
    p16 = getattr(found, "device_compute_16bit_percent", None)
    prec = Precision(p16, 100.0 - p16) if p16 is not None and env.device_type != "CPU" else None
    warnings = [
        f"Large profile ({mb:,.0f} MB): steps and breakdown read by tuiprof's streaming reader; "
        "top ops and kernels need TensorBoard's converter (about 11× the file size in memory): "
        "`tuiprof summary --full`."
    ]
    if source == "none":
        warnings.append(f"No steps found: {detail}")
    report(1.0, "done")
    return assemble(session, steps, source, detail, env, prec, [], [], warnings)
