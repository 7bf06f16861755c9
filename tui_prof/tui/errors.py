"""Where a failure's traceback goes, so the screen can show one line and name the file.

Contract: `log_failure` appends the traceback to `$XDG_STATE_HOME/tuiprof/errors.log` (by default
`~/.local/state/tuiprof/errors.log`) and returns the path as a user would type it, or None when
it cannot be written; it never raises.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "tuiprof"


def one_line(error: BaseException) -> str:
    """`ValueError: what went wrong`, the first line only, at most 200 characters."""
    text = str(error).strip().splitlines()
    line = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    return line if len(line) <= 200 else line[:199] + "…"


def _shown(path: Path) -> str:
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text


def log_failure(what: str, error: BaseException) -> str | None:
    """Append `what` and the error's traceback to the log; the path to show, or None."""
    path = state_dir() / "errors.log"
    entry = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {what}\n{entry}\n")
    except OSError:
        return None
    return _shown(path)
