"""Start the TUI from the CLI: check the path first, so a typo gets one line, not a screen."""

from __future__ import annotations

import sys
from pathlib import Path


def launch(path: str) -> int:
    p = Path(path)
    if not p.exists():
        print(f"tuiprof: {path}: no such file or directory", file=sys.stderr)
        return 2
    from tui_prof.tui.app import TuiprofApp

    TuiprofApp(p).run()
    return 0
