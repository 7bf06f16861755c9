"""The launcher's head start: the first session analysed in a child process, read from the cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES

from tui_prof.profiles.assemble import step_time_words
from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import summarize_session
from tui_prof.profiles.prefetch import CACHED, REST_NICE, Prefetch, cached


def test_a_cold_start_analyses_in_a_child_and_a_warm_one_starts_none() -> None:
    cold = Prefetch(SAMPLES).start()
    assert cold.analysed.wait(60)
    assert cold.summary is not None and cold.session is not None and cold.error is None
    expected = summarize_session(cold.session)
    assert cold.summary.average == expected.average and cold.summary.steps == expected.steps
    assert cold._child is not None  # the child did the work: the cache holds it
    assert cached(cold.session)

    warm = Prefetch(SAMPLES).start()
    assert warm.listed.is_set()  # listed before start returns: the cache's answer needs it
    # The cache holds it: no child (nor its converter's process) takes the cores from Textual.
    assert warm._child is None
    assert warm.analysed.wait(60)
    assert warm.summary == cold.summary


def test_without_a_child_the_thread_analyses_itself() -> None:
    pre = Prefetch(SAMPLES).start(child=False)
    assert pre.analysed.wait(60)
    assert pre.summary is not None and pre._child is None


def test_the_child_says_the_step_time_before_the_rest_and_when_the_cache_holds_it(
    tmp_path: Path,
) -> None:
    """A cold first screen shows the step time while the tables and the memory profile are read:
    the child reports it, worded as the headline words it, before its summary is done."""
    path = SAMPLES / "keras_fit_step_markers"  # official steps: the converter has them
    out = subprocess.run(
        [sys.executable, "-m", "tui_prof.profiles.prefetch", str(path)],
        capture_output=True,
        env={**os.environ, "TUIPROF_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)},
        timeout=120,
        check=True,
    ).stdout.splitlines(keepends=True)
    assert out[-1] == CACHED
    texts = [line.decode().rstrip("\n").partition("\t")[2] for line in out[:-1]]
    summary = summarize_session(discover(path).sessions[0])
    assert summary.average is not None
    mean, rest = step_time_words(summary.average, len(summary.steps))
    early = " ".join(f"{mean}{rest}".split())
    first = next(i for i, t in enumerate(texts) if "per step" in t)
    assert texts[first].startswith(early), (texts, early)
    assert first < texts.index("done")


YIELD_AND_SAY = (
    "import os, time\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"  # a process of the group, as the converter's is; killed below
    "    time.sleep(60)\n"  # outlives the parent's imports however slow (5 s was the margin)
    "    os._exit(0)\n"
    "from tui_prof.profiles.prefetch import _yield_to_the_screen\n"
    "_yield_to_the_screen()\n"
    "print(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, pid))\n"
    "os.kill(pid, 9)\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness of a group: Linux")
@pytest.mark.parametrize("own_group", [True, False])
def test_once_the_step_time_is_out_the_analysis_group_yields_but_never_its_caller(
    own_group: bool,
) -> None:
    """The launcher's child leads its own group: it and its converter's process drop to
    REST_NICE. Run from a shell or a harness (in the caller's group) it changes nothing."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    out = subprocess.run(
        [sys.executable, "-c", YIELD_AND_SAY],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=own_group,
        timeout=60,
        check=True,
    ).stdout.split()
    expected = max(mine, REST_NICE) if own_group else mine
    assert out == [str(expected), str(expected)]
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine
