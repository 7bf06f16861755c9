"""The core never imports textual or tensorflow; the browse path never imports tensorflow."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = [
    "tui_prof.model",
    "tui_prof.profiles.discover",
    "tui_prof.profiles.xplane",
    "tui_prof.profiles.cache",
    "tui_prof.render.summary",
    "tui_prof.cli.summary",
    "tui_prof.profiles.diff",
    "tui_prof.render.diff",
    "tui_prof.cli.diff",
    "tui_prof.experiments.diff_targets",
    "tui_prof.instrument.torch",
]


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return {m.split(".")[0] for m in out.split()}


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_neither_textual_nor_tensorflow(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert "textual" not in loaded
    assert "tensorflow" not in loaded


def test_analysing_a_session_loads_no_tensorflow() -> None:
    code = (
        "from tui_prof.profiles.load import summarize_session\n"
        "from pathlib import Path\n"
        "p = sorted(Path('sample_traces/custom_loop').rglob('*.xplane.pb'))[0]\n"
        "summarize_session(p.parent)"
    )
    loaded = _loaded_after(code)
    assert "tensorflow" not in loaded and "textual" not in loaded and "keras" not in loaded


def test_tui_app_loads_no_tensorflow() -> None:
    loaded = _loaded_after("import tui_prof.tui.app, tui_prof.cli")
    assert "textual" in loaded
    assert "tensorflow" not in loaded
    # numpy (~0.1 s) comes with the Timeline tab or a raw read, not with the first frame.
    assert "numpy" not in loaded


def test_a_cpu_sessions_converter_path_loads_no_numpy() -> None:
    """The raw XSpace decoder (and numpy) is for GPU profiles and own step finding; a session
    the converter reads whole does not wait for its import."""
    code = (
        "from tui_prof.profiles.load import summarize_session\n"
        "from pathlib import Path\n"
        "p = sorted(Path('sample_traces/custom_loop').rglob('*.xplane.pb'))[0]\n"
        "assert summarize_session(p.parent).step_source == 'official'"
    )
    assert "numpy" not in _loaded_after(code)


def test_the_browse_path_loads_no_pandas() -> None:
    """pandas is the notebook API's extra: the package, the TUI and a listed and analysed
    session never import it, though `tui_prof.load` is there."""
    code = (
        "import tui_prof, tui_prof.tui.app, tui_prof.cli.main\n"
        "from tui_prof.profiles.load import summarize_session\n"
        "summarize_session('sample_traces/keras_fit_mixed/train')\n"
        "assert callable(tui_prof.load)"
    )
    assert "pandas" not in _loaded_after(code)


def test_analysing_jax_and_legacy_sessions_loads_no_framework() -> None:
    code = (
        "from tui_prof.profiles.load import summarize_session\n"
        "summarize_session('sample_traces/jax_program_runs')\n"
        "summarize_session('tests/data/legacy_tf22')"
    )
    loaded = _loaded_after(code)
    for framework in ("jax", "jaxlib", "tensorflow", "torch", "textual"):
        assert framework not in loaded, framework


def test_diffing_two_sessions_loads_no_framework() -> None:
    code = (
        "from tui_prof.experiments.diff_targets import diff_targets, path_target\n"
        "diff_targets(path_target('sample_traces/keras_fit_float32'),"
        " path_target('sample_traces/keras_fit_mixed'), use_cache=False)"
    )
    loaded = _loaded_after(code)
    assert not loaded & {"tensorflow", "keras", "torch", "jax", "textual"}
