"""Which framework wrote an XSpace profile: JAX or TensorFlow, from the names its events carry.

Contract: `framework_of(paths)` scans the files' bytes (event metadata names are stored once
per plane, so a name anywhere in the file is the signal) and returns "jax", "tensorflow" or ""
(neither seen). JAX's host events are `PjitFunction(...)` (every jitted call); TensorFlow's
runtime leaves `__inference_…` functions, `ExecutorState::Process`, `EagerExecute` and tf.data's
`Iterator::…`. TensorFlow wins where both appear (jax2tf and TF-hosted JAX run in TF).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

JAX_MARKERS: tuple[bytes, ...] = (b"PjitFunction",)
TENSORFLOW_MARKERS: tuple[bytes, ...] = (
    b"__inference_",
    b"ExecutorState::Process",
    b"EagerExecute",
    b"Iterator::",
)
_CHUNK = 8 << 20


def _seen(path: Path, markers: tuple[bytes, ...]) -> set[bytes]:
    found: set[bytes] = set()
    overlap = max(len(m) for m in markers) - 1
    tail = b""
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                data = tail + chunk
                found.update(m for m in markers if m in data)
                tail = data[-overlap:]
    except OSError:
        return found
    return found


def framework_of(paths: Sequence[Path]) -> str:
    """ "tensorflow", "jax" or "" for a session's host files."""
    markers = JAX_MARKERS + TENSORFLOW_MARKERS
    seen: set[bytes] = set()
    for p in paths:
        seen |= _seen(p, markers)
    if seen & set(TENSORFLOW_MARKERS):
        return "tensorflow"
    if seen & set(JAX_MARKERS):
        return "jax"
    return ""
