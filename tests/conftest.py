"""Shared fixtures: where the real traces are, and a private summary cache per test."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from textual.app import App
    from textual.pilot import Pilot
    from textual.widget import Widget

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SAMPLES = REPO / "sample_traces"
SHARED = REPO.parent / "shared"
SHARED_TRACES = SHARED / "traces"
GPU_LOGDIR = SHARED_TRACES / "tf_gpu_multi_worker"
# PyTorch (Kineto) traces the reference tests read: the PyTorch plugin's own sample, today's
# traces, an AMD one (../shared), and the committed H100 samples.
PLUGIN_SAMPLE = SHARED_TRACES / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"
TODAY = [
    SHARED_TRACES / "kineto" / f
    for f in (
        "a100_rank0.json.gz",
        "sampled_rank-0.json.gz",
        "benchmark_result_2869224_1695835535_trace.json.gz",
        "benchmark_result_924719_1679055439_trace.json.gz",
    )
]
MI250 = SHARED_TRACES / "kineto" / "mi250_minitoy_train.json.gz"
# Committed samples (examples/train_torch.py on an H100, PyTorch 2.11): no ../shared needed.
H100_SAMPLES = sorted(SAMPLES.glob("torch_cuda_*/*.pt.trace.json.gz"))

# The `quick` inner loop (`pytest -m quick`, under two minutes on 2 cores): everything but
# tests/integration (whole processes: jobs, servers, frameworks, the CLI as a subprocess), the
# unit and TUI modules named here (whole TUI sessions, simulations) and the slow or torch tests.
# A new unit or TUI module is quick until it is named here.
NOT_QUICK = frozenset(
    {
        "test_experiments_live_log",
        "test_keys",
        "test_new_experiment",
        "test_snapshots",
        "test_stats_simulation",
        "test_tui",
        "test_tui_diff",
        "test_tui_efficiency",
        "test_tui_workers",
        "test_tui_xla",
    }
)
INTEGRATION = TESTS / "integration"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.stem
        slow = any(item.get_closest_marker(name) for name in ("slow", "torch"))
        integration = item.path.is_relative_to(INTEGRATION)
        if module not in NOT_QUICK and not slow and not integration:
            item.add_marker(pytest.mark.quick)


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


def official_overview(paths: list[Path]) -> list[dict[str, Any]]:
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
    rows: list[dict[str, Any]] = json.loads(data)
    return rows


async def until(pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 30) -> None:
    """Let the app run until `predicate()` holds (a condition, not a sleep); fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for the app"
        await pilot.pause(0.05)


W = TypeVar("W", bound="Widget")


async def shown(
    pilot: Pilot[Any], selector: str | type[W], expect_type: type[W] | None = None
) -> W:
    """The widget `selector` on the current screen, once it is mounted there. A screen or a tab
    mounts its widgets over several turns of the event loop after the key that shows it, and
    `pilot.pause()` (Textual's idle guess: little CPU used meanwhile) returns early on a loaded
    machine, where the process got little CPU either way."""
    from textual.widget import Widget

    found: list[Widget] = []

    def mounted() -> bool:
        found[:] = [w for w in pilot.app.screen.query(selector) if w.is_mounted]
        return bool(found)

    await until(pilot, mounted)
    widget = found[0]
    want = expect_type or (selector if isinstance(selector, type) else Widget)
    assert isinstance(widget, want), widget
    return widget  # type: ignore[return-value]


async def filled(
    pilot: Pilot[Any], selector: str | type[W], expect_type: type[W] | None = None
) -> W:
    """A table of the current screen once it has rows: a tab's table is drawn when the tab
    first has a width, some frames after the key that shows it."""
    table = await shown(pilot, selector, expect_type)
    await until(pilot, lambda: getattr(table, "row_count", 0) > 0)
    return table


def needs_module(module: str, extra: str) -> pytest.MarkDecorator:
    """Skip, saying why, where an optional framework (an extra) is not installed."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed (an extra: pip install -e '.[{extra}]')",
    )


def static_text(app: App[Any], selector: str) -> str:
    """What a Static shows, as plain text (Rich renderables rendered as a terminal would)."""
    from rich.console import Console
    from textual.widgets import Static

    w = app.screen.query_one(selector, Static)
    console = Console(width=200, color_system=None, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(w.content)
    return console.export_text()


async def settle(pilot: Pilot[Any]) -> None:
    """Wait until no worker has run for two rounds (workers here start workers: scan → compare),
    instead of sleeping. The logdir follower runs as long as its screen, so it is not waited for."""
    from tui_prof.tui.screens.browse import FOLLOW_GROUP

    quiet = 0
    for _ in range(50):  # three rounds settle every screen in the tests (measured)
        workers = [w for w in pilot.app.workers if w.group != FOLLOW_GROUP]
        busy = any(w.is_running for w in workers)
        # Failed and cancelled workers end too; the app's handler reports failures.
        await asyncio.gather(*(w.wait() for w in workers), return_exceptions=True)
        await pilot.pause(0.05)
        quiet = 0 if busy else quiet + 1
        if quiet >= 2:
            return
    # Going on unsettled made a test check (or a snapshot draw) a screen still changing.
    raise AssertionError("the app never settled: workers kept starting for 50 rounds")


def script_env(**extra: str) -> dict[str, str]:
    """The environment of a child process running this checkout's code; a test module re-run as a
    script there (in a network namespace, say) finds conftest and the helper modules beside it as
    pytest's own import does, wherever under tests/ it lives."""
    old = os.environ.get("PYTHONPATH")
    path = os.pathsep.join([str(REPO), str(TESTS), *([old] if old else [])])
    return {**os.environ, "PYTHONPATH": path, **extra}


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`tuiprof ARGS` as a user runs it: a process of its own, this checkout's code."""
    return subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        cwd=cwd,
        timeout=timeout,
    )
