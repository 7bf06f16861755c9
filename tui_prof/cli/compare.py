"""`tuiprof compare EXPERIMENT_DIR`: statistics, box plots, verdicts and the comparability guard.

Contract: prints Rich output by default, `--json` (the document docs/json.md describes, see
`ComparisonReport.to_dict`) or `--markdown` (GitHub tables, box plots in a text block).
Reads the experiment without writing to it, so it is safe while `tuiprof run` is writing.
Errors (missing directory, not an experiment, unknown metric) are one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import io
import sys
from typing import Any

from tui_prof.comparison.report import ComparisonReport, MetricReport, build_report
from tui_prof.comparison.tradeoff import Tradeoff
from tui_prof.printable import printable, strict_json

MARKDOWN_WIDTH = 80


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare an experiment's variants: statistics, box plots, verdicts",
        description=(
            "Summarise an experiment directory made by `tuiprof run`: per metric and variant "
            "n, mean, std, median, p90, min, max and quartiles; box plots on a shared axis; "
            "each variant against the baseline with a 95% confidence interval and a plain "
            "verdict, paired by repeat where every repeat has a run of each variant, with how "
            "many repeats per variant would resolve an open question; the speed/quality "
            "trade-off with its Pareto front; and whether the runs are comparable (GPU, "
            "versions, data, epochs, batch size, host). Only finished, non-warm-up runs count."
        ),
    )
    p.add_argument("experiment_dir", metavar="EXPERIMENT_DIR", help="an experiment directory")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    p.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="compare only this metric (repeatable; default: all the experiment's metrics; "
        "a distribution such as latency_ms means latency_ms:p50, :p90 and :p99)",
    )
    p.add_argument(
        "--speed",
        metavar="NAME",
        help="the trade-off's speed metric (default: wall_time_s)",
    )
    p.add_argument(
        "--quality",
        metavar="NAME",
        help="the trade-off's quality metric (default: the first accuracy-like metric)",
    )
    p.add_argument(
        "--min-difference",
        metavar="PCT|METRIC=PCT,…",
        help="the smallest difference that matters, in percent: 5 (every metric) or "
        "wall_time_s=5,accuracy=0.5 (default: the spec's, else 5%% for times). An interval "
        "within it says 'no difference larger than 5%%'; more repeats are advised only to "
        "resolve that much",
    )
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"tuiprof compare: {printable(message)}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from tui_prof.experiments.reading import read_experiment
    from tui_prof.experiments.spec import parse_min_difference

    try:
        matters = parse_min_difference(args.min_difference or "")
        report = build_report(
            read_experiment(args.experiment_dir),
            args.metric,
            speed=args.speed,
            quality=args.quality,
            matters=matters,
        )
    except ValueError as exc:
        return _fail(str(exc))
    if args.json:
        print(strict_json(report.to_dict()))
    elif args.markdown:
        print(to_markdown(report), end="")
    else:
        from tui_prof.render.console import SafeConsole as Console
        from tui_prof.render.stats_table import report_view

        Console().print(report_view(report))
    return 0


# -- Markdown ----------------------------------------------------------------------------
def _cell(text: object) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def _table(header: list[str], rows: list[list[str]], right: range) -> list[str]:
    aligns = ["--:" if i in right else "---" for i in range(len(header))]
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join(aligns) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def plain_text(renderable: Any, width: int = MARKDOWN_WIDTH) -> str:
    """A renderable as monochrome text, the way a NO_COLOR terminal shows it."""
    from tui_prof.render.console import SafeConsole as Console

    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text(styles=False)


def _metric_markdown(m: MetricReport, baseline: str) -> list[str]:
    from tui_prof.render.boxplot import BoxPlot
    from tui_prof.render.stats_table import STAT_COLUMNS, decimals_for, fmt

    direction = "lower is better" if m.lower_is_better else "higher is better"
    unit = f" ({m.unit})" if m.unit else ""
    lines = ["", f"## {_cell(m.name)}{unit} · {direction}", ""]
    descs = list(m.variants.values())
    dec = decimals_for([d.mean for d in descs], [d.std for d in descs])
    rows = [
        [name + (" (baseline)" if name == baseline else ""), str(d.n)]
        + [fmt(getattr(d, c), dec) for c in STAT_COLUMNS[1:]]
        for name, d in m.variants.items()
    ]
    lines += _table(["variant", *STAT_COLUMNS], rows, range(1, len(STAT_COLUMNS) + 1))
    lines += ["", "```text", plain_text(BoxPlot.from_report(m)).rstrip("\n"), "```"]
    if m.comparisons:
        rows = []
        for c in m.comparisons:
            ci = "–" if c.ci_low is None or c.ci_high is None else f"{c.ci_low:.3f}–{c.ci_high:.3f}"
            ratio = "–" if c.ratio is None else f"{c.ratio:.3f}"
            verdict = c.verdict + (f" ({c.spread_note})" if c.spread_note else "")
            rows.append([c.variant, c.design, ratio, ci, verdict])
        header = [f"vs {baseline}", "design", "ratio", "95% CI", "verdict"]
        lines += ["", *_table(header, rows, range(2, 4))]
    lines += [f"- ⚠ {_cell(w)}" for w in m.warnings]
    return lines


def to_markdown(report: ComparisonReport) -> str:
    """The report as GitHub-flavoured Markdown, for pull requests and lab notes."""
    lines = [
        f"# Experiment {_cell(report.experiment)}",
        "",
        f"Baseline `{report.baseline}` · {report.counted_runs} counted runs · `{report.directory}`",
        "",
    ]
    comp = report.comparability
    if comp.ok:
        checked = ", ".join(comp.checked) or "nothing reported"
        lines.append(f"✓ **Runs comparable**: {comp.runs} runs agree on {checked}.")
    else:
        lines.append("**⚠ Runs are not comparable: check before trusting the verdicts.**")
    lines += [f"- {_cell(d.message)}" for d in comp.differences]
    if comp.noisy:
        lines += ["", f"**⚠ {_cell(comp.noise_message)}**"]
    if report.failed:
        lines += ["", f"**✗ {report.failed_runs} run(s) failed** and are left out:"]
        lines += [
            f"- `{f.run_id}`: {f.status}" + (f" — {_cell(f.error)}" if f.error else "")
            for f in report.failed
        ]
    if report.pending_runs:
        lines += ["", f"… {report.pending_runs} run(s) pending or running: numbers will change."]
    if report.tradeoff is not None:
        lines += _tradeoff_markdown(report.tradeoff)
    from tui_prof.render.stats_table import MAX_METRIC_SECTIONS

    for m in report.metrics[:MAX_METRIC_SECTIONS]:
        lines += _metric_markdown(m, report.baseline)
    rest = report.metrics[MAX_METRIC_SECTIONS:]
    if rest:  # sections (with box plots) for thousands of names: a row each instead
        lines += ["", f"## {len(rest):,} more metrics", "", "| metric | verdicts |", "|---|---|"]
        lines += [
            f"| {_cell(m.name)} | "
            + _cell("; ".join(f"{c.variant}: {c.verdict}" for c in m.comparisons))
            + " |"
            for m in rest
        ]
    return "\n".join(lines) + "\n"


def _tradeoff_markdown(t: Tradeoff) -> list[str]:
    from tui_prof.render.scatter import TradeoffScatter
    from tui_prof.render.stats_table import tradeoff_cells

    lines = ["", f"## Trade-off: {_cell(t.speed)} vs {_cell(t.quality)}", ""]
    rows = [
        [*cells, "yes" if p.pareto else "beaten by " + ", ".join(p.dominated_by)]
        for p, cells in zip(t.points, tradeoff_cells(t), strict=True)
    ]
    header = [
        "variant",
        f"{t.speed} median",
        "q1–q3",
        f"{t.quality} median",
        "q1–q3",
        f"worst {t.quality}",
        "Pareto front",
    ]
    lines += _table(header, rows, range(1, 6))
    lines += ["", "```text", plain_text(TradeoffScatter(t)).rstrip("\n"), "```"]
    return lines
