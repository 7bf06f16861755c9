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
import os
import tempfile
from collections.abc import Callable

import msgspec

from tui_prof.model import ProfileSummary
from tui_prof.profiles.cache_keys import SCHEMA, SUFFIX, cache_dir, cache_key, cache_path
from tui_prof.profiles.discover import Session, display_path

__all__ = [  # the key's names re-exported: callers use this module for both
    "SCHEMA",
    "SUFFIX",
    "cache_dir",
    "cache_key",
    "cache_path",
    "cached_summary",
    "decode",
    "encode",
    "load",
    "store",
]

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(ProfileSummary)


def encode(summary: ProfileSummary) -> bytes:
    """The summary as stored, derived from the model's dataclasses."""
    return _ENCODER.encode(summary)


def decode(data: bytes) -> ProfileSummary:
    """A stored summary; msgspec.DecodeError (a ValueError) where it does not fit the types."""
    return _DECODER.decode(data)


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
