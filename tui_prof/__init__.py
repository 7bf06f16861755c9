"""tuiprof: browse TensorBoard profiles and compare repeated training runs in the terminal.

In a notebook, `tui_prof.load(PATH)` and `tui_prof.load_experiment(DIR)` give the same numbers as
pandas DataFrames (tui_prof.notebook; pandas is the extra `tuiprof[pandas]`, imported only then).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_prof.notebook import ExperimentFrames, Sessions

__version__ = "0.1.0"


def load(path: str | Path, *, fallback: bool = False, use_cache: bool = True) -> Sessions:
    """Every profile session under `path`, with `steps`, `ops`, `kernels` as DataFrames."""
    from tui_prof.notebook import load as _load

    return _load(path, fallback=fallback, use_cache=use_cache)


def load_experiment(path: str | Path) -> ExperimentFrames:
    """An experiment directory; `.runs` is one DataFrame row per run."""
    from tui_prof.notebook import load_experiment as _load_experiment

    return _load_experiment(path)
