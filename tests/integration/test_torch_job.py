"""PyTorch jobs: the one-line helper, and examples/train_torch.py under `tuiprof run`.

Real processes, real torch: the jobs run in subprocesses (torch stays out of the test process);
where torch is not installed the tests that need it skip with the reason.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

from tui_prof.experiments.store import load_experiment
from tui_prof.model import RUN_FINISHED

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="torch is not installed (pip install -e '.[torch]')"
)
TRAIN = REPO / "examples" / "train_torch.py"
# Without tuiprof's variables and on the CPU, whatever the machine (the GPU path is the same code).
BASE_ENV = {
    k: v for k, v in os.environ.items() if not k.startswith("TUIPROF_") or k == "TUIPROF_CACHE_DIR"
}
ENV = {**BASE_ENV, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=ENV,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _profiler_steps(trace: Path) -> list[str]:
    with gzip.open(trace, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    return sorted(e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))


def test_outside_tuiprof_the_helper_counts_steps_and_imports_nothing(tmp_path: Path) -> None:
    res = _python(
        """
        import json, sys
        from tui_prof.instrument.torch import torch_profiler
        with torch_profiler(batch_size=8) as prof:
            for _ in range(3):
                prof.step()
            prof.epoch_end(0, loss=1.0)
            prof.report(val_accuracy=0.5)
        print(json.dumps({"torch": "torch" in sys.modules, "steps": prof.steps}))
        """,
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"torch": False, "steps": 3}
    assert list(tmp_path.iterdir()) == []  # no trace, no metrics file


@needs_torch
def test_the_helper_profiles_exactly_its_window_into_the_logdir(tmp_path: Path) -> None:
    res = _python(
        """
        import torch
        from tui_prof.instrument.torch import torch_profiler
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with torch_profiler(wait=1, warmup=1, active=2, logdir="logs") as prof:
            for _ in range(6):
                loss = model(torch.randn(4, 8)).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                prof.step()
        """,
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    traces = list((tmp_path / "logs").glob("*.pt.trace.json.gz"))
    assert len(traces) == 1, list((tmp_path / "logs").iterdir())
    # Steps 3 and 4 (1-based) after one to wait and one to warm up; PyTorch numbers from 0.
    assert _profiler_steps(traces[0]) == ["ProfilerStep#2", "ProfilerStep#3"]


# -- a float32 vs autocast experiment, end to end ------------------------------------------
SPEC = """
name = "torch_tiny"
command = ["{python}", "{train}", "--epochs", "1", "--batch-size", "64",
           "--profile-steps", "2,3", "--seed", "${{TUIPROF_REPEAT}}"]
repeats = 1
metrics = ["step_time_ms", "val_accuracy"]
baseline = "float32"

[variants.float32]
args = ["--precision", "float32"]

[variants.autocast]
args = ["--precision", "autocast"]
"""


def _tuiprof(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", *args],
        env=ENV,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def torch_experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAS_TORCH:
        pytest.skip("torch is not installed (pip install -e '.[torch]')")
    tmp = tmp_path_factory.mktemp("torch_exp")
    spec = tmp / "torch_tiny.toml"
    spec.write_text(SPEC.format(python=sys.executable, train=TRAIN))
    res = _tuiprof("run", str(spec), "--headless", "--output", str(tmp / "exp"), cwd=tmp)
    assert res.returncode == 0, res.stdout + res.stderr
    return tmp / "exp"


@needs_torch
def test_each_run_has_its_trace_and_reports_metrics(torch_experiment: Path) -> None:
    exp = load_experiment(torch_experiment)
    assert [r.variant for r in exp.runs] == ["float32", "autocast"]
    for run in exp.runs:
        assert run.status == RUN_FINISHED, run.log_tail
        traces = list(Path(run.run_dir).glob("*.pt.trace.json.gz"))
        assert len(traces) == 1, list(Path(run.run_dir).iterdir())
        assert _profiler_steps(traces[0]) == ["ProfilerStep#1", "ProfilerStep#2"]
        assert run.metrics["step_time_ms"] > 0 and 0 <= run.metrics["val_accuracy"] <= 1
        lines = [json.loads(x) for x in Path(run.metrics_path).read_text().splitlines()]
        info = next(x["info"] for x in lines if "info" in x)
        assert info["framework_versions"]["torch"] and info["dataset"] == "sklearn-digits"
        assert info["precision"] == run.variant
    autocast = next(r for r in exp.runs if r.variant == "autocast")
    info = json.loads(Path(autocast.metrics_path).read_text().splitlines()[0])["info"]
    assert info["autocast_dtype"] == "bfloat16" and info["device"] == "cpu"


@needs_torch
def test_compare_reads_the_torch_experiment(torch_experiment: Path) -> None:
    res = _tuiprof("compare", str(torch_experiment), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    step = doc["metrics"]["step_time_ms"]["variants"]
    assert set(step) == {"float32", "autocast"} and step["float32"]["n"] == 1


@needs_torch
def test_diff_of_the_torch_variants(torch_experiment: Path) -> None:
    res = _tuiprof("diff", str(torch_experiment), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["a"]["label"].startswith("float32") and doc["b"]["label"].startswith("autocast")
    assert doc["a"]["profiles"] == doc["b"]["profiles"] == 1
    assert doc["a"]["steps"] == doc["b"]["steps"] == 2
    assert any("ToCopyBackward0" in n for n in doc["only_in_b"]), doc["only_in_b"]
