"""Start the TUI from the CLI: check the path, start the first analysis, then load Textual.

Importing Textual and drawing the first frame take about as long as analysing a session, so the
analysis of the first session starts in a thread (profiles.prefetch) before Textual is imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tui_prof.profiles.prefetch import Prefetch


def launch(path: str) -> int:
    p = Path(path)
    if not p.exists():
        print(f"tuiprof: {path}: no such file or directory", file=sys.stderr)
        return 2
    prefetch = Prefetch(p).start()
    from tui_prof.tui.app import TuiprofApp

    TuiprofApp(p, prefetch=prefetch).run()
    return 0
