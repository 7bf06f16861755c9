"""Experiment specs: valid files resolve fully; every mistake names the file, the field and what was expected."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tui_prof.experiments.plan import plan_runs
from tui_prof.experiments.spec import ExperimentSpec, SpecError, load_spec, select

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


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('name = "x\\n"', "name"),  # a trailing newline: the last printed line would be wrong
        ('name = "x\\ty"', "name"),
        ('name = "x\\u001b[31m"', "name"),
        ('name = "x"\n[variants."a\\n"]', "variants.a\\n"),
        ('name = "x"\n[variants."a\\rb"]', "variants.a\\rb"),
    ],
)
def test_names_refuse_control_characters(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, f'command = ["{PY}"]\n{text}\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg and "\r" not in msg and "\x1b" not in msg, repr(msg)
    assert "control character" in msg, msg
    assert msg.startswith(f"{path}: {field.split(chr(92))[0]}"), msg


@pytest.mark.parametrize(
    ("line", "field", "says"),
    [
        ("timeout_s = nan", "timeout_s", "finite"),
        ("timeout_s = inf", "timeout_s", "finite"),
        ("timeout_s = -inf", "timeout_s", "finite"),
        ("timeout_s = 1e300", "timeout_s", "at most 604800"),
        ("timeout_s = 0", "timeout_s", "positive"),
        ("kill_grace_s = inf", "kill_grace_s", "finite"),
        ("kill_grace_s = nan", "kill_grace_s", "finite"),
        ("kill_grace_s = 1e9", "kill_grace_s", "at most 600"),
        ("kill_grace_s = -1", "kill_grace_s", ">= 0"),
        ("repeats = 1000000000", "repeats", "at most 1000"),
        ("repeats = 1001", "repeats", "at most 1000"),
        ("warmup = 101", "warmup", "at most 100"),
    ],
)
def test_numbers_must_be_finite_and_in_range(
    tmp_path: Path, line: str, field: str, says: str
) -> None:
    path = write(tmp_path, f'name = "x"\ncommand = ["{PY}"]\n{line}\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: {field}: "), msg
    assert says in msg, msg


def test_counts_are_bounded_in_total_and_through_overrides(tmp_path: Path) -> None:
    many = "".join(f"[variants.v{i}]\n" for i in range(101))
    with pytest.raises(SpecError, match="variants: at most 100 variants, got 101"):
        load_spec(write(tmp_path, f'name = "x"\ncommand = ["{PY}"]\n{many}'))
    twenty = "".join(f"[variants.v{i}]\n" for i in range(20))
    spec = load_spec(write(tmp_path, f'name = "x"\ncommand = ["{PY}"]\nrepeats = 100\n{twenty}'))
    assert spec.repeats == 100  # 20 × 100 = 2,000 runs: the most an experiment may have
    with pytest.raises(SpecError, match=r"at most 2,000 runs in all.*20 variants × \(101"):
        select(spec, repeats=101)
    with pytest.raises(SpecError, match=r"at most 2,000 runs in all.*20 variants × \(100 .* 1 w"):
        select(spec, warmup=1)
    with pytest.raises(SpecError, match=r"repeats: .*at most 1000"):
        select(spec, repeats=10**9)  # before anything is planned
    with pytest.raises(SpecError, match=r"warmup: .*at most 100"):
        select(spec, warmup=10**9)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: Path("/dev/zero"), "not a regular file"),
        (lambda d: d, "not a regular file"),
        (lambda d: _fifo(d), "not a regular file"),
        (lambda d: _big(d), "larger than 1 MiB"),
    ],
    ids=["dev-zero", "directory", "fifo", "big"],
)
def test_spec_files_are_read_with_a_size_bound(
    tmp_path: Path, make: Callable[[Path], Path], says: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(SpecError) as info:
        load_spec(path)  # /dev/zero used to end in a MemoryError; a FIFO would block
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and says in msg, msg


def _fifo(d: Path) -> Path:
    import os

    os.mkfifo(d / "spec.toml")
    return d / "spec.toml"


def _big(d: Path) -> Path:
    p = d / "big.toml"
    p.write_text(f'name = "x"\ncommand = ["{PY}"]\n' + "# padding\n" * 200_000)
    return p


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


def test_min_difference_pct_is_parsed_saved_and_refused_when_absurd(tmp_path: Path) -> None:
    from tui_prof.experiments.commands import save_spec
    from tui_prof.experiments.spec import parse_min_difference

    assert parse_min_difference("5") == {"*": 5.0}
    assert parse_min_difference("wall_time_s=5%, acc=0.5") == {"wall_time_s": 5.0, "acc": 0.5}
    for bad in ("0", "-1", "101", "nan", "x=", "wall_time_s=fast"):
        with pytest.raises(ValueError, match="percentage above 0"):
            parse_min_difference(bad)
    spec_file = tmp_path / "s.toml"
    spec_file.write_text(
        'name = "m"\ncommand = ["true"]\nmin_difference_pct = { wall_time_s = 2.5 }\n'
        "[variants.a]\n",
        encoding="utf-8",
    )
    spec = load_spec(spec_file)
    assert spec.min_difference_pct == {"wall_time_s": 2.5}
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec
    save_spec(spec, tmp_path / "again.toml")
    assert load_spec(tmp_path / "again.toml").min_difference_pct == {"wall_time_s": 2.5}
    spec_file.write_text('name = "m"\ncommand = ["true"]\nmin_difference_pct = 0\n')
    with pytest.raises(SpecError, match="min_difference_pct: expected a percentage"):
        load_spec(spec_file)
