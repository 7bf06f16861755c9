"""The cache stores summaries through msgspec from the model's own types: every field of every
sample and shared profile comes back equal, so a field added to the model cannot be lost."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, SHARED_TRACES

from tui_prof.model import ProfileSummary
from tui_prof.profiles import cache
from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import summarize_session


def _sessions(root: Path) -> list[Any]:
    return list(discover(root).sessions) if root.is_dir() else []


def _no_nan(value: Any) -> bool:
    """NaN never equals itself: such a summary is compared through its encoding instead."""
    if isinstance(value, float):
        return not math.isnan(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return all(_no_nan(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list)):
        return all(_no_nan(v) for v in value)
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    return True


def _check(summary: ProfileSummary) -> None:
    data = cache.encode(summary)
    back = cache.decode(data)
    if _no_nan(summary):
        assert back == summary
    assert cache.encode(back) == cache.encode(cache.decode(cache.encode(back)))
    for f in dataclasses.fields(ProfileSummary):  # every field, by name, survives
        assert (getattr(back, f.name) == getattr(summary, f.name)) or not _no_nan(
            getattr(summary, f.name)
        ), f.name


@pytest.mark.parametrize("session", _sessions(SAMPLES), ids=lambda s: f"{s.run}/{s.name}")
def test_every_sample_session_round_trips(session: Any) -> None:
    _check(summarize_session(session))


SHARED = _sessions(SHARED_TRACES)


@pytest.mark.skipif(not SHARED, reason=f"public traces not found at {SHARED_TRACES}")
@pytest.mark.parametrize("session", SHARED, ids=lambda s: f"{s.run}/{s.name}")
def test_every_shared_session_round_trips(session: Any) -> None:
    try:
        summary = summarize_session(session)
    except Exception as exc:  # a deliberately broken public trace: nothing to round-trip
        pytest.skip(f"not readable: {exc}")
    _check(summary)


def test_a_stored_value_that_no_longer_fits_the_types_is_a_miss(tmp_path: Path) -> None:
    key = "0" * 32
    cache.cache_path(key).parent.mkdir(parents=True, exist_ok=True)
    cache.cache_path(key).write_bytes(b"\x81\xa4path\x01")  # {"path": 1}: an older schema
    assert cache.load(key) is None
    cache.cache_path(key).write_bytes(b"not msgpack at all")
    assert cache.load(key) is None
