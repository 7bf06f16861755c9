"""`tuiprof run --variant NAME='COMMAND'`: variants as plain commands, real subprocesses, the
spec written back as TOML, and what goes wrong said in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO

from tui_prof.experiments.commands import (
    SPEC_FILE,
    command_text,
    parse_variant,
    spec_from_commands,
    spec_to_toml,
)
from tui_prof.experiments.spec import ExperimentSpec, SpecError, VariantSpec, load_spec
from tui_prof.experiments.store import load_experiment, load_spec_from
from tui_prof.model import RUN_FINISHED

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
PY = sys.executable
JOB = r"""
import json, os, sys
args = sys.argv[1:]
with open(os.environ["TUIPROF_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"args": " ".join(args), "mode": os.environ.get("MODE", "-")}) + "\n")
    f.write(json.dumps({"val_accuracy": 0.9, "seed": float(args[-1])}) + "\n")
"""


def tuiprof(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "tui_prof.cli", "run", *args, "--headless", "--no-profiler-port"],
        cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_variants_as_commands_run_like_a_spec_and_leave_one_behind(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    res = tuiprof(
        tmp_path,
        "--variant", f"fp32={PY} job.py --precision float32 --seed '${{TUIPROF_REPEAT}}'",
        "--variant", f"mixed=MODE='a b' {PY} job.py --precision mixed --seed '${{TUIPROF_REPEAT}}'",
        "--repeats", "2", "--name", "amp", "--baseline", "mixed",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    exp_dir = Path(res.stdout.strip().splitlines()[-1])
    assert exp_dir.parent == tmp_path / "tuiprof-experiments" and exp_dir.name.startswith("amp-")
    exp = load_experiment(exp_dir)
    assert (exp.name, exp.baseline, exp.variants) == ("amp", "mixed", ("fp32", "mixed"))
    assert [r.run_id for r in exp.runs] == ["fp32-r0", "mixed-r0", "fp32-r1", "mixed-r1"]
    assert all(r.status == RUN_FINISHED for r in exp.runs)
    seen = {r.run_id: r.environment["reported"] for r in exp.runs}
    assert seen["mixed-r1"] == {"args": "--precision mixed --seed 1", "mode": "a b"}
    assert seen["fp32-r0"]["mode"] == "-"
    assert {r.run_id: r.metrics["seed"] for r in exp.runs}["fp32-r1"] == 1.0
    stored = load_spec_from(exp_dir)
    assert stored.command == (PY, "job.py")
    assert stored.variant("mixed") == VariantSpec(
        "mixed", ("--precision", "mixed", "--seed", "${TUIPROF_REPEAT}"), {"MODE": "a b"}
    )
    written = load_spec(exp_dir / SPEC_FILE)  # a TOML file `tuiprof run` takes again
    assert replace(written, source="") == replace(stored, source="")
    again = tuiprof(tmp_path, str(exp_dir / SPEC_FILE))
    assert again.returncode == 0 and "4/4 runs finished" in again.stdout


def test_resume_works_on_an_experiment_made_from_commands(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    res = tuiprof(tmp_path, "--variant", f"a={PY} job.py 0", "--output", str(tmp_path / "e"))
    assert res.returncode == 0, res.stderr
    more = tuiprof(tmp_path, "--resume", str(tmp_path / "e"), "--repeats", "4")
    assert more.returncode == 0, more.stderr
    assert [r.run_id for r in load_experiment(tmp_path / "e").runs] == [f"a-r{i}" for i in range(4)]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--variant", "a=python x.py", "--variant", "b=python3 x.py"], "different programs"),
        (["--variant", "python x.py"], "expected NAME=COMMAND"),
        (["--variant", "a=python 'x.py"], "cannot split the command"),
        (["--variant", "a=X=1"], "no command after the name"),
        (["--variant", "a=python x", "--variant", "a=python y"], "the same name is given twice"),
        (["--variant", "a b=python x"], "variants.a b: expected a name of letters"),
        (["--variant", "a=no-such-program-42 x"], "program 'no-such-program-42' not found"),
        (["--variant", "a=python x", "--baseline", "z"], "baseline: expected one of the variants"),
        (["--variant", "a=python x", "spec.toml"], "--variant takes no SPEC"),
        (["--variant", "a=python x", "--repeats", "0"], "repeats: expected an integer >= 1"),
        (["spec.toml", "--baseline", "a"], "--name and --baseline go with --variant"),
    ],
)
def test_bad_variants_are_one_line_and_start_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    res = tuiprof(tmp_path, *args)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "tuiprof-experiments").exists()


def test_commands_split_like_a_shell_and_join_back() -> None:
    name, env, argv = parse_variant("""x=A=1 B="two words" prog --flag 'it''s' "a\\"b" c\\ d""")
    assert (name, env) == ("x", {"A": "1", "B": "two words"})
    assert argv == ["prog", "--flag", "its", 'a"b', "c d"]
    assert parse_variant("x=" + command_text(argv, env)) == (name, env, argv)
    spec = spec_from_commands(["a=python t.py -m 1", "b=python t.py --m 2"], workdir=".")
    assert spec.command == ("python", "t.py") and spec.name == "a-vs-b"
    assert spec.variant("b").args == ("--m", "2") and spec.baseline == "a"


def test_toml_round_trips_awkward_strings(tmp_path: Path) -> None:
    spec = ExperimentSpec(
        name="odd.name-1",
        command=(PY, 'quote"back\\slash', "tab\there", "ünï"),
        variants=(
            VariantSpec("v1.5", ("--x", "line\nbreak", "del\x7f", "bell\x07")),
            VariantSpec("b", (), {"K": 'v"1', "EMPTY": ""}),
        ),
        repeats=4,
        baseline="b",
        warmup=1,
        timeout_s=12.5,
        workdir=str(tmp_path),
        output=str(tmp_path / "out"),
        metrics=("wall_time_s", "val_accuracy"),
        order="sequential",
        kill_grace_s=0.5,
    )
    text = spec_to_toml(spec)
    assert tomllib.loads(text)["variants"]["v1.5"]["args"][3] == "bell\x07"
    (tmp_path / "s.toml").write_text(text, encoding="utf-8")
    back = load_spec(tmp_path / "s.toml")
    assert replace(back, source="") == spec
    with pytest.raises(SpecError, match="not representable"):
        spec_to_toml(replace(spec, command=(PY, "bad\udcff")))


def test_json_of_compare_on_a_commands_experiment(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    res = tuiprof(tmp_path, "--variant", f"a={PY} job.py 0", "--variant", f"b={PY} job.py 1",
                  "--output", str(tmp_path / "e"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = subprocess.run([PY, "-m", "tui_prof.cli", "compare", str(tmp_path / "e"), "--json"],
                         env=ENV, capture_output=True, text=True, timeout=60)  # fmt: skip
    doc = json.loads(out.stdout)
    (c,) = doc["metrics"]["wall_time_s"]["comparisons"]
    assert c["design"] == "paired" and "repeats_needed" in c
    assert doc["tradeoff"]["quality"] == "val_accuracy"
