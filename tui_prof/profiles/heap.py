"""Keep a large profile's read from holding freed memory: big arrays back to the OS when freed
(the Kineto reader's stages, the timeline's index of Kineto and XSpace sessions).

Contract: `bound(reading=True)` before reading a trace, `bound(reading=False)` after it, before
the stages that work on its arrays; `release()` after a stage dropped large arrays; all are
no-ops where the C library lacks `mallopt`/`malloc_trim` (glibc has them; macOS, musl do not). Why: glibc serves an allocation from its heap, not from a mapping of
its own, once the allocation is under its mmap threshold, and it raises that threshold (up to
32 MB) each time a mapped block is freed; the stages' temporaries (tens of MB each on a 2 GiB
trace) then land on the heap, and what they leave when freed stays resident and counts
against the next stage's peak (≈ 190 MB in the op tree alone: benchmarks/README.md, section
9). `bound` fixes the threshold at 1 MB for the stages, so such arrays are mapped and unmapped
when freed; not while reading, where mapping each 4 MB piece anew cost 15% more CPU; `release`
returns the heap's free pages (the column chunks, each under 1 MB).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter numbers (malloc.h)
READING_THRESHOLD = 32 * 2**20
STAGES_THRESHOLD = 2**20


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:  # the process's own symbols (libc's among them): find_library would fork a process
        return ctypes.CDLL(None)
    except OSError:
        return None


def _fn(name: str) -> Callable[..., int] | None:
    fn: Callable[..., int] | None = getattr(_libc(), name, None)
    return fn


def bound(reading: bool) -> None:
    """The threshold for reading (a fixed 32 MB, glibc's highest: the inflated pieces and the
    parts stay on the heap and are reused, as glibc's own rising threshold leaves them) or for
    the stages after it (1 MB: their temporaries mapped, and unmapped when freed)."""
    mallopt = _fn("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, READING_THRESHOLD if reading else STAGES_THRESHOLD)


def release() -> None:
    trim = _fn("malloc_trim")
    if trim is not None:
        trim(0)
