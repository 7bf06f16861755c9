"""One profile line's events as numpy columns: what tuiprof's XPlane readers hand over.

Contract: `LineEvents` holds each event's metadata id, start and end (absolute picoseconds) and
the stats a reader asked for; numeric stats live in `StatColumns`, kept sparse because most
events carry few of them, and read back as dense columns with MISSING where an event lacks one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MISSING = np.iinfo(np.int64).min  # a numeric stat an event does not carry


class StatColumns(Mapping[str, np.ndarray]):
    """Numeric stats of one line's events, kept sparse (most events carry few of the stats asked
    for); reading one gives its dense column, MISSING where an event lacks it."""

    def __init__(self, n: int, names: Iterable[str]) -> None:
        self._n = n
        self._parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in names}
        self._cols: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, name: str, events: np.ndarray, values: np.ndarray) -> None:
        """Record values for these events (a later value for the same event wins)."""
        self._cols.pop(name, None)
        self._parts.setdefault(name, []).append(
            (np.asarray(events, dtype=np.int64), np.asarray(values, dtype=np.int64))
        )

    def sparse(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(event indices in order, values) of the events that carry this stat."""
        if name not in self._cols:
            parts = self._parts.get(name) or [(np.zeros(0, np.int64), np.zeros(0, np.int64))]
            idx = np.concatenate([p[0] for p in parts])
            val = np.concatenate([p[1] for p in parts])
            order = np.argsort(idx, kind="stable")
            idx, val = idx[order], val[order]
            last = np.append(idx[1:] != idx[:-1], True) if len(idx) else np.zeros(0, bool)
            self._cols[name] = (idx[last], val[last])
            self._parts[name] = [self._cols[name]]
        return self._cols[name]

    def __getitem__(self, name: str) -> np.ndarray:
        dense = np.full(self._n, MISSING, dtype=np.int64)
        if name in self._parts:
            idx, val = self.sparse(name)
            dense[idx] = val
        return dense

    def __iter__(self) -> Iterator[str]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def value(self, name: str, i: int) -> int:
        """One event's value, MISSING where it has none."""
        idx, val = self.sparse(name)
        k = int(np.searchsorted(idx, i))
        return int(val[k]) if k < len(idx) and idx[k] == i else int(MISSING)

    def subset(self, keep: np.ndarray) -> StatColumns:
        """The columns of only the events where keep is true (renumbered in order)."""
        new_index = np.cumsum(keep) - 1
        out = StatColumns(int(keep.sum()), self._parts)
        for name in self._parts:
            idx, val = self.sparse(name)
            inside = keep[idx]
            out.add(name, new_index[idx[inside]], val[inside])
        return out


@dataclass
class LineEvents:
    """One XLine's events as arrays (absolute picoseconds) and the stats asked for.

    ints holds each numeric stat (dense on reading, MISSING where absent); texts each text stat
    by event index; stats every asked-for stat of the events a reader's want() picked.
    """

    line_id: int
    name: str
    metadata_id: np.ndarray
    start_ps: np.ndarray
    end_ps: np.ndarray
    ints: StatColumns = field(default_factory=lambda: StatColumns(0, ()))
    texts: dict[str, dict[int, str]] = field(default_factory=dict)
    stats: dict[int, dict[str, Any]] = field(default_factory=dict)

    def subset(self, keep: np.ndarray) -> LineEvents:
        """Only the events where keep is true (renumbered in order)."""
        idx = np.flatnonzero(keep)
        new_of = {int(i): k for k, i in enumerate(idx.tolist())}
        return LineEvents(
            line_id=self.line_id,
            name=self.name,
            metadata_id=self.metadata_id[idx],
            start_ps=self.start_ps[idx],
            end_ps=self.end_ps[idx],
            ints=self.ints.subset(keep),
            texts={
                k: {new_of[i]: t for i, t in v.items() if i in new_of}
                for k, v in self.texts.items()
            },
            stats={new_of[i]: st for i, st in self.stats.items() if i in new_of},
        )

    def stats_of(self, i: int) -> dict[str, Any]:
        """Every asked-for stat of event i."""
        return self.stats_for(np.array([i])).get(i, {})

    def stats_for(self, events: np.ndarray) -> dict[int, dict[str, Any]]:
        """Every asked-for stat of these events (sorted indices), event by event."""
        out: dict[int, dict[str, Any]] = {int(i): {} for i in events.tolist()}
        for name in self.ints:
            idx, val = self.ints.sparse(name)
            if not len(idx) or not len(events):
                continue
            pos = np.minimum(np.searchsorted(idx, events), len(idx) - 1)
            hit = idx[pos] == events
            for i, v in zip(events[hit].tolist(), val[pos[hit]].tolist(), strict=True):
                out[i][name] = v
        for name, values in self.texts.items():
            for i in out.keys() & values.keys():
                out[i][name] = values[i]
        return out
