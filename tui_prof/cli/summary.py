"""`tuiprof summary PATH`: every session under PATH, as a Rich report, JSON, Markdown or CSV.

Exit codes: 0 all sessions summarised; 1 some sessions, files or directories could not be read
(each is one line and a JSON `errors` entry; the rest are still printed);
2 nothing to summarise (missing path, no profiles). Errors go to stderr, one line each.
"""

from __future__ import annotations

import argparse
import re
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from tui_prof.printable import printable, strict_json

if TYPE_CHECKING:  # the model is imported where used: the converter's process starts before it
    from tui_prof.model import ProfileSummary, Progress


def register(sub: Any) -> None:
    p = sub.add_parser(
        "summary",
        help="step-time breakdown of every profile session under PATH",
        description="Summarise every profile session under PATH (a logdir, run, session or "
        ".xplane.pb; TensorFlow and JAX xplane profiles on GPU, TPU or CPU, and older "
        "TensorBoard tool files, *.overview_page.pb and friends). Without step markers, a JAX "
        "job's steps are the runs of its jitted train-step XLA program. PyTorch profiler traces "
        "are sessions too: *.pt.trace.json[.gz] from torch.profiler's tensorboard_trace_handler "
        "(one file per rank, grouped as the PyTorch TensorBoard plugin groups them), other "
        "*.json[.gz] whose head reads as a Kineto trace (export_chrome_trace), and any trace file "
        "named as PATH. Their JSON adds the plugin's own categories (native_breakdown_ms: kernel, "
        "memcpy, memset, communication, runtime, dataloader, cpu_exec, other) and, with several "
        "ranks, ranks and slowest_rank.",
    )
    p.add_argument(
        "path",
        help="logdir, run dir, session dir, one profile file or one PyTorch trace (.json[.gz])",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json", action="store_const", dest="format", const="json", help="one JSON object"
    )
    fmt.add_argument(
        "--markdown", action="store_const", dest="format", const="markdown", help="Markdown tables"
    )
    fmt.add_argument(
        "--csv", action="store_const", dest="format", const="csv", help="one CSV row per step"
    )
    p.add_argument(
        "--no-cache", action="store_true", help="recompute instead of reading the summary cache"
    )
    p.add_argument(
        "--fallback",
        action="store_true",
        help="ignore official step markers and use tuiprof's own step finder (to cross-check it); "
        "PyTorch traces: ignore ProfilerStep#N (steps from optimizer steps, else the whole trace)",
    )
    p.add_argument(
        "--step-program",
        metavar="NAME",
        help="steps are the runs of this XLA program (a jitted function: `jit_train_step`, "
        "`train_step` or `PjitFunction(train_step)`), not the step markers or the program "
        "tuiprof picks; the programs a profile ran are listed in its summary",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="always run TensorBoard's converter, even on profiles of $TUIPROF_LARGE_MB (200) MB "
        "or more, which are otherwise read by tuiprof's streaming reader (no op/kernel tables)",
    )
    add_peak_argument(p)
    p.set_defaults(func=run, format="rich")


def add_peak_argument(p: argparse.ArgumentParser) -> None:
    """`--peak-tflops`, as summary, diff and the TUI take it."""
    p.add_argument(
        "--peak-tflops",
        metavar="TFLOPS",
        type=peak_tflops,
        help="MFU against this dense peak per device (TFLOP/s) instead of the hardware table's "
        "for the device and the number format the math ran in",
    )


def peak_tflops(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of TFLOP/s: {text!r}")
    return v


def _status_progress(status: Any, label: str) -> Progress:
    """A progress callback that writes into a Rich status line."""

    def report(fraction: float, message: str) -> None:
        status.update(f"{label}: {message} ({fraction:.0%})")

    return report


def _start_converter(sessions: Any, args: argparse.Namespace) -> bool:
    """The converter's process (started by `main` before the parser) is kept where an XSpace
    session needs it (not in the cache), else stopped; the first such session's tools are asked
    for now, while this process imports the readers."""
    from tui_prof.profiles.xplane import convert_worker

    converting = []
    if any(s.format == "xplane" for s in sessions):
        from tui_prof.profiles.prefetch import cached

        converting = [
            s for s in sessions if s.format == "xplane" and (args.no_cache or not cached(s))
        ]
    if not converting:
        convert_worker.process().abandon()
        return False
    first = converting[0]
    if args.full or first.size < convert_worker.large_profile_bytes():
        convert_worker.process().ask_ahead([h.path for h in first.hosts])
    return True


def _err(msg: str) -> None:
    print(f"tuiprof: {printable(msg)}", file=sys.stderr)


def _md(name: str) -> str:
    """A name from a trace as a Markdown table cell (no cell breaks, no broken code spans)."""
    return "`" + name.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def to_markdown(summaries: list[ProfileSummary]) -> str:
    from tui_prof.model import CATEGORIES, CATEGORY_LABELS

    out: list[str] = []
    for s in summaries:
        out.append(f"## {s.path}\n")
        avg = s.average
        out.append(f"- Hosts: {', '.join(s.hosts)}")
        out.append(f"- Device: {s.environment.device_type} × {s.environment.device_count}")
        out.append(f"- Steps: {len(s.steps)} ({s.step_source_detail})")
        u = s.device_utilization
        if u is not None:
            busiest = max(u.devices, key=lambda d: d.busy_percent)
            duty = u.rule == "duty_cycle"
            where = "TPU duty cycle" if duty else f"of the {u.profile_ms:.1f} ms profile"
            of = f"{len(u.devices)} cores" if duty else f"mean of {len(u.devices)}"
            out.append(
                f"- Device utilisation: {u.busy_percent:.1f}% {where} "
                f"({of}; busiest {busiest.name} {busiest.busy_percent:.1f}%)"
            )
        if avg:
            sd = f" ± {avg.step_time_std_ms:.2f}" if avg.step_time_std_ms is not None else ""
            out.append(f"- Step time: {avg.step_time_ms:.2f}{sd} ms")
        if s.precision and not s.precision.measured:
            out.append(
                "- 16-bit share of device compute: unknown (no kernel name, shape or HLO op "
                "says its number type)"
            )
        elif s.precision:
            source = "" if s.precision.source == "steps" else f" (from {s.precision.source})"
            out.append(
                f"- 16-bit share of device compute: {s.precision.compute_16bit_percent:.1f}%"
                + source
            )
        out.extend(_markdown_efficiency(s))
        out.append(f"- Bottleneck: {s.bottleneck}\n")
        if s.programs:
            out.append("| XLA program | Runs | Time ms |\n|---|---:|---:|")
            out.extend(f"| {_md(p.name)} | {p.runs} | {p.time_ms:.3f} |" for p in s.programs[:8])
            out.append("")
        if not s.steps and (s.top_ops or s.kernels):
            out.append("| Top op / kernel | Where | Self ms |\n|---|---|---:|")
            out.extend(
                f"| {_md(o.name)} | {o.where} | {o.total_self_time_us / 1000:.3f} |"
                for o in s.top_ops[:10]
            )
            out.extend(
                f"| {_md(k.name)} | kernel | {k.total_duration_us / 1000:.3f} |"
                for k in s.kernels[:10]
            )
            out.append("")
        if avg:
            out.append("| Category | Avg ms | % of step |\n|---|---:|---:|")
            for c in CATEGORIES:
                v = avg.breakdown_ms.get(c, 0.0)
                pct = 100 * v / avg.step_time_ms if avg.step_time_ms else 0.0
                out.append(f"| {CATEGORY_LABELS[c]} | {v:.3f} | {pct:.1f}% |")
            out.append("")
        out.extend(_markdown_op_rates(s))
        out.extend(_markdown_pytorch(s))
        for r in s.recommendations:
            out.append(f"- {r}")
        out.append("")
    return "\n".join(out)


def _markdown_efficiency(s: ProfileSummary) -> list[str]:
    """The Overview's efficiency and memory lines, as list items (their continuation lines
    indented under them)."""
    from tui_prof.render.efficiency import efficiency_text, memory_text

    out: list[str] = []
    for label, text in (("Efficiency", efficiency_text(s)), ("Memory", memory_text(s))):
        if text is None:
            continue
        first, *rest = text.plain.split("\n")
        first = first.removeprefix(f"{label}: ")
        out.append(f"- {label}: {_md_text(first)}")
        out.extend(f"  - {_md_text(line.strip())}" for line in rest if line.strip())
    return out


_MD_SPECIAL = re.compile(r"[\\`*_\[\]<>|#~]")


def _md_text(text: str) -> str:
    """Plain text with names from a trace in it, safe in a Markdown list item."""
    return _MD_SPECIAL.sub(r"\\\g<0>", text.replace("\n", " "))


def _markdown_op_rates(s: ProfileSummary) -> list[str]:
    """The ops with a FLOP count: FLOPs, FLOP/s, FLOPs per byte and what bounds them."""
    from tui_prof.profiles.efficiency import intensity, roofline
    from tui_prof.render.efficiency import bound_cell, count, op_rate_cell

    counted = [o for o in s.top_ops if o.flops]
    # a GPU op is counted on its host and its device row: the device row has the FLOP rate
    ops = ([o for o in counted if o.where == "Device"] or counted)[:10]
    if not ops:
        return []
    out = [
        "| Op with a FLOP count | Where | Self ms | FLOPs | FLOP/s | FLOP/byte | Bound by |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for o in ops:
        ai = intensity(o)
        bound = bound_cell(o, s.efficiency) if roofline(o, s.efficiency) else "–"
        out.append(
            f"| {_md(o.name)} | {o.where} | {o.total_self_time_us / 1000:.3f} | "
            f"{count(o.flops or 0.0)} | {op_rate_cell(o)} | "
            f"{'–' if ai is None else f'{ai:,.3g}'} | {bound} |"
        )
    out.append("")
    return out


def _md_pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}%"


def _markdown_pytorch(s: ProfileSummary) -> list[str]:
    from tui_prof.model import NATIVE_CATEGORIES, NATIVE_LABELS

    """PyTorch sessions: the plugin's categories, its GPU figures and the ranks."""
    out: list[str] = []
    avg = s.average
    if avg is not None and avg.native_breakdown_ms is not None:
        out.append("| PyTorch plugin category | Avg ms | % of step |\n|---|---:|---:|")
        for c in NATIVE_CATEGORIES:
            v = avg.native_breakdown_ms.get(c, 0.0)
            pct = 100 * v / avg.step_time_ms if avg.step_time_ms else 0.0
            out.append(f"| {NATIVE_LABELS[c]} | {v:.3f} | {pct:.1f}% |")
        out.append("")
    if s.gpu_metrics:  # the plugin's GPU figures over all steps
        out.append(
            "| GPU | Name | GPU utilization | Est. SM efficiency | Est. achieved occupancy |\n"
            "|---|---|---:|---:|---:|"
        )
        for g in s.gpu_metrics:
            gpu = f"{_md(g.rank)} {g.device}" if g.rank else str(g.device)
            out.append(
                f"| {gpu} | {_md(g.name)} | {_md_pct(g.utilization_percent)} | "
                f"{_md_pct(g.sm_efficiency_percent)} | {_md_pct(g.occupancy_percent)} |"
            )
        out.append("")
    if len(s.ranks) > 1:
        out.append("| Rank | Trace | Steps | Step ms | |\n|---|---|---:|---:|---|")
        for r in s.ranks:
            ms = f"{r.step_time_ms:.2f}" if r.step_time_ms is not None else "–"
            rank = "–" if r.rank is None else str(r.rank)
            flag = "slowest" if r.slowest else ""
            out.append(f"| {rank} | {r.name} | {r.steps} | {ms} | {flag} |")
        out.append("")
    return out


EFFICIENCY_COLUMNS = ("flops", "achieved_tflops", "mfu_percent", "peak_tflops", "peak_format")
MEMORY_COLUMNS = ("peak_allocated_mb",)


def _csv_efficiency(s: ProfileSummary, i: int, step_ms: float) -> list[object]:
    """A step's FLOPs, the FLOP rate over its own time and its MFU against the session's peak."""
    e = s.efficiency
    if e is None or i >= len(e.step_flops):
        return [""] * len(EFFICIENCY_COLUMNS)
    flops = e.step_flops[i]
    achieved = flops / (step_ms / 1e3) / 1e12 if step_ms > 0 else None
    mfu = None
    if achieved is not None and e.peak_tflops:
        mfu = 100.0 * achieved / (e.peak_tflops * e.devices)
    return [
        flops,
        "" if achieved is None else achieved,
        "" if mfu is None else mfu,
        e.peak_tflops or "",
        e.peak_format or "",
    ]


def _csv_memory(s: ProfileSummary, i: int) -> list[object]:
    """A step's peak allocated memory, where the profile has one per step."""
    m = s.memory
    if m is None or len(m.step_peak_allocated_mb) != len(s.steps):
        return [""]
    return [m.step_peak_allocated_mb[i]]


def to_csv(summaries: list[ProfileSummary]) -> str:
    import csv  # here, not at the top: only --csv pays for it
    import io

    from tui_prof.model import CATEGORIES, NATIVE_CATEGORIES

    buf = io.StringIO()
    w = csv.writer(buf)
    # PyTorch sessions add the plugin's categories (empty for TensorFlow rows).
    native = any(st.native_breakdown_ms is not None for s in summaries for st in s.steps)
    extra = [f"native_{c}_ms" for c in NATIVE_CATEGORIES] if native else []
    # Sessions with FLOPs or memory add them per step (empty where a session cannot say).
    eff = any(s.efficiency is not None for s in summaries)
    mem = any(s.memory is not None for s in summaries)
    extra += [*(EFFICIENCY_COLUMNS if eff else ()), *(MEMORY_COLUMNS if mem else ())]
    w.writerow(
        ["session", "step_source", "step", "step_time_ms", *[f"{c}_ms" for c in CATEGORIES], *extra]
    )
    for s in summaries:
        for i, st in enumerate(s.steps):
            w.writerow(
                [
                    s.path,
                    s.step_source,
                    st.step,
                    st.step_time_ms,
                    *[st.breakdown_ms.get(c, 0.0) for c in CATEGORIES],
                    *[
                        "" if st.native_breakdown_ms is None else st.native_breakdown_ms.get(c, 0.0)
                        for c in (NATIVE_CATEGORIES if native else ())
                    ],
                    *(_csv_efficiency(s, i, st.step_time_ms) if eff else ()),
                    *(_csv_memory(s, i) if mem else ()),
                ]
            )
    return buf.getvalue()


def run(args: argparse.Namespace) -> int:
    from tui_prof.profiles.discover import Problem, discover

    try:
        found = discover(args.path)
    except (FileNotFoundError, PermissionError) as exc:
        _err(str(exc))
        _start_converter((), args)  # stopped: nothing to convert
        return 2
    errors: list[dict[str, str]] = []
    for problem in found.problems:  # unreadable directories and files count as failed sessions
        _err(problem)
        if isinstance(problem, Problem) and problem.unreadable:
            errors.append({"path": problem.path, "error": problem.reason})
    sessions = found.sessions
    if not sessions:
        _err(
            f"{args.path}: no profile sessions (*.xplane.pb, *.overview_page.pb or PyTorch traces) "
            "found"
        )
        _start_converter((), args)
        return 2
    converting = _start_converter(sessions, args)  # first: the imports below overlap its start
    from tui_prof.model import ProfileError
    from tui_prof.profiles.efficiency import with_peak
    from tui_prof.profiles.load import load_summary

    summaries: list[ProfileSummary] = []
    show_progress = args.format == "rich" and sys.stderr.isatty()
    if show_progress:  # rich costs ~65 ms to import: only where it is drawn
        from tui_prof.render.console import SafeConsole as Console

        console = Console(stderr=True)
    for i, sess in enumerate(sessions):
        label = f"[{i + 1}/{len(sessions)}] {sess.path}"
        try:
            with console.status(label) if show_progress else nullcontext() as status:
                loaded = load_summary(
                    sess,
                    use_cache=not args.no_cache,
                    force_fallback=args.fallback,
                    full=args.full,
                    step_program=args.step_program,
                    progress=None if status is None else _status_progress(status, label),
                )
                summaries.append(with_peak(loaded, args.peak_tflops))
        except ProfileError as exc:
            errors.append({"path": str(sess.path), "error": str(exc)})
            _err(f"{sess.path}: {exc}")
    if converting:  # no more requests: they exit while the output is written
        from tui_prof.profiles.xplane import convert_worker

        convert_worker.process().finish()
    if args.format == "json":
        doc: dict[str, Any] = {"sessions": [s.to_dict() for s in summaries]}
        if errors:
            doc["errors"] = errors
        print(strict_json(doc))
    elif args.format == "markdown":
        print(to_markdown(summaries))
    elif args.format == "csv":
        sys.stdout.write(to_csv(summaries))
    else:
        from tui_prof.render.console import SafeConsole as Console
        from tui_prof.render.summary import summary_renderable

        out = Console()
        for s in summaries:
            out.print(summary_renderable(s))
            out.print()
    return 1 if errors else 0
