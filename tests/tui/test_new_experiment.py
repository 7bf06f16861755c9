"""The new-experiment dialog (`r`) as a person uses it: variants typed as commands, a spec saved
on the way, and a dialog that opens with the change a profile's advice names."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from conftest import SAMPLES, settle, shown, until
from textual.widgets import Input, Static, TextArea

from tui_prof.experiments.spec import load_spec
from tui_prof.experiments.store import load_experiment
from tui_prof.experiments.suggest import RunContext, propose, run_context
from tui_prof.tui.app import TuiprofApp
from tui_prof.tui.screens.experiments import ExperimentsScreen
from tui_prof.tui.screens.start_dialog import StartDialog
from tui_prof.tui.widgets.run_table import RunTable

JOB = (
    "import json, os, sys\n"
    "with open(os.environ['TUIPROF_METRICS_FILE'], 'a') as f:\n"
    "    f.write(json.dumps({'val_accuracy': float(sys.argv[1])}) + '\\n')\n"
)


async def _wait_for(pilot: Any, predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the screen to change"
        await pilot.pause(0.2)


def _plain(app: TuiprofApp, selector: str) -> str:
    content = app.screen.query_one(selector, Static).content
    return content.plain if hasattr(content, "plain") else str(content)


async def test_variants_typed_as_commands_run_and_the_spec_is_saved(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        variants = await shown(pilot, "#variants", TextArea)
        dialog = app.screen
        assert isinstance(dialog, StartDialog)
        variants.text = f"a={sys.executable} job.py 0.9\nb={sys.executable} job.py 0.8\n"
        dialog.query_one("#repeats").value = "2"  # type: ignore[attr-defined]
        dialog.query_one("#workdir").value = str(tmp_path)  # type: ignore[attr-defined]
        dialog.query_one("#save").value = "amp.toml"  # type: ignore[attr-defined]
        dialog.query_one("#matters").value = "wall_time_s=2"  # type: ignore[attr-defined]
        await pilot.click("#start")
        await _wait_for(pilot, lambda: isinstance(app.screen, ExperimentsScreen))
        # The screen is shown before its widgets are mounted (on a loaded machine, queried at
        # once, its table was not there yet).
        table = await shown(pilot, RunTable)
        await _wait_for(
            pilot,
            lambda: (
                len(table.runs) == 4 and all(r.status == "finished" for r in table.runs.values())
            ),
        )
        (exp_dir,) = app.runners
        exp = load_experiment(exp_dir)
        assert (exp.name, exp.variants, exp.repeats) == ("a-vs-b", ("a", "b"), 2)
        saved = load_spec(tmp_path / "amp.toml")
        assert saved.command == (sys.executable, "job.py") and saved.variant("b").args == ("0.8",)
        assert load_spec(Path(exp_dir) / "spec.toml").variants == saved.variants
        assert saved.min_difference_pct == {"wall_time_s": 2.0}  # "Matters", kept with it


async def test_a_bad_command_stays_in_the_dialog_in_one_line(tmp_path: Path) -> None:
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        (await shown(pilot, "#variants", TextArea)).text = "a=python x.py\nb=python3 x.py"
        await pilot.click("#start")
        await until(pilot, lambda: "different programs" in _plain(app, "#start-error"))
        assert isinstance(app.screen, StartDialog)
        assert not app.runners
        app.screen.query_one("#variants", TextArea).text = "a=python x.py\nb=python x.py -O"
        matters = app.screen.query_one("#matters", Input)
        matters.value = "0"
        matters.focus()
        await pilot.press("enter")
        await until(pilot, lambda: "Matters: expected a percentage" in _plain(app, "#start-error"))
        assert isinstance(app.screen, StartDialog)
        assert not app.runners


async def test_the_dialog_opens_with_the_change_the_advice_names() -> None:
    """A run of the sample experiment: CPU-bound, the advice says larger batch and XLA; not
    mixed precision, which the CPU row of the hardware table cannot vouch for (and which the
    sample experiment itself measured as ~4x slower on this CPU)."""
    run = SAMPLES / "experiment_mixed_precision" / "runs" / "float32-r0"
    app = TuiprofApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        browse = app.get_screen("browse")
        await _wait_for(pilot, lambda: getattr(browse, "current_summary", None) is not None)
        await pilot.press("r")
        text = (await shown(pilot, "#variants", TextArea)).text.splitlines()
        assert text[0].startswith("float32=python train_cnn.py ") and "--batch-size 32" in text[0]
        assert text[1].startswith("batch2x=python train_cnn.py ") and "--batch-size 64" in text[1]
        assert "'${TUIPROF_REPEAT}'" in text[1]  # quoted: split back, it is replaced per run
        hint = _plain(app, "#start-hint")
        assert "From the advice: a larger batch, by --batch-size in the command." in hint
        assert "mixed precision" not in hint
        assert app.screen.query_one("#repeats").value == "5"  # type: ignore[attr-defined]
        await pilot.press("escape")


def test_a_setting_the_job_reads_is_offered_as_an_environment_variable() -> None:
    ctx = RunContext(
        experiment_dir=Path("."),
        run_id="base-r0",
        variant="base",
        argv=("python", "train.py"),
        env={},
        workdir=".",
        repeats=3,
        experiment="e",
        settings={"TUIPROF_PRECISION": "float32", "TUIPROF_BATCH_SIZE": "16"},
    )
    mixed, batch = propose(ctx, ("mixed_precision", "xla", "batch_size"))
    assert (mixed.name, mixed.argv, mixed.env) == (
        "mixed",
        ("python", "train.py"),
        {"TUIPROF_PRECISION": "mixed"},
    )
    assert "which the job reads" in mixed.how
    assert batch.env == {"TUIPROF_BATCH_SIZE": "32"}  # xla: the job does not read TUIPROF_XLA
    flags = RunContext(**{**ctx.__dict__, "argv": ("t", "--xla=false", "--input-bound"),
                          "settings": {}})  # fmt: skip
    xla, pipe = propose(flags, ("xla", "input_pipeline"))
    assert xla.argv == ("t", "--xla=true", "--input-bound") and pipe.argv == ("t", "--xla=false")
    assert propose(flags, ("mixed_precision", "batch_size")) == []  # nothing exposed: no guess


def test_profiles_outside_an_experiment_have_no_command(tmp_path: Path) -> None:
    assert run_context(SAMPLES / "custom_loop") is None
    assert run_context(tmp_path) is None


SETTINGS_JOB = """
from tui_prof.instrument import settings, timed
for _ in range(3):
    policy = settings.precision("float32")  # asked often, reported once
batch = settings.batch_size(16)
for _ in range(5):
    with timed("latency_ms"):
        sum(range(1000))
print(policy, batch)
"""


def test_a_job_using_instrument_settings_is_offered_env_variants(tmp_path: Path) -> None:
    """End to end: the job reads TUIPROF_* settings under `tuiprof run`, its run records that,
    and a profile in its run directory gets variants that set them."""
    from tui_prof.experiments.commands import spec_from_commands
    from tui_prof.experiments.runner import Runner
    from tui_prof.experiments.store import load_samples

    (tmp_path / "job.py").write_text(SETTINGS_JOB)
    spec = spec_from_commands(
        [f"base={sys.executable} job.py"], repeats=1, workdir=tmp_path, output=str(tmp_path)
    )
    runner = Runner.create(spec, tmp_path / "exp", profiler_ports=False).start()
    assert runner.wait(60)
    (run,) = load_experiment(tmp_path / "exp").runs
    assert run.environment["reported"]["tuiprof_settings"] == {
        "TUIPROF_PRECISION": "float32",
        "TUIPROF_BATCH_SIZE": "16",
    }
    lines = Path(run.metrics_path).read_text().splitlines()
    assert sum("tuiprof_settings" in ln for ln in lines) == 2  # once per setting
    assert load_samples(tmp_path / "exp")["base-r0"]["latency_ms"][0] == 5
    profile = Path(run.run_dir) / "plugins" / "profile" / "2026_01_01_00_00_00"
    profile.mkdir(parents=True)
    ctx = run_context(profile)
    assert ctx is not None and ctx.settings["TUIPROF_BATCH_SIZE"] == "16"
    mixed, batch = propose(ctx, ("mixed_precision", "xla", "batch_size"))
    assert mixed.env == {"TUIPROF_PRECISION": "mixed"} and batch.env == {"TUIPROF_BATCH_SIZE": "32"}


def test_changes_the_advice_names_in_its_order() -> None:
    from tui_prof.profiles.advice import suggested_changes
    from tui_prof.profiles.hardware import device_spec
    from tui_prof.profiles.remedies import TENSORFLOW as TIPS
    from tui_prof.profiles.remedies import Facts, device_compute

    a100 = Facts("tensorflow", "GPU", device_spec(name="NVIDIA A100-SXM4-40GB"), "NVIDIA")
    assert suggested_changes([TIPS["host_compute_cpu"]]) == ("batch_size", "xla")
    assert suggested_changes([TIPS["input"], device_compute(a100)]) == (
        "input_pipeline",
        "mixed_precision",
        "xla",
    )
    assert suggested_changes(["XLA programs ran repeatedly here: choose one"]) == ()
    assert suggested_changes([TIPS["compilation"]]) == ()
