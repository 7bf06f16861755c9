"""Summaries cached on disk by (path, size, mtime) of every host file, so reopening is instant.

Contract: `cached_summary(session, compute)` returns the stored ProfileSummary when no host file
changed since it was computed, else computes, stores atomically and returns it. The cache lives
under $TUIPROF_CACHE_DIR, else $XDG_CACHE_HOME/tuiprof, else ~/.cache/tuiprof; a cache that
cannot be read or written is skipped silently (it is an optimisation, never a source of errors).

A summary is stored as MessagePack encoded and decoded by msgspec from the model's own types
(`encode`, `decode`): a field added to any of them is stored with no code here, and a stored
value that no longer fits the types (an older schema) reads as a miss. MessagePack rather than
JSON because it keeps NaN and infinities as floats. `ProfileSummary.to_dict()` is the public
JSON contract, a separate thing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec

from tui_prof import __version__
from tui_prof.model import ProfileSummary
from tui_prof.profiles.discover import Session, display_path

# 2: top_ops holds every op (the diff needs them all), no longer the first 50.
# 3: device utilisation, XLA programs, the precision's source.
# 4: kernels carry their launch shape (grid, block).
# 5: names made printable (tui_prof.printable) before they are stored.
# 6: efficiency (FLOPs, MFU) and memory; ops carry their FLOPs and bytes.
# 7: PyTorch traces: the plugin's GPU figures (gpu_metrics).
# 8: the verdict's parts (dominant, secondary, start-up) and start-up calls.
# 9: stored as msgspec MessagePack of the model's types (no hand-written mirror).
# 10: float32 math that ran as TF32 counts against the TF32 peak; FFMA xmma kernels are not Tensor Cores.
# 11: XSpace GPU FLOPs counted from the profile's own HLO too (library GEMM calls).
# 12: Precision.measured (a 16-bit share that rests on no types is not shown as one).
# 13: several hosts' devices named "host · device"; a TPU's device compute from its "XLA Ops" lines.
# 14: the timeline's XSpace host events that launched device work are kernel launch.
SCHEMA = 14
SUFFIX = ".msgpack"

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(ProfileSummary)


def encode(summary: ProfileSummary) -> bytes:
    """The summary as stored, derived from the model's dataclasses."""
    return _ENCODER.encode(summary)


def decode(data: bytes) -> ProfileSummary:
    """A stored summary; msgspec.DecodeError (a ValueError) where it does not fit the types."""
    return _DECODER.decode(data)


def cache_dir() -> Path:
    if os.environ.get("TUIPROF_CACHE_DIR"):
        return Path(os.environ["TUIPROF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tuiprof"


def cache_key(session: Session, variant: str = "") -> str:
    """Changes whenever a host file, tuiprof's version or the analysis variant changes."""
    h = hashlib.sha256(f"{SCHEMA}|{__version__}|{variant}".encode())
    for host in sorted(session.hosts, key=lambda x: str(x.path)):
        for path in (host.path, *host.extra):
            st = path.stat()
            h.update(b"|" + os.fsencode(os.path.abspath(path)))
            h.update(f"|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def cache_path(key: str) -> Path:
    return cache_dir() / f"{key}{SUFFIX}"


def load(key: str) -> ProfileSummary | None:
    try:
        return decode(cache_path(key).read_bytes())
    except (OSError, ValueError):
        return None


def store(key: str, summary: ProfileSummary) -> None:
    directory = cache_dir()
    try:
        data = encode(summary)
    except (TypeError, ValueError, msgspec.EncodeError):  # outside the types (a bug): not cached
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, cache_path(key))
    except OSError:
        return


def cached_summary(
    session: Session, compute: Callable[[], ProfileSummary], variant: str = ""
) -> ProfileSummary:
    try:
        key = cache_key(session, variant)
    except OSError:
        return compute()
    hit = load(key)
    if hit is not None:
        return dataclasses.replace(hit, path=display_path(session.path))
    summary = compute()
    store(key, summary)
    return summary
