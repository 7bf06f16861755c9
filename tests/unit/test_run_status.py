"""One run-status type, one look: the CLI's live table and the TUI's run table draw it alike."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tui_prof.model import RunRecord, RunStatus
from tui_prof.render.status import RUN_STATUS_LOOK, status_text


def test_every_status_has_a_look_and_keeps_its_stored_string() -> None:
    assert set(RUN_STATUS_LOOK) == set(RunStatus)
    assert [s.value for s in RunStatus] == [
        "pending",
        "running",
        "finished",
        "failed",
        "timeout",
        "interrupted",
        "stopped",
        "queued",
    ]
    stored: str = RunStatus.RUNNING  # what SQLite and the JSON hold: the plain string
    assert RunStatus("running") is RunStatus.RUNNING and stored == "running"


def test_status_reads_without_colour() -> None:
    console = Console(width=40, color_system=None, record=True)
    console.print(status_text("failed"), status_text("finished"))
    assert console.export_text().split() == ["✗", "failed", "✓", "finished"]


def test_cli_and_tui_draw_running_the_same() -> None:
    from textual.widgets import DataTable  # noqa: F401  (the TUI's table module imports it)

    from tui_prof.cli.run import _Board
    from tui_prof.tui.widgets.run_table import RunTable

    run = RunRecord(run_id="a-r0", variant="a", repeat=0, status=RunStatus.RUNNING)
    board = _Board()
    board.runs[run.run_id] = run
    table = board.table("x", (), 10)
    cli_cell = next(iter(table.columns[1].cells))
    tui_cell = RunTable()._cells(run, 0.0)[2]
    assert isinstance(cli_cell, Text) and isinstance(tui_cell, Text)
    assert cli_cell.style == tui_cell.style == "bold cyan"
    assert cli_cell.plain == tui_cell.plain == "▶ running"


async def test_run_table_cells_are_whole_in_the_first_frame() -> None:
    """DataTable measures new rows when its queue is idle; a frame drawn before that (a busy
    machine) cut every cell to its header's width (`✓ fini`): the table sets widths itself."""
    from textual.app import App, ComposeResult

    from tui_prof.tui.widgets.run_table import RunTable

    runs = [
        RunRecord(
            run_id=f"a-r{i}",
            variant="a",
            repeat=i,
            status=RunStatus.FINISHED,
            progress="epoch 2/2",
            metrics={"loss": 0.5, "accuracy": 0.9},
        )
        for i in range(3)
    ]

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RunTable()

    app = One()
    async with app.run_test(size=(100, 20)):
        table = app.query_one(RunTable)
        table.show_runs(runs)
        table._clear_caches()  # draw now, before the table's idle handler ran
        row = "".join(s.text for s in table.render_line(1))
        assert "✓ finished" in row and "epoch 2/2" in row and "accuracy=0.9" in row, row
