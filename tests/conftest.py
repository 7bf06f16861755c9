"""Shared fixtures: where the real traces are, and a private summary cache per test."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
SHARED = REPO.parent / "shared"
SHARED_TRACES = SHARED / "traces"
GPU_LOGDIR = SHARED_TRACES / "tf_gpu_multi_worker"

needs_shared = pytest.mark.skipif(
    not GPU_LOGDIR.is_dir(),
    reason=f"public traces not found at {SHARED_TRACES} (a fresh clone has no ../shared)",
)


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test starts with an empty summary cache, so no test passes on another's leftovers."""
    d = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("TUIPROF_CACHE_DIR", str(d))
    # The TUI's error log ($XDG_STATE_HOME/tuiprof/errors.log) stays out of the user's home too.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    return d


def sample_session(name: str) -> Path:
    """The one session directory of a sample run (names carry the time they were recorded)."""
    found = sorted(p.parent for p in (SAMPLES / name).rglob("*.xplane.pb"))
    assert found, (
        f"sample_traces/{name} has no profile; regenerate: python examples/make_sample_traces.py"
    )
    return found[0]


def official_overview(paths: list[Path]) -> list[dict]:
    """TensorBoard's converter called directly (not through tuiprof), for tests to compare against."""
    import json
    import tempfile

    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as tmp:
        data, _ = raw_to_tool_data.xspace_to_tools_data_from_byte_string(
            [p.read_bytes() for p in paths],
            [os.path.join(tmp, p.name) for p in paths],
            "overview_page",
            {"use_saved_result": False},
        )
    return json.loads(data)


async def settle(pilot) -> None:
    """Wait until no worker has run for two rounds (workers here start workers: scan → compare),
    instead of sleeping. The logdir follower runs as long as its screen, so it is not waited for."""
    from tui_prof.tui.screens.browse import FOLLOW_GROUP

    quiet = 0
    for _ in range(50):
        workers = [w for w in pilot.app.workers if w.group != FOLLOW_GROUP]
        busy = any(w.is_running for w in workers)
        # Failed and cancelled workers end too; the app's handler reports failures.
        await asyncio.gather(*(w.wait() for w in workers), return_exceptions=True)
        await pilot.pause(0.05)
        quiet = 0 if busy else quiet + 1
        if quiet >= 2:
            return
