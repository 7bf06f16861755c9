"""The CLI's edges: one usage block in `tuiprof --help`, and a reader that goes away (`| head`)
ends the command quietly, whatever it prints."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLES

from tui_prof.cli.main import SUBCOMMANDS, main


def test_help_prints_one_usage_block_naming_path_and_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.count("usage:") == 1
    assert "tuiprof [-h] [--version] [--peak-tflops TFLOPS] [PATH]" in out
    assert "tuiprof COMMAND" in out
    for command in SUBCOMMANDS:
        assert f"    {command} " in out


def test_a_subcommands_usage_names_only_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["summary", "--help"])
    assert capsys.readouterr().out.startswith("usage: tuiprof summary [-h]")


@pytest.mark.parametrize("fmt", ["--json", "--markdown", "--csv", None])
def test_a_closed_pipe_ends_summary_without_a_traceback(fmt: str | None) -> None:
    args = [sys.executable, "-m", "tui_prof.cli", "summary", str(SAMPLES / "custom_loop")]
    proc = subprocess.Popen(
        [*args, *([fmt] if fmt else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line: every write is EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(120) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err, err
