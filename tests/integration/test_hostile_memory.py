"""Bounded memory and time whatever a job reports: its metrics summarised as they stream, a cap
on distinct names (said in the run's log), and `compare` linear in the number of metrics."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_cli

from tui_prof.experiments import protocol


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def test_metrics_are_summarised_as_they_stream(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    n = protocol.MAX_SERIES + 5_000
    with open(path, "w") as f:  # one name many times, then 2,000 distinct names
        f.writelines(f'{{"loss": {i}}}\n' for i in range(n))
        f.writelines(f'{{"m{i}": 1}}\n' for i in range(2_000))
    reader = protocol.MetricsReader(path)
    new = reader.poll(final=True)
    s = reader.state
    assert s.lines == n + 2_000 and len(s.series) == protocol.MAX_SERIES == len(new)
    assert len(s.final) == protocol.MAX_NAMES and s.final["loss"] == n - 1
    assert s.dropped_names == 2_000 - (protocol.MAX_NAMES - 1)
    assert (
        s.samples["loss"].count == n and len(s.samples["loss"].values) == s.samples["loss"].cap < n
    )


def test_a_long_line_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"x" * (2 * protocol.READ_CHUNK + 5) + b'\n{"ok": 1}\n')
    reader = protocol.MetricsReader(path)
    reader.poll(final=True)
    assert reader.state.final == {"ok": 1} and reader.state.bad_lines >= 1


def test_too_many_names_are_said_in_the_runs_log(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "import os\n"
        "with open(os.environ['TUIPROF_METRICS_FILE'], 'a') as f:\n"
        "    f.writelines('{\"m%d\": 1}\\n' % i for i in range(1500))\n"
    )
    out = tmp_path / "out"
    r = _cli("run", "--headless", "--repeats", "1", "--output", str(out), "--variant",
             f"a={sys.executable} {job}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    log = next(out.rglob("output.log")).read_text()
    assert f"more than {protocol.MAX_NAMES} metric names; 500 reports" in log


def test_compare_with_thousands_of_metrics(tmp_path: Path) -> None:
    """5,000 names in every run (an older store, or a cap raised): one row each past the first
    sections, all of them in --json, in seconds."""
    job = tmp_path / "job.py"
    job.write_text("pass\n")
    out = tmp_path / "out"
    r = _cli("run", "--headless", "--repeats", "2", "--output", str(out), "--variant",
             f"a={sys.executable} {job}", "--variant", f"b={sys.executable} {job}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(out / "experiment.sqlite") as db:
        for k, (run_id,) in enumerate(db.execute("SELECT run_id FROM runs").fetchall()):
            metrics = {f"m{i}": float(i + k) for i in range(5_000)} | {"wall_time_s": 1.0}
            db.execute(
                "UPDATE runs SET metrics = ? WHERE run_id = ?", (json.dumps(metrics), run_id)
            )
    for fmt in ([], ["--markdown"], ["--json"]):
        t = time.monotonic()
        c = _cli("compare", *fmt, str(out))
        took = time.monotonic() - t
        assert c.returncode == 0, c.stderr
        assert took < 120, took  # was ~75 s for the Rich view alone before (and 2.7 GB at 1M)
        if fmt == ["--json"]:
            assert len(json.loads(c.stdout)["metrics"]) == 5_001
        else:
            assert "more metrics" in c.stdout
