"""Rich renderables for a ProfileDiff, shared by `tuiprof diff` and the TUI's Diff view.

Contract: names come from trace files and are data: they go into `Text` objects only, never into
markup. Names are shortened by `render.names` (the rules the summary uses): op scopes keep their
tail, kernels read as their function and the template arguments that tell them apart; names
that would still read alike get a number. The sign of a change carries its meaning, colour only
repeats it (B faster: green, slower: red), so NO_COLOR terminals lose nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from tui_prof.profiles.diff import (
    ONLY_IN_A,
    ONLY_IN_B,
    PER_STEP,
    DiffRow,
    DiffSide,
    ProfileDiff,
    Total,
)
from tui_prof.render.efficiency import count, megabytes, percent, rate
from tui_prof.render.names import fit_kernels, fit_paths, kernel_names
from tui_prof.render.summary import fmt_ms

ELLIPSIS = "…"
STATUS = {ONLY_IN_A: "gone", ONLY_IN_B: "new"}


def strip_signature(name: str) -> str:
    """`void ns::kernel<T>(args)` → `ns::kernel<T>`: the argument list repeats the template."""
    s = name.removeprefix("void ").strip()
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ")":
                depth += 1
            elif s[i] == "(":
                depth -= 1
                if depth == 0:
                    head = s[:i].rstrip()
                    return head or s
    return s


def tail(text: str, width: int) -> str:
    """The end of `text` in at most `width` characters, with an ellipsis where cut."""
    if width <= 1:
        return text[-width:] if width > 0 else ""
    return text if len(text) <= width else ELLIPSIS + text[-(width - 1) :]


def row_names(rows: Sequence[DiffRow]) -> list[str]:
    """Each row's name, with its side where the same name is an op on the host and on the device
    (PyTorch's `aten::mm` on the CPU and its GPU time): `aten::mm (device)`, else two rows read
    alike. The side goes at the end, which every shortening keeps."""
    sides: dict[str, set[str]] = {}
    for r in rows:
        sides.setdefault(r.name, set()).add(r.where)
    return [
        f"{r.name} ({r.where.lower()})" if len(sides[r.name]) > 1 and r.where else r.name
        for r in rows
    ]


def short_names(names: Sequence[str], width: int, *, kernels: bool = False) -> list[str]:
    """Each name in at most `width` characters, distinct wherever the names are: the rules of
    `render.names` (kernels by what tells them apart, op scopes by their tail and the scopes that
    differ), then a number for whatever still reads alike at this width."""
    out = fit_kernels(kernel_names(names), width) if kernels else fit_paths(names, width)
    seen: dict[str, set[str]] = {}
    for s, n in zip(out, names, strict=True):
        seen.setdefault(s, set()).add(n)
    if all(len(v) == 1 for v in seen.values()):
        return out
    digits = len(str(len(names)))
    counters: dict[str, int] = {}
    for i, s in enumerate(out):
        if len(seen[s]) > 1:
            key = tail(s, width - 1 - digits)
            counters[key] = counters.get(key, 0) + 1
            out[i] = f"{key}#{counters[key]}"
    return out


def fmt_delta(ms: float) -> str:
    if ms == 0:
        return "0"
    return ("+" if ms > 0 else "-") + fmt_ms(abs(ms))


def delta_text(ms: float) -> Text:
    style = "red" if ms > 0 else "green" if ms < 0 else "dim"
    return Text(fmt_delta(ms), style=style)


def fmt_percent(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:+.0f}%" if abs(p) >= 10 else f"{p:+.1f}%"


def has_spread(diff: ProfileDiff) -> bool:
    """Both sides average several profiles, so each change has a standard error to show."""
    return diff.a.profiles > 1 and diff.b.profiles > 1


def unit(diff: ProfileDiff) -> str:
    return "ms/step" if diff.per == PER_STEP else "ms/profile"


def row_cells(row: DiffRow) -> tuple[str, str, Text, str, Text]:
    """A, B, Δ, Δ % and the appeared/vanished mark: the numbers a row shows in both faces."""
    mark = STATUS.get(row.status, "")
    return (
        fmt_ms(row.a_ms) if row.status != ONLY_IN_B else "–",
        fmt_ms(row.b_ms) if row.status != ONLY_IN_A else "–",
        delta_text(row.delta_ms),
        fmt_percent(row.change_percent),
        Text(mark, style="bold" if mark else ""),
    )


def row_detail(diff: ProfileDiff, row: DiffRow, *, kernel: bool = False) -> Text:
    """The selected row in full: its whole name, where it ran, calls and spread."""
    t = Text(row.name, style="bold")
    t.append("\n")
    what = f"launched by {row.kind}" if kernel and row.kind else row.kind
    t.append(" · ".join(x for x in (row.where, what) if x), style="dim")
    per = "step" if diff.per == PER_STEP else "profile"
    t.append(f"\ncalls per {per}: A {row.a_calls:g}, B {row.b_calls:g}")
    se = diff.delta_se(row)
    if se is not None:
        t.append(f" · Δ {fmt_delta(row.delta_ms)} ms, standard error {fmt_ms(se)} ms")
    return t


def _total_line(t: Text, label: str, total: Total, suffix: str = "") -> None:
    t.append(f"\n{label:<11}")
    t.append(f"{fmt_ms(total.a_ms)} → {fmt_ms(total.b_ms)} ms  ")
    t.append_text(delta_text(total.delta_ms))
    pct = 100 * total.delta_ms / total.a_ms if total.a_ms > 0 else None
    t.append(f" ms ({fmt_percent(pct)})" if pct is not None else " ms")
    if suffix:
        t.append(suffix, style="dim")


def _side_line(t: Text, name: str, side: DiffSide) -> None:
    t.append(f"{name}  ", style="bold")
    t.append(side.label)
    st = f"{fmt_ms(side.step_time_ms)} ms/step" if side.step_time_ms is not None else "no steps"
    sd = f" ± {fmt_ms(side.step_time_sd_ms)}" if side.step_time_sd_ms is not None else ""
    steps = f"{side.steps} step{'s' if side.steps != 1 else ''}"
    n = f", {side.profiles} profiles" if side.profiles != 1 else ""
    t.append(f"  {st}{sd} ({steps}{n}, {side.device_type})", style="dim")


def diff_header(diff: ProfileDiff) -> Text:
    """Who is A and B, the step times, the notes, op and kernel totals."""
    t = Text()
    _side_line(t, "A", diff.a)
    t.append("\n")
    _side_line(t, "B", diff.b)
    step = diff.step_time
    if step is not None:
        _total_line(t, "Step time", step)
    # The caveats (no spread, per profile, other devices) next: at 80x24 the TUI's header shows
    # 7 lines, and below the totals they were cut off.
    for note in diff.notes:
        t.append("\n⚠ " + note, style="yellow")
    for where, total in sorted(diff.op_totals().items()):
        _total_line(t, f"{where} ops", total, f"  sum of {where.lower()} op self times")
    if diff.kernels:
        _total_line(t, "Kernels", diff.kernel_total(), "  sum of kernel times")
    changes = efficiency_line(diff)
    if changes:
        t.append("\n")
        t.append_text(changes)
    t.append(
        f"\nOps: {len(diff.ops)} ({len(diff.only_in_b)} new in B, {len(diff.only_in_a)} gone)"
        f" · kernels: {len(diff.kernels)} · {unit(diff)}, Δ = B − A",
        style="dim",
    )
    return t


_EFFICIENCY_LABELS: dict[str, tuple[str, Callable[[float], str]]] = {
    "mfu_percent": ("MFU", percent),
    "achieved_tflops": ("achieved", rate),
    "flops_per_step": ("per step", count),
    "peak_allocated_mb": ("peak memory", megabytes),
}


def efficiency_line(diff: ProfileDiff) -> Text | None:
    """ "MFU 38% → 41% · achieved 412 → 440 TFLOP/s · peak memory 2,600 → 2,400 MB", where
    either side knows them ("–" for the side that does not)."""
    parts = []
    for key, change in diff.efficiency_changes().items():
        label, show = _EFFICIENCY_LABELS[key]
        a, b = change["a"], change["b"]
        parts.append(f"{label} {'–' if a is None else show(a)} → {'–' if b is None else show(b)}")
    return Text(" · ".join(parts), style="dim") if parts else None


class DiffTable:
    """Rows of a diff as a table whose name column keeps each name's distinguishing tail."""

    def __init__(
        self, diff: ProfileDiff, rows: Sequence[DiffRow], title: str, *, kernels: bool = False
    ) -> None:
        self.diff, self.rows, self.title, self.kernels = diff, list(rows), title, kernels

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        spread = has_spread(self.diff)
        heads = ("A", "B", "Δ", "± SE", "Δ %", "") if spread else ("A", "B", "Δ", "Δ %", "")
        rows: list[list[str | Text]] = []
        for row in self.rows:
            cells: list[str | Text] = list(row_cells(row))
            if spread:
                cells.insert(3, fmt_ms(self.diff.delta_se(row)))
            rows.append(cells)
        # Numbers and marks are never cut: each column is as wide as its widest cell, and the
        # name column takes what is left (a box table spends 3 cells a column, plus 1).
        widths = [max([len(h), *(len(str(r[i])) for r in rows)]) for i, h in enumerate(heads)]
        left = options.max_width - sum(widths) - 3 * (len(heads) + 1) - 1
        width = max(8, left)
        names = short_names(row_names(self.rows), width, kernels=self.kernels)
        t = Table(title=self.title, title_justify="left", expand=False)
        t.add_column("Kernel" if self.kernels else "Op", no_wrap=True, max_width=width)
        for head, w in zip(heads, widths, strict=True):
            t.add_column(head, justify="right" if head else "left", no_wrap=True, min_width=w)
        for name, cells in zip(names, rows, strict=True):
            t.add_row(Text(name), *cells)
        yield t


def diff_renderable(diff: ProfileDiff, limit: int = 20) -> RenderableType:
    """The diff as `tuiprof diff` prints it: header, then the ops and kernels that moved most."""
    parts: list[RenderableType] = [diff_header(diff), Text("")]
    u = unit(diff)
    if diff.ops:
        more = f", first {limit} of {len(diff.ops)}" if len(diff.ops) > limit else ""
        parts.append(DiffTable(diff, diff.ops[:limit], f"Ops by change ({u}{more})"))
    else:
        parts.append(Text("No op tables to compare.", style="dim"))
    if diff.kernels:
        more = f", first {limit} of {len(diff.kernels)}" if len(diff.kernels) > limit else ""
        parts.append(
            DiffTable(diff, diff.kernels[:limit], f"Kernels by change ({u}{more})", kernels=True)
        )
    return Group(*parts)
