"""Results of background work that arrive while the app shuts down are dropped, not crashed on.

Textual closes an installed screen that is not on the stack (Browse, while Experiments shows)
after its widgets, in no fixed order, so a listing finished at that moment used to find the
session view's `#status` gone (NoMatches)."""

from __future__ import annotations

from pathlib import Path

from tui_prof.profiles.discover import discover
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.messages import LogdirScanned


async def test_a_listing_that_lands_after_the_app_closed_is_dropped(tmp_path: Path) -> None:
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")  # Browse goes off the stack
        await pilot.pause(0.2)
        browse = app.browse
    assert not app.is_running
    with app._context():  # as during Textual's shutdown, which closes the widgets in any order
        for child in list(browse.walk_children()):
            await child._close_messages()
        browse.on_logdir_scanned(LogdirScanned(discover(tmp_path)))  # an empty logdir's listing
