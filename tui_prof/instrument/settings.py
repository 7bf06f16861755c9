"""Settings a job reads from tuiprof, so an experiment can change them without the job's own
command line: `TUIPROF_PRECISION`, `TUIPROF_XLA`, `TUIPROF_BATCH_SIZE`, `TUIPROF_PREFETCH`.

    from tui_prof.instrument import settings

    policy = settings.precision("float32")   # "float32" or "mixed"
    jit = settings.xla(False)                # True when TUIPROF_XLA=1
    batch = settings.batch_size(32)
    overlap = settings.prefetch(False)       # True when TUIPROF_PREFETCH=1

Contract: each helper returns the variable's value, or the job's default where it is unset or
unreadable (with one line on stderr for the latter). Under `tuiprof run` it also reports that
the job reads the setting (`{"info": {"tuiprof_settings": {VAR: value}}}`): that is how
tuiprof knows this job's precision, XLA, batch size or input pipeline can be changed by an
environment variable, and the TUI's new-experiment dialog then offers such a change as a second
variant (`mixed=TUIPROF_PRECISION=mixed python train.py`) where a profile's advice names it.
Imports no framework; what the value means is the job's business.
"""

from __future__ import annotations

import os
import sys

from tui_prof.experiments.protocol import SETTING_VARS, SETTINGS_KEY
from tui_prof.instrument.report import report_line

_read: dict[str, str] = {}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _get(setting: str, default: str) -> str:
    var = SETTING_VARS[setting]
    value = os.environ.get(var)
    seen = default if value is None else value
    if _read.get(var) != seen:  # once per setting, however often a job asks
        _read[var] = seen
        report_line({"info": {SETTINGS_KEY: dict(_read)}})  # no-op outside tuiprof
    return seen


def _flag(setting: str, default: bool) -> bool:
    raw = _get(setting, "1" if default else "0").strip().lower()
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    print(
        f"tuiprof: {SETTING_VARS[setting]}={raw!r} is not 0 or 1; using {default}", file=sys.stderr
    )
    return default


def precision(default: str = "float32") -> str:
    """$TUIPROF_PRECISION: "float32", or "mixed" for the framework's mixed precision."""
    return _get("precision", default).strip() or default


def xla(default: bool = False) -> bool:
    """$TUIPROF_XLA: compile the training step (XLA, `jit_compile=True`, `torch.compile`)."""
    return _flag("xla", default)


def batch_size(default: int) -> int:
    """$TUIPROF_BATCH_SIZE: a positive integer."""
    raw = _get("batch_size", str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        print(f"tuiprof: TUIPROF_BATCH_SIZE={raw!r} is not a positive integer; using {default}",
              file=sys.stderr)  # fmt: skip
        return default
    return value


def prefetch(default: bool = False) -> bool:
    """$TUIPROF_PREFETCH: overlap the input pipeline with training (prefetch, parallel map)."""
    return _flag("prefetch", default)
