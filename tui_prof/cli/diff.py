"""`tuiprof diff A B`: which ops and kernels changed between two profiles, or two variants.

Contract: A and B are each a session directory, a profile file, or a run directory / logdir
holding one session; `tuiprof diff EXPERIMENT_DIR [--variants A B]` compares two variants of an
experiment, each the mean over its finished runs' profiles (default: the baseline against the
other variant, where there are two). Prints Rich output, `--json` (`ProfileDiff.to_dict`: ops and
kernels sorted by |delta_ms|, only_in_a/only_in_b, step times, totals, notes) or `--markdown`.
Exit codes: 0 compared; 2 nothing to compare (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tui_prof.model import ProfileError
from tui_prof.printable import printable, strict_json

if TYPE_CHECKING:
    from tui_prof.experiments.diff_targets import Target
    from tui_prof.profiles.diff import DiffRow, ProfileDiff

DEFAULT_LIMIT = 20


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="op-by-op and kernel-by-kernel change between two profiles or two variants",
        description=(
            "Compare two profiles op by op and kernel by kernel: time per step in A and B, the "
            "change, and the ops that appear or vanish, sorted by their effect on step time. "
            "A and B: session directories, profile files, or run directories / logdirs with one "
            "session. With an experiment directory, compares two of its variants (the mean over "
            "each variant's finished runs, with their spread)."
        ),
    )
    p.add_argument(
        "targets",
        nargs="+",
        metavar="A B",
        help="two profiles (session dir, profile file, run dir), or one experiment directory",
    )
    p.add_argument(
        "--variants",
        nargs=2,
        metavar=("VA", "VB"),
        help="with an experiment directory: the two variants to compare (default: the baseline "
        "and the other variant, where there are two)",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json", action="store_const", dest="format", const="json", help="one JSON object"
    )
    fmt.add_argument(
        "--markdown", action="store_const", dest="format", const="markdown", help="Markdown tables"
    )
    p.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"rows per table in Rich and Markdown output (default {DEFAULT_LIMIT}; 0: all); "
        "JSON has every row",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="recompute instead of reading the summary cache"
    )
    from tui_prof.cli.summary import add_peak_argument

    add_peak_argument(p)
    p.set_defaults(func=run, format="rich")


def _fail(message: str) -> int:
    print(f"tuiprof diff: {printable(message)}", file=sys.stderr)
    return 2


def _targets(args: argparse.Namespace) -> tuple[Target, Target]:
    """(A, B) Targets from the command line; raises ProfileError with the reason."""
    from tui_prof.experiments.diff_targets import (
        experiment_variants,
        is_experiment,
        path_target,
        variant_target,
    )

    paths: list[str] = args.targets
    if args.variants or (len(paths) == 1 and is_experiment(paths[0])):
        if len(paths) != 1:
            raise ProfileError("--variants takes one experiment directory")
        if not is_experiment(paths[0]):
            raise ProfileError(f"{paths[0]}: not a tuiprof experiment (no experiment.sqlite)")
        if args.variants:
            va, vb = args.variants
        else:
            baseline, variants = experiment_variants(paths[0])
            others = [v for v in variants if v != baseline]
            if len(others) != 1:
                raise ProfileError(
                    f"{paths[0]} has variants {', '.join(variants)}: name two with --variants"
                )
            va, vb = baseline, others[0]
        return variant_target(paths[0], va), variant_target(paths[0], vb)
    if len(paths) != 2:
        raise ProfileError("give two profiles to compare (A B), or one experiment directory")
    return path_target(paths[0]), path_target(paths[1])


def run(args: argparse.Namespace) -> int:
    from tui_prof.experiments.diff_targets import diff_targets

    if args.limit < 0:
        return _fail(f"--limit must be 0 (all rows) or more, got {args.limit}")
    try:
        a, b = _targets(args)
        if args.format == "rich" and sys.stderr.isatty():
            from tui_prof.render.console import SafeConsole as Console

            with Console(stderr=True).status("Loading profiles") as status:
                diff = diff_targets(
                    a,
                    b,
                    use_cache=not args.no_cache,
                    progress=lambda f, m: status.update(f"{m} ({f:.0%})"),
                    peak_tflops=args.peak_tflops,
                )
        else:
            diff = diff_targets(a, b, use_cache=not args.no_cache, peak_tflops=args.peak_tflops)
    except ProfileError as exc:
        return _fail(str(exc))
    limit = args.limit if args.limit > 0 else None
    if args.format == "json":
        print(strict_json(diff.to_dict()))
    elif args.format == "markdown":
        print(to_markdown(diff, limit), end="")
    else:
        from tui_prof.render.console import SafeConsole as Console
        from tui_prof.render.diff import diff_renderable

        Console().print(diff_renderable(diff, limit or max(len(diff.ops), len(diff.kernels), 1)))
    return 0


# -- Markdown ----------------------------------------------------------------------------
def _cell(text: object) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """A name as inline code in a table cell (backslashes are literal there; pipes are not)."""
    body = text.replace("|", "\\|").replace("\n", " ")
    return f"`` {body} ``" if "`" in body else f"`{body}`"


def _rows(rows: tuple[DiffRow, ...], limit: int | None, title: str) -> list[str]:
    from tui_prof.render.diff import STATUS, fmt_delta, fmt_percent, row_names
    from tui_prof.render.summary import fmt_ms

    shown = rows if limit is None else rows[:limit]
    more = f" (first {len(shown)} of {len(rows)})" if len(shown) < len(rows) else ""
    out = ["", f"## {title}{more}", "", "| name | A | B | Δ | Δ % | |", "|---|--:|--:|--:|--:|---|"]
    for r, name in zip(shown, row_names(shown), strict=True):
        a = fmt_ms(r.a_ms) if r.status != "only_in_b" else "–"
        b = fmt_ms(r.b_ms) if r.status != "only_in_a" else "–"
        out.append(
            f"| {_code(name)} | {a} | {b} | {fmt_delta(r.delta_ms)} | "
            f"{fmt_percent(r.change_percent)} | {STATUS.get(r.status, '')} |"
        )
    return out


def to_markdown(diff: ProfileDiff, limit: int | None = DEFAULT_LIMIT) -> str:
    """The diff as GitHub-flavoured Markdown, for pull requests and lab notes."""
    from tui_prof.render.diff import efficiency_line, fmt_delta, unit
    from tui_prof.render.summary import fmt_ms

    lines = ["# Profile diff", ""]
    for name, side in (("A", diff.a), ("B", diff.b)):
        st = fmt_ms(side.step_time_ms) + " ms/step" if side.step_time_ms is not None else "no steps"
        lines.append(
            f"- **{name}**: {_cell(side.label)}: {st} ({side.steps} steps, "
            f"{side.profiles} profile(s), {side.device_type})"
        )
    step = diff.step_time
    if step is not None:
        lines.append(f"- **Step time**: Δ {fmt_delta(step.delta_ms)} ms")
    for where, total in sorted(diff.op_totals().items()):
        lines.append(
            f"- {where} op time: {fmt_ms(total.a_ms)} → {fmt_ms(total.b_ms)} ms "
            f"(Δ {fmt_delta(total.delta_ms)})"
        )
    if diff.kernels:
        k = diff.kernel_total()
        lines.append(
            f"- Kernel time: {fmt_ms(k.a_ms)} → {fmt_ms(k.b_ms)} ms (Δ {fmt_delta(k.delta_ms)})"
        )
    changes = efficiency_line(diff)
    if changes is not None:
        lines.append(f"- Efficiency (A → B): {_cell(changes.plain)}")
    lines.append(f"- Times in {unit(diff)}; Δ = B − A; sorted by |Δ|.")
    lines += [f"- ⚠ {_cell(n)}" for n in diff.notes]
    if diff.ops:
        lines += _rows(diff.ops, limit, "Ops")
    if diff.kernels:
        lines += _rows(diff.kernels, limit, "Kernels")
    return "\n".join(lines) + "\n"
