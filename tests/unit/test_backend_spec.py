"""A spec's [backend] table and the ray options, checked without Ray or a cluster: absurd values
and addresses are one line naming the field, before anything is made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tui_prof.experiments.backend_spec import BackendSpec
from tui_prof.experiments.backends import BackendError
from tui_prof.experiments.backends.ray import reachable
from tui_prof.experiments.spec import SpecError, load_spec

HEAD = 'name = "x"\ncommand = ["true"]\n'


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('kind = "ray"\ngpus_per_run = 1e9', "backend.gpus_per_run"),
        ('kind = "ray"\ncpus_per_run = -1', "backend.cpus_per_run"),
        ("retries = 99", "backend.retries"),
        ('kind = "slurm"', "backend.kind"),
        ('kind = "ray"\nplacement = "random"', "backend.placement"),
        ('kind = "ray"\nflavour = 1', "unknown field"),
        ('kind = "ray"\nmode = "tasks"', "backend.mode"),
        ('kind = "ray"\ngcs_address = "10.0.0.1:6379"', "backend.gcs_address: only for mode"),
        ('mode = "actors"\nupload_workdir = true', "backend.upload_workdir: only for mode"),
    ],
)
def test_absurd_backend_values_name_the_field(tmp_path: Path, table: str, says: str) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(HEAD + "[backend]\n" + table + "\n")
    with pytest.raises(SpecError, match=says):
        load_spec(spec)


def test_ray_keys_alone_choose_ray(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(HEAD + '[backend]\naccelerator_type = "H100"\ngpus_per_run = 1\n')
    backend = load_spec(spec).backend
    assert backend.kind == "ray" and backend.remote and backend.accelerator_type == "H100"
    assert BackendSpec.from_dict(backend.to_dict()) == backend


def test_the_actor_mode_round_trips_through_the_store_and_spec_toml(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(HEAD + '[backend]\nmode = "actors"\ngcs_address = "10.0.0.1:6380"\n')
    backend = load_spec(spec).backend
    assert (backend.kind, backend.mode, backend.gcs_address) == ("ray", "actors", "10.0.0.1:6380")
    assert BackendSpec.from_dict(backend.to_dict()) == backend
    lines = backend.toml_lines(lambda v: f'"{v}"')
    assert 'mode = "actors"' in lines and 'gcs_address = "10.0.0.1:6380"' in lines
    again = tmp_path / "again.toml"
    again.write_text(HEAD + "\n".join(lines) + "\n")
    assert load_spec(again).backend == backend


@pytest.mark.parametrize("address", ["http://[bad::addr", "http://127.0.0.1:99999"])
def test_a_malformed_address_is_one_line(address: str) -> None:
    with pytest.raises(BackendError, match="not a Ray dashboard address"):
        reachable(address)


def test_nothing_listening_is_one_line_and_nothing_is_made(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(HEAD)
    p = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "run", "s.toml", "--headless", "--backend", "ray",
         "--ray-address", "127.0.0.1:1", "--output", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2 and p.stdout == "" and not (tmp_path / "out").exists()
    assert p.stderr.count("\n") == 1 and "no Ray cluster at http://127.0.0.1:1" in p.stderr
