"""Experiment specs: valid files resolve fully; every mistake names the file, the field and what was expected."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tui_prof.experiments.runner import plan_runs
from tui_prof.experiments.spec import SpecError, load_spec, select

PY = sys.executable


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "tuiprof.toml"
    p.write_text(text, encoding="utf-8")
    return p


GOOD = f"""
name = "mp"
command = ["{PY}", "train.py", "--epochs", "2"]
repeats = 4
warmup = 1
timeout_s = 30
workdir = "sub"
metrics = ["val_accuracy", "wall_time_s"]

[variants.float32]
args = ["--precision", "float32"]

[variants.mixed]
args = ["--precision", "mixed"]
env = {{ TF_ENABLE_ONEDNN_OPTS = "0" }}
"""


def test_valid_spec_resolves_paths_variants_and_defaults(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.name == "mp"
    assert [v.name for v in spec.variants] == ["float32", "mixed"]
    assert spec.baseline == "float32"  # the first variant
    assert spec.metrics == ("wall_time_s", "val_accuracy")  # wall time always, once, first
    assert spec.workdir == str((tmp_path / "sub").resolve())
    assert spec.output == str((tmp_path / "tuiprof-experiments").resolve())
    assert spec.argv("mixed") == [PY, "train.py", "--epochs", "2", "--precision", "mixed"]
    assert spec.variant("mixed").env == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert (spec.repeats, spec.warmup, spec.timeout_s, spec.order) == (4, 1, 30.0, "interleaved")


def test_baseline_field_and_spec_round_trip(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    spec = load_spec(
        write(tmp_path, GOOD.replace("repeats = 4", 'repeats = 4\nbaseline = "mixed"'))
    )
    assert spec.baseline == "mixed"
    from tui_prof.experiments.spec import ExperimentSpec

    assert ExperimentSpec.from_dict(spec.to_dict()) == spec


def test_no_variants_means_one_default_variant(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, f'name = "x"\ncommand = ["{PY}", "-c", "pass"]\n'))
    assert [v.name for v in spec.variants] == ["default"]
    assert spec.repeats == 3


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        ('name = "x"', "command", "missing"),
        (f'name = "x"\ncommand = "{PY} train.py"', "command", "list of strings"),
        (f'name = "x"\ncommand = ["{PY}"]\nrepeats = 0', "repeats", "integer >= 1"),
        (f'name = "x"\ncommand = ["{PY}"]\nrepeats = "5"', "repeats", "integer >= 1"),
        (f'name = "x"\ncommand = ["{PY}"]\ntimeout_s = -1', "timeout_s", "positive number"),
        (f'name = "x"\ncommand = ["{PY}"]\nrepets = 3', "repets", "unknown field"),
        (f'name = "x"\ncommand = ["{PY}"]\norder = "random"', "order", "interleaved"),
        (f'name = "x"\ncommand = ["{PY}"]\nworkdir = "nope"', "workdir", "existing directory"),
        (
            f'name = "x"\ncommand = ["{PY}"]\nbaseline = "c"\n[variants.a]\n',
            "baseline",
            "one of the variants",
        ),
        (
            f'name = "x"\ncommand = ["{PY}"]\n[variants.a]\nenv = {{X = 1}}',
            "variants.a.env",
            "string values",
        ),
        (
            f'name = "x"\ncommand = ["{PY}"]\n[variants.a]\nargs = "--x"',
            "variants.a.args",
            "list of strings",
        ),
        (
            f'name = "x"\ncommand = ["{PY}"]\n[variants.a]\nflags = []',
            "variants.a.flags",
            "unknown field",
        ),
        (f'name = "x"\ncommand = ["{PY}"]\n[variants."a b"]\n', "variants.a b", "letters, digits"),
        ('name = "bad name"\ncommand = ["x"]', "name", "letters, digits"),
        ('name = "x"\ncommand = ["no-such-program-tuiprof"]', "command", "not found on PATH"),
        ('name = "x"\ncommand = ["./missing.sh"]', "command", "does not exist"),
    ],
)
def test_errors_name_file_field_and_expectation(
    tmp_path: Path, text: str, field: str, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: {field}: "), msg
    assert expected in msg


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="invalid TOML"):
        load_spec(write(tmp_path, "name = \n"))
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "absent.toml")


def test_variant_env_path_is_used_to_find_the_program(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "mytool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    text = f'name = "x"\ncommand = ["mytool"]\n[variants.a]\nenv = {{PATH = "{bindir}"}}\n'
    assert load_spec(write(tmp_path, text)).command == ("mytool",)


def test_select_narrows_variants_and_overrides_counts(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    spec = load_spec(write(tmp_path, GOOD))
    only = select(spec, ["mixed"], repeats=2, warmup=0)
    assert [v.name for v in only.variants] == ["mixed"]
    assert only.baseline == "mixed"  # the spec's baseline was not selected
    assert (only.repeats, only.warmup) == (2, 0)
    with pytest.raises(SpecError, match="variants: no variant named 'fp8'"):
        select(spec, ["fp8"])
    with pytest.raises(SpecError, match="repeats"):
        select(spec, repeats=0)


def test_plan_is_interleaved_with_warmups_first_or_sequential(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    spec = select(load_spec(write(tmp_path, GOOD)), repeats=2)
    ids = [p.run_id for p in plan_runs(spec)]
    assert ids == ["float32-w0", "mixed-w0", "float32-r0", "mixed-r0", "float32-r1", "mixed-r1"]
    from dataclasses import replace

    seq = [p.run_id for p in plan_runs(replace(spec, order="sequential", warmup=0))]
    assert seq == ["float32-r0", "float32-r1", "mixed-r0", "mixed-r1"]
