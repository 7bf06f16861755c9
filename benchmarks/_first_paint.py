"""Child process for bench_startup.py: open the TUI headless and report when the headline has numbers.

Prints one JSON line: seconds from the parent's spawn time (BENCH_T0, a time.time() taken just
before this process was started) to (a) the app's first frame and (b) the first refresh after
the "#headline" Static received the session's numbers. Runs Textual's own headless driver
(App.run_test), the same app object `tuiprof PATH` builds.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

T0 = float(os.environ.get("BENCH_T0", "nan"))
if T0 != T0:  # no parent timestamp: fall back to this process's start time from /proc
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    T0 = time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


async def main(path: Path, timeout: float) -> dict[str, float | str]:
    t_import = time.time()
    from textual.widgets import Static

    from tui_prof.tui.app import TuiprofApp

    t_imported = time.time()
    app = TuiprofApp(path)
    marks: dict[str, float | str] = {"imports_s": t_imported - t_import}
    async with app.run_test(size=(120, 40)) as pilot:
        marks["first_frame_s"] = time.time() - T0
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                text = str(app.screen.query_one("#headline", Static).content)
            except Exception:  # the browse screen is not mounted yet
                text = ""
            if text.strip():
                await pilot.pause()  # let the compositor lay out and render that frame
                marks["headline_s"] = time.time() - T0
                marks["headline"] = text.splitlines()[0]
                break
            await asyncio.sleep(0.002)
        else:
            marks["error"] = "timed out waiting for the headline"
    return marks


if __name__ == "__main__":
    result = asyncio.run(main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 60.0))
    print(json.dumps(result))
