"""Columns that fit a table's width: the least important go, the name column takes what is left.

Numbers are never cut: a column either shows whole or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PADDING = 2  # a DataTable cell's padding, one each side
SCROLLBAR = 2  # room kept for a vertical scrollbar


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # cells its values need (for the flexible column: the least it may have)
    priority: int  # 0 is kept longest
    flexible: bool = False  # takes the width the others leave
    want: int = 0  # the flexible column's wish, met before columns of lower priority show


def fit_columns(columns: Sequence[Column], width: int) -> list[tuple[Column, int]]:
    """The columns to show, in their order, with their widths, for a table `width` cells wide.

    Columns go, least important first, until the rest fit with the flexible column at its wish;
    when only the most important are left, the flexible column shrinks to its least."""

    def cells(c: Column, flexible_width: int) -> int:
        return (flexible_width if c.flexible else max(c.width, len(c.label))) + PADDING

    def need(cols: list[Column], flexible_width: int) -> int:
        return sum(cells(c, flexible_width) for c in cols) + SCROLLBAR

    kept = list(columns)
    flexible = next((c for c in kept if c.flexible), None)
    wish = max(flexible.want, flexible.width, len(flexible.label)) if flexible else 0
    while len(kept) > 1 and need(kept, wish) > width:
        worst = max(kept, key=lambda c: c.priority)
        if worst.priority == 0:
            break
        kept.remove(worst)
    least = max(flexible.width, len(flexible.label)) if flexible else 0
    while len(kept) > 1 and need(kept, least) > width:  # not even at its least: drop more
        kept.remove(max((c for c in kept if not c.flexible), key=lambda c: c.priority))
    rest = width - need(kept, 0) + (PADDING if flexible in kept else 0)
    out = []
    for c in kept:
        w = max(least, rest - PADDING) if c.flexible else max(c.width, len(c.label))
        out.append((c, w))
    return out
