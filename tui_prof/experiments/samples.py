"""Distributions within a run: a metric a job reports more than once outside its epochs (a
latency per request, a time per step) is kept as samples and summarised by percentiles.

Contract:
- A name is a distribution when it was reported at least twice alone on its line (`{"latency_ms":
  3.2}`, a `step` allowed beside it) and never on a line that carries an `epoch`: values per
  epoch are a training curve, and a line of several metrics is a set of results, whose last
  value counts (a result a job reports twice, say from a callback and again at its end, stays
  a result).
- `Reservoir` keeps every value up to `CAP` (10,000) per name and run; beyond that a uniform
  random sample of `CAP` of them (Algorithm R, seeded by the run id, so a rerun of the same
  reports gives the same sample); `count` is every value reported. A reservoir rather than the
  first N: latencies drift over a run (warm-up, caches, clocks), and the first N would describe
  only its start, while a reservoir is an unbiased sample of the whole run.
- Percentiles `PERCENTILES` (50, 90, 99) with linear interpolation (numpy's default, type 7)
  over the kept values: exact up to `CAP` values; beyond, p99 from 10,000 uniform samples is
  within about ±0.2 percentile points. They become the run's metrics `NAME:p50`, `NAME:p90`,
  `NAME:p99`, and the plain `NAME` (the last request's value) is dropped.
- At most `MAX_DISTRIBUTIONS` (64) names per run keep samples; further names keep only their
  last value, so a job that invents names cannot fill the memory.
- Stored as little-endian float64 bytes (`to_blob`/`from_blob`) in the store's `samples` table.
"""

from __future__ import annotations

import math
import random
import sys
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence

CAP = 10_000
MAX_DISTRIBUTIONS = 64
PERCENTILES = (50, 90, 99)
POLICY = "reservoir"  # the word `tuiprof compare --json` uses for how samples were kept


class Reservoir:
    """Up to `cap` values of one metric in one run, a uniform sample of all `count` reported."""

    def __init__(self, cap: int = CAP, seed: int = 0) -> None:
        self.cap = cap
        self.count = 0
        self.values: array[float] = array("d")
        self._rng = random.Random(seed)

    def add(self, value: float) -> None:
        self.count += 1
        if len(self.values) < self.cap:
            self.values.append(value)
            return
        j = self._rng.randrange(self.count)
        if j < self.cap:
            self.values[j] = value

    def percentiles(self) -> dict[int, float]:
        return percentiles(self.values)


def seed_for(run_id: str) -> int:
    """A stable seed per run (Python's hash() of a str changes between processes)."""
    return zlib.crc32(run_id.encode("utf-8"))


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile of sorted values, linear interpolation (numpy's default)."""
    h = (len(ordered) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def percentiles(values: Iterable[float], qs: Sequence[int] = PERCENTILES) -> dict[int, float]:
    ordered = sorted(values)
    return {q: percentile(ordered, q) for q in qs} if ordered else {}


def metric_name(name: str, q: int) -> str:
    return f"{name}:p{q}"


def summarise(
    final: Mapping[str, float], distributions: Mapping[str, Reservoir]
) -> dict[str, float]:
    """A run's metrics: final values, with each distribution replaced by its percentiles."""
    out = {k: v for k, v in final.items() if k not in distributions}
    for name, res in distributions.items():
        out.update({metric_name(name, q): v for q, v in res.percentiles().items()})
    return out


def to_blob(values: Iterable[float]) -> bytes:
    """Little-endian float64, whatever the machine."""
    out = array("d", values)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def from_blob(blob: bytes) -> list[float]:
    out = array("d")
    out.frombytes(blob[: len(blob) - len(blob) % 8])
    if sys.byteorder != "little":
        out.byteswap()
    return out.tolist()
