"""Give freed heap memory back to the OS between the stages of reading a large trace.

Contract: `release()` after a stage dropped large arrays; a no-op where the C library has no
`malloc_trim` (glibc has it; macOS and musl do not). Why: the reader builds its columns from
many batch-sized numpy chunks (each well under glibc's mmap threshold, so they live on the
heap); once they are concatenated and dropped, glibc keeps the freed pages, and on a 2 GiB trace
that was ≈ 180 MB of resident memory counted against the next stages' peak
(benchmarks/README.md, section 9).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return fn


def release() -> None:
    trim = _trim()
    if trim is not None:
        trim(0)
