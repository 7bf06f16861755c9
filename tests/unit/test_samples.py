"""Distributions within a run: which names are distributions, the reservoir's cap, percentiles
against numpy, and a real job's latencies through the runner, the store and `compare --json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tui_prof.cli.main import main
from tui_prof.experiments.protocol import MetricsState, apply
from tui_prof.experiments.runner import Runner
from tui_prof.experiments.samples import CAP, MAX_DISTRIBUTIONS, Reservoir, percentiles, seed_for
from tui_prof.experiments.spec import load_spec
from tui_prof.experiments.store import load_experiment, load_samples


def test_percentiles_match_numpy() -> None:
    xs = np.random.default_rng(1).lognormal(0, 1, size=997).tolist()
    got = percentiles(xs)
    assert list(got) == [50, 90, 99]
    assert [got[q] for q in (50, 90, 99)] == pytest.approx(np.percentile(xs, [50, 90, 99]))
    assert percentiles([3.0]) == {50: 3.0, 90: 3.0, 99: 3.0} and percentiles([]) == {}


def test_reservoir_keeps_everything_up_to_the_cap_then_a_uniform_sample() -> None:
    small = Reservoir(seed=1)
    for x in range(100):
        small.add(float(x))
    assert small.count == 100 and list(small.values) == [float(x) for x in range(100)]
    big, again = Reservoir(cap=1000, seed=7), Reservoir(cap=1000, seed=7)
    for x in range(50_000):  # a latency that creeps up over the run
        big.add(float(x))
        again.add(float(x))
    assert big.count == 50_000 and len(big.values) == 1000
    assert list(big.values) == list(again.values)  # seeded: the same reports keep the same
    # Uniform over the whole run (the first 1,000 would have a median of ~500).
    assert abs(np.median(big.values) - 25_000) < 2_500
    assert CAP == 10_000


def _state(*lines: dict[str, Any]) -> MetricsState:
    state = MetricsState()
    for line in lines:
        apply(state, line)
    return state


def test_which_names_are_distributions() -> None:
    state = _state(
        {"epoch": 0, "val_accuracy": 0.9},
        {"epoch": 1, "val_accuracy": 0.95},  # per epoch: a curve, the last value is the result
        {"latency_ms": 2.0},
        {"latency_ms": 4.0},
        {"latency_ms": 3.0},  # no epoch, more than once: a distribution
        {"step": 1, "step_time_ms": 10.0},
        {"step": 2, "step_time_ms": 12.0},
        {"train_time_s": 5.0},  # once: a plain result
        {"train_time_s": 5.5, "step_time_ms": 11.0},  # several metrics on a line: results
        {"final_val_accuracy": 0.9, "train_time_s": 6.0},  # ... reported twice, still a result
    )
    assert set(state.distributions()) == {"latency_ms", "step_time_ms"}
    results = state.results()
    assert results["val_accuracy"] == 0.95 and results["train_time_s"] == 6.0
    assert "latency_ms" not in results and results["latency_ms:p50"] == 3.0
    assert results["latency_ms:p99"] == pytest.approx(np.percentile([2, 4, 3], 99))
    assert results["step_time_ms:p90"] == pytest.approx(11.8)


def test_a_job_inventing_names_cannot_fill_the_memory() -> None:
    state = _state(*({f"m{i}": 1.0} for i in range(MAX_DISTRIBUTIONS + 10)))
    assert len(state.samples) == MAX_DISTRIBUTIONS


JOB = r"""
import json, os, random
variant = os.environ["TUIPROF_VARIANT"]
rng = random.Random(int(os.environ["TUIPROF_REPEAT"]))
with open(os.environ["TUIPROF_METRICS_FILE"], "a") as f:
    for epoch in range(2):
        f.write(json.dumps({"epoch": epoch, "val_accuracy": 0.9 + 0.01 * epoch}) + "\n")
    scale = 1.0 if variant == "slow" else 0.5
    for i in range(40):
        f.write(json.dumps({"latency_ms": scale * (10 + i + rng.random())}) + "\n")
"""


def test_latencies_of_a_real_job_are_kept_and_compared(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "job.py").write_text(JOB)
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "lat"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 3\n'
        'metrics = ["latency_ms", "val_accuracy"]\n[variants.slow]\n[variants.fast]\n'
    )
    runner = Runner.create(load_spec(spec), tmp_path / "exp", profiler_ports=False).start()
    assert runner.wait(60)
    exp = load_experiment(tmp_path / "exp")
    kept = load_samples(tmp_path / "exp")
    for run in exp.runs:
        count, values = kept[run.run_id]["latency_ms"]
        assert count == 40 and len(values) == 40
        p = np.percentile(values, [50, 90, 99])
        assert [run.metrics[f"latency_ms:p{q}"] for q in (50, 90, 99)] == pytest.approx(p)
        assert "latency_ms" not in run.metrics and run.metrics["val_accuracy"] == 0.91
        assert "val_accuracy" not in kept[run.run_id]
    assert main(["compare", str(tmp_path / "exp"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = list(doc["metrics"])
    assert names[:5] == [
        "wall_time_s",
        "latency_ms:p50",
        "latency_ms:p90",
        "latency_ms:p99",
        "val_accuracy",
    ]
    p99 = doc["metrics"]["latency_ms:p99"]
    assert p99["unit"] == "ms" and p99["lower_is_better"] is True
    (c,) = p99["comparisons"]
    assert c["design"] == "paired" and c["winner"] == "fast"
    assert c["verdict"].startswith("fast is 2.00× faster")
    dist = doc["distributions"]["latency_ms"]
    assert dist["kept"] == "reservoir" and dist["cap_per_run"] == CAP
    assert dist["runs"]["fast-r0"] == {"count": 40, "kept": 40}
    assert main(["compare", str(tmp_path / "exp"), "--json", "--metric", "latency_ms"]) == 0
    assert list(json.loads(capsys.readouterr().out)["metrics"]) == [
        "latency_ms:p50",
        "latency_ms:p90",
        "latency_ms:p99",
    ]
    assert seed_for("fast-r0") == seed_for("fast-r0") != seed_for("fast-r1")
