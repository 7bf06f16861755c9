"""The observer's own CPU while an experiment's runs run: the observer out of the measurement.

    python benchmarks/observer_cpu.py [--seconds 12] [--rounds 2]

An experiment of jobs that only sleep (`sleep S`, one at a time, 2 variants x 2 repeats) is run by
a real tuiprof process in three ways, alternating:
- `cli-headless`: `tuiprof run SPEC --headless` (plain lines, no terminal);
- `cli-live`: `tuiprof run SPEC` in a real pseudo-terminal (120x40), its live table drawn;
- `tui`: `tuiprof DIR` in a real pseudo-terminal (120x40), the experiment started from the `r`
  dialog by keystrokes (`r`, Tab to an input, Enter: the dialog runs the spec file `tuiprof.toml`
  in DIR), so the Experiments view shows the runs live.
The benchmark drains the terminal's output as a terminal would. Measured: the CPU time of the
tuiprof process itself (its own threads' utime + stime from /proc/PID/stat, not its jobs'), over
a window that starts 2 s after the first run started and lasts until 1 s before the last job
ends, as a share of one core. The jobs print nothing, so the window holds no output bursts:
what it measures is the observer's idle cost (timers, polls, redraws). Aim: <= 3% of one core.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

from _common import PYTHON, REPO, preflight, write_result

TICK = os.sysconf("SC_CLK_TCK")
SIZE = (40, 120)  # rows, columns


def cpu_seconds(pid: int) -> float:
    """The process's own CPU time (all its threads; not its children's)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def write_spec(d: Path, sleep_s: float) -> Path:
    spec = d / "tuiprof.toml"
    spec.write_text(
        f'name = "sleepers"\ncommand = ["sleep", "{sleep_s}"]\nrepeats = 2\n'
        f'output = "{d / "out"}"\n[variants.a]\n[variants.b]\n',
        encoding="utf-8",
    )
    return spec


def _pty_process(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[0], SIZE[1], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()
    return proc, master


def _wait_for(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def _started(out: Path) -> bool:
    return any(out.glob("*/runs/*/output.log")) if out.exists() else False


def measure(mode: str, seconds: float) -> dict[str, Any]:
    """One experiment of 4 sleeping runs observed one way; the observer's CPU share in the window."""
    with tempfile.TemporaryDirectory(prefix="tuiprof-observer-") as tmp:
        d = Path(tmp)
        spec = write_spec(d, seconds / 2 + 1.5)  # two runs cover the window
        cli = [PYTHON, "-m", "tui_prof.cli"]
        master = None
        if mode == "cli-headless":
            proc = subprocess.Popen(
                [*cli, "run", str(spec), "--headless"],
                cwd=d,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        elif mode == "cli-live":
            proc, master = _pty_process([*cli, "run", str(spec)], d)
        else:
            proc, master = _pty_process([*cli, str(d)], d)
            time.sleep(4.0)  # the first frame (nothing to analyse in an empty directory)
            for keys, pause in ((b"r", 1.5), (b"\t", 0.5), (b"\r", 0.5)):
                os.write(master, keys)
                time.sleep(pause)
        try:
            _wait_for(lambda: _started(d / "out"), 60, f"{mode}: the first run")
            time.sleep(2.0)
            t0, c0 = time.monotonic(), cpu_seconds(proc.pid)
            time.sleep(seconds)
            t1, c1 = time.monotonic(), cpu_seconds(proc.pid)
        finally:
            if mode == "tui" and master is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if master is not None:
                os.close(master)
    share = (c1 - c0) / (t1 - t0)
    return {"mode": mode, "window_s": round(t1 - t0, 2), "cpu_s": c1 - c0, "share": share}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=12.0, help="measuring window per experiment")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", default="cli-headless,cli-live,tui")
    args = ap.parse_args()
    preflight("textual")
    results: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        for mode in args.modes.split(","):
            r = measure(mode, args.seconds)
            results.append(r)
            print(
                f"{mode:<14} {r['share'] * 100:5.1f}% of one core over {r['window_s']} s",
                flush=True,
            )
    by_mode: dict[str, list[float]] = {}
    for r in results:
        by_mode.setdefault(r["mode"], []).append(r["share"])
    for mode, shares in by_mode.items():
        print(f"{mode:<14} max {max(shares) * 100:.1f}%  (aim <= 3%)")
    write_result(
        "observer_cpu",
        {"load_avg": os.getloadavg(), "rounds": results, "aim_share": 0.03},
    )


if __name__ == "__main__":
    sys.exit(main())
