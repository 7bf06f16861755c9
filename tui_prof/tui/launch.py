"""Start the TUI from the CLI: check the path, start the first analysis, then load Textual.

Importing Textual and drawing the first frame take about as long as analysing a session, so the
listing and the analysis of the first session start (profiles.prefetch: a thread and a child
process) before Textual is imported.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

from tui_prof.profiles.prefetch import Prefetch
from tui_prof.profiles.timeline import INDEX_ENV


def launch(path: str, peak_tflops: float | None = None) -> int:
    p = Path(path)
    if not p.exists():
        print(f"tuiprof: {path}: no such file or directory", file=sys.stderr)
        return 2
    # The Timeline tab may be opened: large sessions are indexed while the summary reads them
    # (here and in the analysis child, which inherits the environment).
    os.environ[INDEX_ENV] = "1"
    prefetch = Prefetch(p).start()
    # Start-up makes ~80,000 objects that live as long as the app: collecting while they are
    # made is wasted work. The app freezes them and turns collection back on after its first frame.
    gc.disable()
    try:
        from tui_prof.tui.app import TuiprofApp

        TuiprofApp(p, prefetch=prefetch, peak_tflops=peak_tflops).run()
    finally:
        prefetch.close()
    return 0
