"""The speed/quality trade-off: points, worst runs, the Pareto front, the JSON contract and the
scatter, on experiments written through the store's public API."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from tui_prof.cli.main import main
from tui_prof.comparison.report import build_report
from tui_prof.comparison.tradeoff import default_axes
from tui_prof.experiments.reading import read_experiment
from tui_prof.experiments.spec import ExperimentSpec, VariantSpec
from tui_prof.experiments.writer import ExperimentStore, PlannedRun
from tui_prof.model import RUN_FINISHED, RunRecord
from tui_prof.render.scatter import MIN_WIDTH, TradeoffScatter

# slow and accurate; fast and accurate (better than "slow" on both); fast and sloppy.
DATA = {
    "slow": ([10.0, 10.2, 10.1, 9.9, 10.05], [0.95, 0.951, 0.949, 0.952, 0.950]),
    "fast": ([8.0, 8.1, 7.9, 8.05, 8.0], [0.960, 0.961, 0.959, 0.962, 0.960]),
    "sloppy": ([8.0, 7.9, 8.1, 8.0, 8.05], [0.90, 0.85, 0.93, 0.66, 0.91]),
}


def make(tmp_path: Path, data: dict[str, tuple[list[float], list[float]]], **metrics: Any) -> Path:
    names = tuple(data)
    spec = ExperimentSpec(
        name="tradeoff",
        command=("python", "t.py"),
        variants=tuple(VariantSpec(v) for v in names),
        repeats=5,
        baseline=names[0],
        metrics=("wall_time_s", *metrics.get("extra", ("val_accuracy",))),
    )
    store = ExperimentStore.create(
        tmp_path / "exp", spec, [PlannedRun(v, r) for r in range(5) for v in names]
    )
    for v, (walls, accs) in data.items():
        for r, (w, a) in enumerate(zip(walls, accs, strict=True)):
            store.finish(
                RunRecord(f"{v}-r{r}", v, r, RUN_FINISHED, wall_time_s=w,
                          metrics={"wall_time_s": w, "val_accuracy": a, "loss": 1 - a})
            )  # fmt: skip
    store.close()
    return tmp_path / "exp"


def test_front_worst_runs_and_medians(tmp_path: Path) -> None:
    t = build_report(read_experiment(make(tmp_path, DATA))).tradeoff
    assert t is not None and (t.speed, t.quality) == ("wall_time_s", "val_accuracy")
    points = {p.variant: p for p in t.points}
    assert points["slow"].dominated_by == ("fast",) and not points["slow"].pareto
    assert points["fast"].pareto and points["sloppy"].pareto  # sloppy is not slower: not beaten
    assert t.front == ("fast", "sloppy")
    assert points["sloppy"].quality.worst == 0.66  # the seeds' point: the worst case
    assert points["sloppy"].quality.median == pytest.approx(np.median(DATA["sloppy"][1]))
    assert points["slow"].speed.worst == 10.2
    assert points["fast"].speed.q1 == pytest.approx(np.percentile(DATA["fast"][0], 25))


def test_nothing_resolved_leaves_every_variant_on_the_front(tmp_path: Path) -> None:
    noisy = {
        "a": ([10.0, 14.0, 8.0, 12.0, 9.0], [0.9, 0.95, 0.85, 0.93, 0.88]),
        "b": ([9.0, 13.0, 9.5, 10.0, 11.0], [0.92, 0.9, 0.94, 0.86, 0.91]),
    }
    t = build_report(read_experiment(make(tmp_path, noisy))).tradeoff
    assert t is not None and t.front == ("a", "b")


def test_json_contract_and_chosen_axes(tmp_path: Path, capsys: Any) -> None:
    d = str(make(tmp_path, DATA))
    assert main(["compare", d, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    t = doc["tradeoff"]
    assert (t["speed"], t["quality"]) == ("wall_time_s", "val_accuracy")
    assert [list(p)[:4] for p in t["points"]] == [["variant", "speed", "quality", "pareto"]] * 3
    assert [p["pareto"] for p in t["points"]] == [False, True, True]
    assert t["points"][2]["quality_worst"] == 0.66
    assert main(["compare", d, "--json", "--quality", "loss"]) == 0
    t = json.loads(capsys.readouterr().out)["tradeoff"]
    assert t["quality"] == "loss" and t["quality_lower_is_better"] is True
    assert t["points"][2]["quality_worst"] == pytest.approx(0.34)  # lower is better: the max
    assert main(["compare", d, "--speed", "nope"]) == 2
    assert "unknown metric 'nope'" in capsys.readouterr().err


def test_no_quality_metric_means_no_tradeoff(tmp_path: Path) -> None:
    assert default_axes(["wall_time_s", "loss", "step_time_ms"]) is None
    assert default_axes(["wall_time_s", "loss", "val_top1"]) == ("wall_time_s", "val_top1")
    assert default_axes(["wall_time_s", "f1"], speed="step_time_ms") == ("step_time_ms", "f1")


def _plain(renderable: Any, width: int) -> str:
    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text(styles=False)


def test_scatter_is_labelled_monochrome_and_only_where_it_fits(tmp_path: Path) -> None:
    t = build_report(read_experiment(make(tmp_path, DATA))).tradeoff
    assert t is not None
    text = _plain(TradeoffScatter(t), 80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80 and "\x1b[" not in text
    assert lines[0] == "val_accuracy · ↑ better"
    assert "○─ slow" in text and "●─ fast" in text and "●─ sloppy" in text  # ─: q1–q3
    assert "×" in text and "┆" in text  # sloppy's worst run, far below its median
    assert "wall_time_s (s) · ← faster" in text
    row_of = {name: next(i for i, ln in enumerate(lines) if name in ln) for name in DATA}
    assert row_of["fast"] <= row_of["slow"] < row_of["sloppy"]  # quality goes up the page
    col_of = {name: lines[row_of[name]].index(name) for name in DATA}
    assert col_of["slow"] > col_of["fast"]  # slower is further right
    assert _plain(TradeoffScatter(t), MIN_WIDTH - 1).strip() == ""


def test_rich_and_markdown_show_the_tradeoff(tmp_path: Path, capsys: Any) -> None:
    d = str(make(tmp_path, DATA))
    assert main(["compare", d]) == 0
    out = capsys.readouterr().out
    assert "Trade-off: speed wall_time_s (s, lower is better) against quality val_accuracy" in out
    assert "Pareto front: fast, sloppy" in out and "slow is beaten on both by fast" in out
    assert main(["compare", d, "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "## Trade-off: wall_time_s vs val_accuracy" in md
    assert (
        "| slow | 10.050 | 10.000–10.100 | 0.9500 | 0.9500–0.9510 | 0.9490 | beaten by fast |" in md
    )
