"""Experiment specs: a TOML file naming a command, its variants and how often to run each.

Contract: `load_spec(path)` returns a fully validated, resolved `ExperimentSpec` or raises
`SpecError` with one line naming the file, the field and what was expected, so a typo is found
before anything starts, including a command whose executable does not exist. Arguments may
contain `${TUIPROF_REPEAT}` (or any other TUIPROF_* variable of the run), replaced per run.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

WALL_TIME = "wall_time_s"
ORDERS = ("interleaved", "sequential")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TOP_KEYS = {
    "name",
    "command",
    "repeats",
    "warmup",
    "timeout_s",
    "workdir",
    "output",
    "metrics",
    "baseline",
    "order",
    "variants",
    "kill_grace_s",
}


class SpecError(ValueError):
    """An experiment spec that cannot run; the message is one line meant for the user."""


@dataclass(frozen=True)
class VariantSpec:
    """One variant: arguments appended to the command and environment overrides."""

    name: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExperimentSpec:
    """A validated experiment; paths are absolute so the spec survives a change of directory."""

    name: str
    command: tuple[str, ...]
    variants: tuple[VariantSpec, ...]
    repeats: int
    baseline: str
    warmup: int = 0  # warm-up runs per variant, run first and never counted
    timeout_s: float | None = None
    workdir: str = "."
    output: str = ""  # the directory that holds this spec's experiments
    metrics: tuple[str, ...] = (WALL_TIME,)
    order: str = "interleaved"
    kill_grace_s: float = 5.0  # SIGTERM to SIGKILL on timeout or stop
    source: str = ""  # the spec file, for messages

    def variant(self, name: str) -> VariantSpec:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    def argv(self, variant: str) -> list[str]:
        return [*self.command, *self.variant(variant).args]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": list(self.command),
            "variants": {v.name: {"args": list(v.args), "env": dict(v.env)} for v in self.variants},
            "repeats": self.repeats,
            "baseline": self.baseline,
            "warmup": self.warmup,
            "timeout_s": self.timeout_s,
            "workdir": self.workdir,
            "output": self.output,
            "metrics": list(self.metrics),
            "order": self.order,
            "kill_grace_s": self.kill_grace_s,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperimentSpec:
        """Rebuild a spec the store saved (already validated once)."""
        variants = tuple(
            VariantSpec(name, tuple(v.get("args", ())), dict(v.get("env", {})))
            for name, v in d["variants"].items()
        )
        return cls(
            name=d["name"],
            command=tuple(d["command"]),
            variants=variants,
            repeats=int(d["repeats"]),
            baseline=d["baseline"],
            warmup=int(d.get("warmup", 0)),
            timeout_s=d.get("timeout_s"),
            workdir=d.get("workdir", "."),
            output=d.get("output", ""),
            metrics=tuple(d.get("metrics", (WALL_TIME,))),
            order=d.get("order", "interleaved"),
            kill_grace_s=float(d.get("kill_grace_s", 5.0)),
            source=d.get("source", ""),
        )


def _err(path: Path | str, fieldname: str, expected: str) -> SpecError:
    return SpecError(f"{path}: {fieldname}: {expected}")


def _str_list(path: Path, name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise _err(path, name, f"expected a list of strings, got {value!r}")
    return tuple(value)


def _pos_int(path: Path, name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _err(path, name, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _variant(path: Path, name: str, table: Any) -> VariantSpec:
    where = f"variants.{name}"
    if not _NAME_RE.match(name):
        raise _err(path, where, "expected a name of letters, digits, '_', '.' or '-'")
    if not isinstance(table, dict):
        raise _err(path, where, "expected a table with optional 'args' and 'env'")
    unknown = set(table) - {"args", "env"}
    if unknown:
        raise _err(
            path, f"{where}.{sorted(unknown)[0]}", "unknown field (expected 'args' or 'env')"
        )
    args = _str_list(path, f"{where}.args", table.get("args", []))
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise _err(path, f"{where}.env", 'expected a table of string values, e.g. {X = "1"}')
    return VariantSpec(name, args, dict(env))


def check_executable(spec: ExperimentSpec) -> None:
    """Raise SpecError if the command's program cannot be found for some variant."""
    prog = spec.command[0]
    for v in spec.variants:
        if os.sep in prog or (os.altsep and os.altsep in prog):
            p = Path(prog) if os.path.isabs(prog) else Path(spec.workdir) / prog
            if not (p.is_file() and os.access(p, os.X_OK)):
                raise _err(
                    spec.source, "command", f"program {prog!r} does not exist or is not executable"
                )
        else:
            path_var = v.env.get("PATH", os.environ.get("PATH", os.defpath))
            if shutil.which(prog, path=path_var) is None:
                raise _err(spec.source, "command", f"program {prog!r} not found on PATH")


def parse_spec(data: dict[str, Any], path: Path) -> ExperimentSpec:
    """Validate a parsed TOML document; `path` is the spec file (relative paths start at its folder)."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise _err(
            path,
            sorted(unknown)[0],
            f"unknown field (expected one of {', '.join(sorted(_TOP_KEYS))})",
        )
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _err(path, "name", "expected a name of letters, digits, '_', '.' or '-'")
    if "command" not in data:
        raise _err(path, "command", 'missing; expected an argv list such as ["python", "train.py"]')
    command = _str_list(path, "command", data["command"])
    if not command:
        raise _err(path, "command", "expected a non-empty argv list")
    repeats = _pos_int(path, "repeats", data.get("repeats", 3), 1)
    warmup = _pos_int(path, "warmup", data.get("warmup", 0), 0)
    timeout = data.get("timeout_s")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise _err(path, "timeout_s", f"expected a positive number of seconds, got {timeout!r}")
    grace = data.get("kill_grace_s", 5.0)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise _err(path, "kill_grace_s", f"expected a number of seconds >= 0, got {grace!r}")
    base = path.parent.resolve()
    workdir = data.get("workdir", ".")
    if not isinstance(workdir, str):
        raise _err(path, "workdir", f"expected a directory path, got {workdir!r}")
    wd = (base / workdir).resolve()
    if not wd.is_dir():
        raise _err(path, "workdir", f"expected an existing directory, {wd} is not one")
    output = data.get("output", "tuiprof-experiments")
    if not isinstance(output, str) or not output:
        raise _err(path, "output", f"expected a directory path, got {output!r}")
    metrics = _str_list(path, "metrics", data.get("metrics", []))
    metrics = (WALL_TIME, *[m for m in dict.fromkeys(metrics) if m != WALL_TIME])
    order = data.get("order", "interleaved")
    if order not in ORDERS:
        raise _err(path, "order", f'expected "interleaved" or "sequential", got {order!r}')
    raw_variants = data.get("variants")
    if raw_variants is None:
        variants: tuple[VariantSpec, ...] = (VariantSpec("default"),)
    elif not isinstance(raw_variants, dict) or not raw_variants:
        raise _err(path, "variants", "expected one or more [variants.NAME] tables")
    else:
        variants = tuple(_variant(path, n, t) for n, t in raw_variants.items())
    baseline = data.get("baseline", variants[0].name)
    if baseline not in {v.name for v in variants}:
        names = ", ".join(v.name for v in variants)
        raise _err(path, "baseline", f"expected one of the variants ({names}), got {baseline!r}")
    spec = ExperimentSpec(
        name=name,
        command=command,
        variants=variants,
        repeats=repeats,
        baseline=baseline,
        warmup=warmup,
        timeout_s=float(timeout) if timeout is not None else None,
        workdir=str(wd),
        output=str((base / output).resolve()),
        metrics=metrics,
        order=order,
        kill_grace_s=float(grace),
        source=str(path),
    )
    check_executable(spec)
    return spec


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate a spec file; raise SpecError with a one-line message on any problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: invalid TOML: {exc}") from None
    return parse_spec(data, p)


def select(
    spec: ExperimentSpec,
    variants: list[str] | None = None,
    repeats: int | None = None,
    warmup: int | None = None,
) -> ExperimentSpec:
    """The spec narrowed to some variants and/or with other counts (the CLI's overrides)."""
    out = spec
    if variants:
        known = {v.name: v for v in spec.variants}
        missing = [n for n in variants if n not in known]
        if missing:
            raise _err(
                spec.source,
                "variants",
                f"no variant named {missing[0]!r} (have {', '.join(known)})",
            )
        chosen = tuple(known[n] for n in dict.fromkeys(variants))
        base = spec.baseline if spec.baseline in variants else chosen[0].name
        out = replace(out, variants=chosen, baseline=base)
    if repeats is not None:
        out = replace(out, repeats=_pos_int(Path(spec.source), "repeats", repeats, 1))
    if warmup is not None:
        out = replace(out, warmup=_pos_int(Path(spec.source), "warmup", warmup, 0))
    return out


def default_experiment_dir(spec: ExperimentSpec, now: float | None = None) -> Path:
    """`<output>/<name>-<YYYYmmdd-HHMMSS>`, with a suffix if that already exists."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = Path(spec.output) / f"{spec.name}-{stamp}"
    cand, n = base, 1
    while cand.exists():
        n += 1
        cand = base.with_name(f"{base.name}-{n}")
    return cand
