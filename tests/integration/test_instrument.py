"""tui_prof.instrument: a no-op outside tuiprof; under it, metrics lines and profiles with official steps."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_module

from tui_prof.experiments.protocol import read_metrics


def test_outside_tuiprof_everything_is_a_no_op_and_imports_no_framework(tmp_path: Path) -> None:
    code = """
import os, sys
from tui_prof.instrument import report, report_info, tuiprof_run, enabled
report(acc=1.0); report_info(dataset_fingerprint="x")
with tuiprof_run(profile_steps=(1, 2)) as run:
    for step in (1, 2, 3):
        with run.step(step):
            pass
    run.epoch_end(0, loss=1.0)
    run.report(acc=0.5)
print(enabled(), sorted(m for m in ("tensorflow", "keras", "torch") if m in sys.modules), os.listdir("."))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUIPROF_")}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False [] []"


def test_report_writes_protocol_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from tui_prof.instrument import report, report_info

    path = tmp_path / "m.jsonl"
    monkeypatch.setenv("TUIPROF_METRICS_FILE", str(path))
    report(acc=np.float32(0.5), loss=float("nan"), epoch=0)
    report(acc=0.75, policy="mixed_bfloat16")
    report_info(dataset_fingerprint="abc", batch_size=np.int64(32))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0] == {"acc": 0.5, "loss": None, "epoch": 0}  # NaN is not valid JSON: null
    state = read_metrics(path)
    assert state.final == {"acc": 0.75}
    assert state.info == {
        "policy": "mixed_bfloat16",
        "dataset_fingerprint": "abc",
        "batch_size": 32,
    }


# A tiny real Keras job, once with model.fit and the callback, once as a custom loop with the helper.
JOB = r"""
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np, keras, tensorflow as tf
from tui_prof.instrument import TuiprofCallback, tuiprof_run
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32"); y = (x[:, 0] > 0).astype("int32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
if sys.argv[1] == "fit":
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, batch_size=32, epochs=2, validation_split=0.25, verbose=0,
              callbacks=[TuiprofCallback(profile_steps=(3, 6), batch_size=32, dataset_fingerprint="rand0")])
else:
    opt = keras.optimizers.Adam(); loss_fn = keras.losses.SparseCategoricalCrossentropy()
    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    step = 0
    with tuiprof_run(profile_steps=(3, 6), epochs=2, batch_size=32, dataset_fingerprint="rand0") as run:
        for epoch in range(2):
            run.epoch_begin()
            for i in range(0, 256, 32):
                step += 1
                with run.step(step):
                    loss = train_step(x[i:i + 32], y[i:i + 32])
            run.epoch_end(epoch, loss=float(loss))
        run.report(final_loss=float(loss))
"""


@pytest.mark.slow
@needs_module("tensorflow", "tf")
def test_real_keras_job_under_tuiprof_run_reports_and_profiles_official_steps(
    tmp_path: Path,
) -> None:
    from conftest import official_overview

    from tui_prof.experiments.store import load_experiment

    (tmp_path / "job.py").write_text(JOB)
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "tf"\ncommand = ["{sys.executable}", "job.py"]\nrepeats = 1\ntimeout_s = 300\n'
        '[variants.fit]\nargs = ["fit"]\n[variants.custom]\nargs = ["custom"]\n'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    cmd = [
        sys.executable,
        "-m",
        "tui_prof.cli",
        "run",
        str(spec),
        "--headless",
        "--output",
        str(tmp_path / "e"),
    ]
    if shutil.which(
        "unshare"
    ):  # the job's profiler server binds all interfaces: keep it off the network
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
        if probe.returncode == 0:
            cmd = [
                "unshare",
                "-n",
                "sh",
                "-c",
                'ip link set lo up 2>/dev/null; exec "$@"',
                "sh",
                *cmd,
            ]
        else:
            cmd.append("--no-profiler-port")
    else:
        cmd.append("--no-profiler-port")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    exp = load_experiment(tmp_path / "e")
    for run in exp.runs:
        log = Path(run.log_path).read_text()
        assert "profiler server not started" not in log and "profiling not started" not in log, log
        assert (
            run.environment["dataset_fingerprint"] == "rand0"
            and run.environment["batch_size"] == 32
        )
        assert run.environment["epochs"] == 2 and run.progress == "epoch 2/2"
        assert run.environment["framework_versions"]["tensorflow"].startswith(
            "2."
        )  # as the job saw it
        assert run.metrics["train_time_s"] > 0 and run.metrics["step_time_ms"] > 0
        assert run.metrics["steps"] == {"fit": 12, "custom": 16}[run.variant]  # 2 epochs × batches
        series = [json.loads(x) for x in Path(run.metrics_path).read_text().splitlines()]
        epochs = [s for s in series if "epoch" in s]
        assert [s["epoch"] for s in epochs] == [0, 1] and all(s["epoch_time_s"] > 0 for s in epochs)
        # The profile of steps 3..6 carries TensorBoard's own step markers.
        profiles = sorted(Path(run.run_dir).glob("plugins/profile/*/*.xplane.pb"))
        assert len(profiles) == 1, profiles
        steps_table = official_overview(profiles)[1]
        steps = [row["c"][0]["v"] for row in steps_table["rows"]]
        assert steps == ["train 3", "train 4", "train 5", "train 6"], steps
    fit = next(r for r in exp.runs if r.variant == "fit")
    assert {"accuracy", "loss", "val_accuracy", "val_loss"} <= set(fit.metrics)
    custom = next(r for r in exp.runs if r.variant == "custom")
    assert "final_loss" in custom.metrics and "loss" in custom.metrics
