"""Where an experiment's runs execute: the spec's `[backend]` table.

Contract: `parse_backend(table, path)` validates the table (one `SpecError` line naming the
field) into a frozen `BackendSpec`; `to_dict`/`from_dict` round-trip it through the store and
`toml_lines` through spec.toml. `kind = "local"` (the default, no table) runs processes on this
machine; `kind = "ray"` submits each run to a Ray cluster (tui_prof.experiments.backends.ray):

    [backend]
    kind = "ray"
    address = "10.0.0.1:8265"    # the cluster's dashboard (Jobs API); default $RAY_ADDRESS or 127.0.0.1:8265
    gpus_per_run = 1             # Ray sets CUDA_VISIBLE_DEVICES to the run's own GPUs
    cpus_per_run = 1
    accelerator_type = "H100"    # every run on this GPU model (Ray's accelerator_type:H100)
    placement = "blocked"        # each repeat's variants on one node ("spread": anywhere)
    retries = 1                  # a run whose node died is run again once, on another node
    pending_timeout_s = 600      # a run not placed after this long fails, naming what is missing
    storage = "/shared/tuiprof"  # optional: artifacts go through this shared directory
    upload_workdir = false       # true: ship `workdir` to the cluster (Ray's working_dir)
    python = "python3"           # the interpreter on the nodes that runs tuiprof's run wrapper
    mode = "jobs"                # or "actors": a warm agent per node starts each run (see docs)
    gcs_address = "10.0.0.1:6379"  # actors only: the cluster's GCS; default the head's IP:6379

Nothing here imports Ray: a spec naming it is read and checked without it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS = ("local", "ray")
PLACEMENTS = ("blocked", "spread")
MODES = ("jobs", "actors")
MAX_RETRIES = 3  # node losses per run: more means the cluster, not the run, needs attention
MAX_RESOURCE = 1024.0  # GPUs or CPUs per run: more is a typo (one node has at most a few hundred)
MAX_PENDING_S = 7 * 24 * 3600.0
DEFAULT_PENDING_S = 600.0
DEFAULT_ADDRESS = "127.0.0.1:8265"
_RAY_KEYS = {
    "address",
    "gpus_per_run",
    "cpus_per_run",
    "accelerator_type",
    "storage",
    "placement",
    "retries",
    "pending_timeout_s",
    "upload_workdir",
    "python",
    "mode",
    "gcs_address",
}
_KEYS = {"kind", *_RAY_KEYS}


@dataclass(frozen=True)
class BackendSpec:
    """A validated `[backend]` table; `local` has no other settings."""

    kind: str = "local"
    address: str | None = None  # HOST:PORT or http(s)://HOST:PORT of the dashboard
    gpus_per_run: float = 0.0
    cpus_per_run: float = 1.0
    accelerator_type: str | None = None
    storage: str | None = None
    placement: str = "blocked"
    retries: int = 0
    pending_timeout_s: float = DEFAULT_PENDING_S
    upload_workdir: bool = False
    python: str = "python3"
    mode: str = "jobs"  # "actors": a long-lived agent per node runs them (backends/ray/actors.py)
    gcs_address: str | None = None  # actors: HOST:PORT of the GCS (default: the head's :6379)

    @property
    def remote(self) -> bool:
        """Runs execute elsewhere and outlive tuiprof (a cluster)."""
        return self.kind != "local"

    def resolved_address(self) -> str:
        """The dashboard URL: the spec's address, else $RAY_ADDRESS, else 127.0.0.1:8265."""
        address = self.address or os.environ.get("RAY_ADDRESS") or DEFAULT_ADDRESS
        return address if "://" in address else f"http://{address}"

    def to_dict(self) -> dict[str, Any]:
        if not self.remote:
            return {"kind": self.kind}
        return {
            "kind": self.kind,
            "address": self.address,
            "gpus_per_run": self.gpus_per_run,
            "cpus_per_run": self.cpus_per_run,
            "accelerator_type": self.accelerator_type,
            "storage": self.storage,
            "placement": self.placement,
            "retries": self.retries,
            "pending_timeout_s": self.pending_timeout_s,
            "upload_workdir": self.upload_workdir,
            "python": self.python,
            "mode": self.mode,
            "gcs_address": self.gcs_address,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> BackendSpec:
        """Rebuild what the store saved (already validated once); absent: local."""
        if not d:
            return cls()
        default = cls()
        return cls(
            kind=str(d.get("kind", "local")),
            address=d.get("address"),
            gpus_per_run=float(d.get("gpus_per_run", default.gpus_per_run)),
            cpus_per_run=float(d.get("cpus_per_run", default.cpus_per_run)),
            accelerator_type=d.get("accelerator_type"),
            storage=d.get("storage"),
            placement=str(d.get("placement", default.placement)),
            retries=int(d.get("retries", 0)),
            pending_timeout_s=float(d.get("pending_timeout_s", DEFAULT_PENDING_S)),
            upload_workdir=bool(d.get("upload_workdir", False)),
            python=str(d.get("python", default.python)),
            mode=str(d.get("mode", default.mode)),
            gcs_address=d.get("gcs_address"),
        )

    def toml_lines(self, quote: Any) -> list[str]:
        """The `[backend]` table for spec.toml (`quote` writes a TOML string); none for local."""
        if not self.remote:
            return []
        lines = ["", "[backend]", f"kind = {quote(self.kind)}"]
        if self.address:
            lines.append(f"address = {quote(self.address)}")
        lines += [
            f"gpus_per_run = {_num(self.gpus_per_run)}",
            f"cpus_per_run = {_num(self.cpus_per_run)}",
        ]
        if self.accelerator_type:
            lines.append(f"accelerator_type = {quote(self.accelerator_type)}")
        if self.storage:
            lines.append(f"storage = {quote(self.storage)}")
        lines += [
            f"placement = {quote(self.placement)}",
            f"retries = {self.retries}",
            f"pending_timeout_s = {_num(self.pending_timeout_s)}",
            f"upload_workdir = {'true' if self.upload_workdir else 'false'}",
            f"python = {quote(self.python)}",
            f"mode = {quote(self.mode)}",
        ]
        if self.gcs_address:
            lines.append(f"gcs_address = {quote(self.gcs_address)}")
        return lines


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _fail(path: Path | str, name: str, expected: str) -> ValueError:
    from tui_prof.experiments.spec import SpecError

    return SpecError(f"{path}: backend.{name}: {expected}")


def _amount(path: Path | str, name: str, value: Any, *, zero_ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(path, name, f"expected a number, got {value!r}")
    if value < 0 or (value == 0 and not zero_ok) or value > MAX_RESOURCE:
        low = ">= 0" if zero_ok else "> 0"
        raise _fail(
            path, name, f"expected a number {low} and at most {MAX_RESOURCE:g}, got {value}"
        )
    return float(value)


def _text(path: Path | str, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\n\r\x00"):
        raise _fail(path, name, f"expected a non-empty one-line string, got {value!r}")
    return value.strip()


def parse_backend(table: Any, path: Path | str, base: Path | None = None) -> BackendSpec:
    """Validate a `[backend]` table (see the module contract); relative `storage` starts at base."""
    if not isinstance(table, dict):
        raise _fail(path, "kind", 'expected a [backend] table, e.g. kind = "ray"')
    unknown = set(table) - _KEYS
    if unknown:
        raise _fail(
            path, sorted(unknown)[0], f"unknown field (expected one of {', '.join(sorted(_KEYS))})"
        )
    kind = table.get("kind", "ray" if set(table) & _RAY_KEYS else "local")  # the keys say
    if kind not in KINDS:
        raise _fail(path, "kind", f'expected "local" or "ray", got {kind!r}')
    if kind == "local":
        extra = sorted(set(table) & _RAY_KEYS)
        if extra:
            raise _fail(path, extra[0], 'only for kind = "ray" (a local run uses this machine)')
        return BackendSpec()
    default = BackendSpec()
    address = _text(path, "address", table["address"]) if "address" in table else None
    placement = table.get("placement", default.placement)
    if placement not in PLACEMENTS:
        raise _fail(path, "placement", f'expected "blocked" or "spread", got {placement!r}')
    retries = table.get("retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise _fail(
            path, "retries", f"expected an integer from 0 to {MAX_RETRIES}, got {retries!r}"
        )
    pending = table.get("pending_timeout_s", DEFAULT_PENDING_S)
    if (
        isinstance(pending, bool)
        or not isinstance(pending, (int, float))
        or not math.isfinite(pending)
        or not 0 < pending <= MAX_PENDING_S
    ):
        raise _fail(
            path,
            "pending_timeout_s",
            f"expected seconds > 0, at most {MAX_PENDING_S:g}, got {pending!r}",
        )
    upload = table.get("upload_workdir", False)
    if not isinstance(upload, bool):
        raise _fail(path, "upload_workdir", f"expected true or false, got {upload!r}")
    storage = _text(path, "storage", table["storage"]) if "storage" in table else None
    if storage is not None:
        if "://" in storage:
            raise _fail(
                path,
                "storage",
                f"expected a directory every node and this machine see (NFS, a bucket mount), "
                f"got the URI {storage!r}",
            )
        storage = str(((base or Path.cwd()) / os.path.expanduser(storage)).resolve())
    accel = table.get("accelerator_type")
    mode = table.get("mode", default.mode)
    if mode not in MODES:
        raise _fail(path, "mode", f'expected "jobs" or "actors", got {mode!r}')
    gcs = _text(path, "gcs_address", table["gcs_address"]) if "gcs_address" in table else None
    if gcs is not None and mode != "actors":
        raise _fail(path, "gcs_address", 'only for mode = "actors" (jobs go through the dashboard)')
    if upload and mode == "actors":
        raise _fail(path, "upload_workdir", 'only for mode = "jobs" (an agent has no working_dir)')
    return BackendSpec(
        kind=kind,
        address=address,
        gpus_per_run=_amount(path, "gpus_per_run", table.get("gpus_per_run", 0), zero_ok=True),
        cpus_per_run=_amount(path, "cpus_per_run", table.get("cpus_per_run", 1), zero_ok=True),
        accelerator_type=_text(path, "accelerator_type", accel) if accel is not None else None,
        storage=storage,
        placement=placement,
        retries=retries,
        pending_timeout_s=float(pending),
        upload_workdir=upload,
        python=_text(path, "python", table.get("python", default.python)),
        mode=mode,
        gcs_address=gcs,
    )


def with_options(
    spec: BackendSpec,
    *,
    kind: str | None = None,
    address: str | None = None,
    gpus_per_run: float | None = None,
    cpus_per_run: float | None = None,
    accelerator_type: str | None = None,
    mode: str | None = None,
    source: str = "--backend",
) -> BackendSpec:
    """The spec's backend with the command line's choices over it (`tuiprof run --backend …`)."""
    given = {
        "address": address,
        "gpus_per_run": gpus_per_run,
        "cpus_per_run": cpus_per_run,
        "accelerator_type": accelerator_type,
        "mode": mode,
    }
    given = {k: v for k, v in given.items() if v is not None}
    final = kind or spec.kind
    if final == "local":
        if given:
            raise _fail(source, sorted(given)[0], "goes with --backend ray")
        return BackendSpec()
    table: dict[str, Any] = {k: v for k, v in spec.to_dict().items() if v is not None}
    table.update(given, kind=final)
    return parse_backend(table, source)
