"""The columns the Collector (collect.py) fills: host rows, device rows, and a worker's part.

Why apart from the Collector: every later stage (steps, roles, the op tree, memory, metrics)
reads these arrays and flags, and none of them needs the loop that fills them. Times are µs, as
in the file; ids are floats where they share an array with times (exact: they are < 2**53).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Span = tuple[float, float]
KERNEL_COLUMNS = 8  # ts, end, name id, correlation, external id, device, occupancy, blocks/SM
Array = npt.NDArray[np.float64]
Ints = npt.NDArray[np.signedinteger[Any]]

# Flags of the host rows.
IS_OP = 1
IS_RUNTIME = 2
HAS_16BIT_INPUT = 4
NOT_CPU_EXEC = 8  # an op the plugin counts as DataLoader or Communication, not CPU Exec

# What a Part carries besides its rows: the Collector's counters and span lists.
COUNTS = (
    "runtime_2021",
    "kernel_count",
    "memcpy_count",
    "memset_count",
    "negative",
    "untimed",
    "gpu_step_marks",
    "dataloader_annotations",
)
SPANS = ("step_marks", "optimizer_marks", "dataloader", "comm_host")


def table(rows: Sequence[tuple[float, ...]], width: int) -> Array:
    """Rows of numbers as an (n, width) float array (ids stay exact: they are < 2**53)."""
    if not rows:
        return np.zeros((0, width))
    return np.array(rows, dtype=np.float64)


@dataclass
class Host:
    """Every thread's ops and runtime calls, one row each, in file order (µs, as in the file)."""

    thread: Ints  # int32: index into Collector.thread_keys
    ts: Array
    end: Array
    nid: Ints  # int32
    flags: Ints  # int8
    # runtime calls' correlation id, -1 for ops and calls without one; emptied by the op tree
    # (ops.py), its last reader
    corr: Array


@dataclass
class Device:
    """The device events as arrays, and which host rows are runtime calls and CPU Exec ops, for
    the vectorised stages. The runtime calls' columns are read from the host rows where a stage
    needs them, not copied here: a copy of them stayed beside the host rows through every stage
    (32 bytes a call, 90 MB on a 2 GiB trace)."""

    kernels: Array  # ts, end, name id, correlation, external id, device, occupancy, blocks/SM
    copies: Array  # memcpy then memset rows: ts, end, correlation, device
    memcpy_rows: int
    host: Host  # in file order (the op tree sorts it afterwards: the masks are then stale)
    runtime: npt.NDArray[np.bool_]  # which host rows are runtime calls
    cpu_exec: npt.NDArray[np.bool_]  # which are ops the plugin counts as CPU Exec

    @property
    def memcpy(self) -> Array:
        return self.copies[: self.memcpy_rows]

    @property
    def memset(self) -> Array:
        return self.copies[self.memcpy_rows :]

    def runtimes(self, where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.bool_]:
        """Which host rows are the runtime calls that `where` (a mask over the runtime calls,
        in file order) picks; all of them without it."""
        if where is None:
            return self.runtime
        rows = self.runtime.copy()
        rows[rows] = where
        return rows


@dataclass
class Part:
    """What a worker process collected from one part (workers.py), with its own name and thread
    ids, which Collector.merge maps to the session's: picklable, numbers and names only."""

    names: list[str]
    thread_keys: list[tuple[int | str, int | str]]
    host: list[tuple[npt.NDArray[np.generic], ...]]
    kernels: list[Array]
    memcpy: list[Array]
    memset: list[Array]
    spans: dict[str, list[Any]]
    comm_ext: set[int]
    counts: dict[str, int]
