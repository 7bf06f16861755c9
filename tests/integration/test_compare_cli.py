"""`tuiprof compare` and the report behind it: the JSON contract, Rich and Markdown output, errors.

Experiments are made through the store's public API (exact values, so numbers can be checked
against numpy) and, end to end, by `tuiprof run` itself with tiny real jobs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO

from tui_prof.cli.main import main
from tui_prof.comparison.report import compare_experiment
from tui_prof.experiments.spec import ExperimentSpec, VariantSpec
from tui_prof.experiments.writer import ExperimentStore, PlannedRun
from tui_prof.model import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_INTERRUPTED,
    RUN_PENDING,
    RUN_TIMEOUT,
    ExperimentRecord,
    RunRecord,
    RunStatus,
)

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
WALL = {"fp32": [10.0, 10.2, 10.1, 10.3, 10.15], "mixed": [9.4, 9.5, 9.45, 9.6, 9.5]}
ACC = {"fp32": [0.931, 0.932, 0.930, 0.931, 0.933], "mixed": [0.93, 0.91, 0.94, 0.92, 0.935]}
STAT_KEYS = ["n", "mean", "std", "median", "p90", "min", "max", "q1", "q3"]
COMPARISON_KEYS = ["variant", "baseline", "ratio", "ci_low", "ci_high", "verdict"]


def _env(**over: Any) -> dict[str, Any]:
    return {
        "host": "box",
        "gpu_model": "NVIDIA H100",
        "framework_versions": {"tensorflow": "2.21.0"},
        "epochs": 5,
        "batch_size": 64,
        "dataset_fingerprint": "d1",
        **over,
    }


def make_experiment(tmp_path: Path, *, mixed_gpu: str = "NVIDIA H100", extra: Any = ()) -> Path:
    """An experiment with known values, written through ExperimentStore's public API."""
    spec = ExperimentSpec(
        name="amp",
        command=("python", "train.py"),
        variants=(VariantSpec("fp32"), VariantSpec("mixed", ("--mixed",))),
        repeats=5,
        baseline="fp32",
        metrics=("wall_time_s", "val_accuracy"),
    )
    plan = [PlannedRun(v, i) for i in range(6) for v in ("fp32", "mixed")]
    directory = tmp_path / "exp"
    store = ExperimentStore.create(directory, spec, plan)
    for v in ("fp32", "mixed"):
        for i in range(5):
            env = _env(gpu_model=mixed_gpu) if v == "mixed" else _env()
            store.finish(
                RunRecord(
                    run_id=f"{v}-r{i}", variant=v, repeat=i, status=RUN_FINISHED,
                    wall_time_s=WALL[v][i], exit_code=0, environment=env,
                    metrics={"wall_time_s": WALL[v][i], "val_accuracy": ACC[v][i]},
                )
            )  # fmt: skip
    store.finish(
        RunRecord(
            "mixed-r5", "mixed", 5, RUN_TIMEOUT, wall_time_s=60.0, error="timed out after 60 s"
        )
    )
    for rec in extra:
        store.finish(rec)
    store.close()
    return directory


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_follows_the_contract_and_matches_numpy(tmp_path: Path, capsys: Any) -> None:
    code, out, err = cli(capsys, str(make_experiment(tmp_path)), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc)[:3] == ["metrics", "comparability", "failed_runs"]
    assert doc["failed_runs"] == 1 and doc["comparability"]["ok"] is True
    assert list(doc["metrics"]) == ["wall_time_s", "val_accuracy"]
    for name, values in (("wall_time_s", WALL), ("val_accuracy", ACC)):
        m = doc["metrics"][name]
        assert list(m["variants"]) == ["fp32", "mixed"]
        for v, xs in values.items():
            s = m["variants"][v]
            assert list(s)[: len(STAT_KEYS)] == STAT_KEYS
            assert s["n"] == 5 and s["mean"] == pytest.approx(np.mean(xs))
            assert s["std"] == pytest.approx(np.std(xs, ddof=1))
            assert s["p90"] == pytest.approx(np.percentile(xs, 90))
            assert (s["q1"], s["q3"]) == pytest.approx(tuple(np.percentile(xs, [25, 75])))
        (c,) = m["comparisons"]
        assert list(c)[:6] == COMPARISON_KEYS
        assert (c["variant"], c["baseline"]) == ("mixed", "fp32")
        # One run of each per repeat: paired, the ratio a geometric mean of per-repeat ratios.
        assert c["design"] == "paired" and c["method"] == "paired-log-ratio"
        per_repeat = np.array(values["mixed"]) / np.array(values["fp32"])
        assert c["ratio"] == pytest.approx(np.exp(np.mean(np.log(per_repeat))))
        means = np.mean(values["mixed"]) / np.mean(values["fp32"])
        assert c["ratio_of_means"] == pytest.approx(means)
        assert c["ci_low"] < c["ratio"] < c["ci_high"]
    assert list(doc["tradeoff"])[:3] == ["speed", "quality", "points"]
    assert [p["variant"] for p in doc["tradeoff"]["points"]] == ["fp32", "mixed"]
    wall = doc["metrics"]["wall_time_s"]["comparisons"][0]
    assert wall["repeats_needed"] is None  # resolved
    assert wall["verdict"].startswith("mixed is 1.07× faster, 95% CI 1.0")
    acc = doc["metrics"]["val_accuracy"]["comparisons"][0]
    assert acc["verdict"].startswith("no clear difference at n=5")
    assert acc["design"] == "paired" and "repeats_needed" in acc
    assert acc["spread_note"].startswith("mixed's val_accuracy varies")


def test_rich_output_shows_tables_boxplots_verdicts_and_failures(
    tmp_path: Path, capsys: Any
) -> None:
    code, out, _ = cli(capsys, str(make_experiment(tmp_path)))
    assert code == 0
    assert "Experiment amp · baseline fp32 · 10 counted runs" in out
    assert "✓ runs comparable" in out
    assert "1 run(s) failed" in out and "mixed-r5: timeout — timed out after 60 s" in out
    assert "mixed is 1.07× faster" in out
    assert out.count("┬") >= 4 and "◆" in out  # two box plots with their axes
    assert "median" in out and "p90" in out and "q3" in out


def test_differences_are_prominent_in_every_format(tmp_path: Path, capsys: Any) -> None:
    d = str(make_experiment(tmp_path, mixed_gpu="NVIDIA A100"))
    _, out, _ = cli(capsys, d)
    assert "runs are not comparable" in out
    flat = " ".join(out.replace("│", " ").split())  # the panel wraps the line at 80 columns
    assert (
        "GPU model differs between variants: 'NVIDIA H100' in all 5 fp32 runs; "
        "'NVIDIA A100' in all 5 mixed runs"
    ) in flat
    _, out, _ = cli(capsys, d, "--json")
    comp = json.loads(out)["comparability"]
    assert comp["ok"] is False and comp["differences"][0]["field"] == "gpu_model"
    _, md, _ = cli(capsys, d, "--markdown")
    assert "**⚠ Runs are not comparable" in md and "- GPU model differs" in md


def test_markdown_has_tables_and_a_monochrome_boxplot(tmp_path: Path, capsys: Any) -> None:
    code, md, _ = cli(
        capsys, str(make_experiment(tmp_path)), "--markdown", "--metric", "wall_time_s"
    )
    assert code == 0
    assert md.startswith("# Experiment amp\n")
    assert "## wall_time_s (s) · lower is better" in md and "val_accuracy" not in md
    assert "| variant | n | mean | std | median | p90 | min | max | q1 | q3 |" in md
    assert "| fp32 (baseline) | 5 |" in md
    block = md.split("```text\n", 1)[1].split("```", 1)[0]
    assert "\x1b[" not in block and "├" in block and max(map(len, block.splitlines())) <= 80
    ratio = np.exp(np.mean(np.log(np.array(WALL["mixed"]) / np.array(WALL["fp32"]))))
    assert f"| mixed | paired | {ratio:.3f} |" in md and "mixed is 1.07× faster" in md
    assert "Trade-off" not in md  # --metric wall_time_s alone: nothing to weigh it against


@pytest.mark.parametrize(
    "args,message",
    [
        (["{tmp}/missing"], "no such directory"),
        (["{tmp}"], "not a tuiprof experiment"),
        (
            ["{exp}", "--metric", "nope"],
            "unknown metric 'nope' (this experiment has: wall_time_s, val_accuracy",
        ),
    ],
)
def test_errors_are_one_line_on_stderr_with_exit_2(
    tmp_path: Path, capsys: Any, args: list[str], message: str
) -> None:
    exp = make_experiment(tmp_path) if "{exp}" in args[0] else None
    args = [a.format(tmp=tmp_path, exp=exp) for a in args]
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("tuiprof compare: ") and message in err


def _rec(run_id: str, variant: str, status: RunStatus, wall: float | None, **kw: Any) -> RunRecord:
    repeat = int(run_id[-1])
    metrics = {"wall_time_s": wall} if wall is not None else {}
    return RunRecord(run_id, variant, repeat, status, wall_time_s=wall, metrics=metrics, **kw)


def test_only_finished_non_warmup_runs_count() -> None:
    runs = (
        _rec("a-w0", "a", RUN_FINISHED, 99.0, is_warmup=True),
        *(_rec(f"a-r{i}", "a", RUN_FINISHED, 10.0 + i) for i in range(3)),
        *(_rec(f"b-r{i}", "b", RUN_FINISHED, 8.0 + i) for i in range(3)),
        _rec("b-r3", "b", RUN_FAILED, 1.0, error="exited with code 1"),
        _rec("b-r4", "b", RUN_INTERRUPTED, None),
        _rec("a-r3", "a", RUN_PENDING, None),
        _rec("b-w0", "b", RUN_TIMEOUT, None, is_warmup=True),
    )
    exp = ExperimentRecord("e", "/x", "a", ("a", "b"), ("wall_time_s",), 3, runs)
    report = compare_experiment(exp)
    m = report.metric("wall_time_s")
    assert m.values == {"a": (10.0, 11.0, 12.0), "b": (8.0, 9.0, 10.0)}
    assert report.failed_runs == 3 and report.pending_runs == 1 and report.counted_runs == 6
    assert [f.run_id for f in report.failed] == ["b-r3", "b-r4", "b-w0"]
    assert report.to_dict()["failed"][2]["is_warmup"] is True


def test_non_finite_and_missing_values_are_left_out_with_a_warning() -> None:
    runs = (
        *(_rec(f"a-r{i}", "a", RUN_FINISHED, 10.0) for i in range(3)),
        RunRecord("b-r0", "b", 0, RUN_FINISHED, metrics={"loss": math.nan}),
        RunRecord("b-r1", "b", 1, RUN_FINISHED, metrics={"loss": 0.5}),
        RunRecord("b-r2", "b", 2, RUN_FINISHED, metrics={}),
    )
    exp = ExperimentRecord("e", "/x", "a", ("a", "b"), ("wall_time_s", "loss"), 3, runs)
    report = compare_experiment(exp, ["loss"])
    m = report.metric("loss")
    assert m.values["b"] == (0.5,) and m.values["a"] == ()
    assert any("non-finite loss" in w for w in m.warnings)
    assert any("did not report loss" in w for w in m.warnings)
    assert m.comparisons[0].verdict == "no finished runs of a"
    json.dumps(report.to_dict(), allow_nan=False)  # the JSON document stays valid


def test_end_to_end_with_tuiprof_run(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "import json, os, sys\n"
        "v, r = os.environ['TUIPROF_VARIANT'], int(os.environ['TUIPROF_REPEAT'])\n"
        "acc = {'a': [0.90, 0.91, 0.92], 'b': [0.95, 0.96, 0.97]}[v][r]\n"
        "with open(os.environ['TUIPROF_METRICS_FILE'], 'a') as f:\n"
        "    f.write(json.dumps({'accuracy': acc, 'epochs': 1, 'batch_size': 8}) + '\\n')\n"
        "sys.exit(5 if v == 'b' and r == 2 else 0)\n"
    )
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "e2e"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 3\n'
        'metrics = ["accuracy"]\n[variants.a]\n[variants.b]\n'
    )
    out_dir = tmp_path / "out"
    tp = [sys.executable, "-m", "tui_prof.cli"]
    run = subprocess.run([*tp, "run", str(spec), "--headless", "--output", str(out_dir)],
                         env=ENV, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 1, run.stderr  # one run failed on purpose
    res = subprocess.run([*tp, "compare", str(out_dir), "--json"], env=ENV,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["failed_runs"] == 1 and doc["comparability"]["ok"] is True
    acc = doc["metrics"]["accuracy"]
    assert acc["variants"]["a"]["n"] == 3 and acc["variants"]["b"]["n"] == 2
    assert acc["variants"]["a"]["mean"] == pytest.approx(0.91)
    assert acc["comparisons"][0]["verdict"] == "too few runs of b (n=2): need at least 3"
    assert doc["metrics"]["wall_time_s"]["variants"]["a"]["n"] == 3
    assert {"host", "epochs", "batch_size"} <= set(doc["comparability"]["checked"])


def test_core_modules_import_no_textual_tensorflow_or_scipy() -> None:
    modules = [
        "tui_prof.comparison.stats",
        "tui_prof.comparison.paired",
        "tui_prof.comparison.power",
        "tui_prof.comparison.tradeoff",
        "tui_prof.comparison.tdist",
        "tui_prof.comparison.comparability",
        "tui_prof.comparison.report",
        "tui_prof.render.boxplot",
        "tui_prof.render.scatter",
        "tui_prof.render.stats_table",
        "tui_prof.cli.compare",
    ]
    probe = f"import {', '.join(modules)}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], env=ENV, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    loaded = {m.split(".")[0] for m in out.split()}
    assert not loaded & {"textual", "tensorflow", "scipy"}


def test_min_difference_moves_what_matters(tmp_path: Path, capsys: Any) -> None:
    """mixed is ~7% faster: it matters at the default 5%, not when only 10% would; a bad value
    is one line and exit 2."""
    exp = str(make_experiment(tmp_path))
    code, out, err = cli(capsys, exp, "--json", "--min-difference", "wall_time_s=10")
    assert code == 0, err
    wall = json.loads(out)["metrics"]["wall_time_s"]["comparisons"][0]
    assert wall["min_effect_pct"] == 10.0 and wall["winner"] is None
    assert wall["verdict"].endswith("under the 10% that matters")
    code, out, err = cli(capsys, exp, "--json")
    wall = json.loads(out)["metrics"]["wall_time_s"]["comparisons"][0]
    assert wall["min_effect_pct"] == 5.0 and wall["winner"] == "mixed"
    code, out, err = cli(capsys, exp, "--min-difference", "wall_time_s=lots")
    assert code == 2 and err.count("\n") == 1 and "percentage above 0" in err
