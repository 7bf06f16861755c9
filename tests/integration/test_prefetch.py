"""The launcher's head start: the first session analysed in a child process, read from the cache."""

from __future__ import annotations

from conftest import SAMPLES

from tui_prof.profiles.load import summarize_session
from tui_prof.profiles.prefetch import Prefetch, cached


def test_a_cold_start_analyses_in_a_child_and_a_warm_one_stops_it() -> None:
    cold = Prefetch(SAMPLES).start()
    assert cold.analysed.wait(60)
    assert cold.summary is not None and cold.session is not None and cold.error is None
    expected = summarize_session(cold.session)
    assert cold.summary.average == expected.average and cold.summary.steps == expected.steps
    assert cold._child is not None and cold._child.returncode == 0  # it did the work
    assert cached(cold.session)

    warm = Prefetch(SAMPLES).start()
    assert warm.analysed.wait(60)
    assert warm.summary == cold.summary
    # Not needed: stopped at once (or, on a fast machine, already done reading the cache).
    assert warm._child is None or warm._child.poll() is not None


def test_without_a_child_the_thread_analyses_itself() -> None:
    pre = Prefetch(SAMPLES).start(child=False)
    assert pre.analysed.wait(60)
    assert pre.summary is not None and pre._child is None
