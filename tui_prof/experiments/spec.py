"""Experiment specs: a TOML file naming a command, its variants and how often to run each.

Contract: `load_spec(path)` returns a fully validated, resolved `ExperimentSpec` or raises
`SpecError` with one line naming the file, the field and what was expected, so a typo is found
before anything starts, including a command whose executable does not exist. Arguments may
contain `${TUIPROF_REPEAT}` (or any other TUIPROF_* variable of the run), replaced per run.
Counts and times are bounded (see the MAX_* constants for the limits and why), names hold no
control characters, and a spec file is read only if it is a regular file of at most 1 MiB.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import time
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tui_prof.experiments.backend_spec import BackendSpec, parse_backend

WALL_TIME = "wall_time_s"
ORDERS = ("interleaved", "sequential")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # fullmatch: "$" would allow "a\n"
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# Limits, each with its reason (docs/experiments.md "Limits" says the same). Counts: every run is a whole
# process, a row in the store and a row in the live tables, so a typo such as 1000000000 must be
# refused before anything is planned, not discovered as a machine out of memory.
MAX_REPEATS = 1000  # per variant: a 95% interval of the mean is then ±6% of the runs' std;
#   more narrows it only as 1/√n while the machine drifts over the hours such a series takes
MAX_WARMUP = 100  # per variant: warm-ups fill caches and compile; a few do that
MAX_VARIANTS = 100  # each is a row of statistics and an interval against the baseline; among
#   100 intervals about 5 exclude "no difference" by chance alone
MAX_RUNS = 2000  # variants × (repeats + warm-ups): planned, stored and shown in the live tables at
#   once (first run ≈0.1 s after start; the TUI's run table ≈0.8 s on a 2-core VM); 33 min at 1 s/run
MAX_PARALLEL = 64  # runs at once (`--parallel`): each is a process and a thread polling it
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # one run: a week; more is a unit mistake (ms for s) or none
MAX_KILL_GRACE_S = 600.0  # SIGTERM → SIGKILL: ten minutes lets a job checkpoint; more never kills
MAX_SPEC_BYTES = 1 << 20  # a spec is a few lines; /dev/zero or a log named by mistake is not
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
    "backend",
    "min_difference_pct",
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
    backend: BackendSpec = field(default_factory=BackendSpec)  # where runs execute
    # The smallest difference that matters, in percent, per metric ("*": every metric); unset
    # metrics: 5% for times (tui_prof.comparison.names.min_difference_pct)
    min_difference_pct: dict[str, float] = field(default_factory=dict)

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
            "backend": self.backend.to_dict(),
            "min_difference_pct": dict(self.min_difference_pct),
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
            backend=BackendSpec.from_dict(d.get("backend")),
            min_difference_pct=dict(d.get("min_difference_pct") or {}),
        )


def _err(path: Path | str, fieldname: str, expected: str) -> SpecError:
    return SpecError(f"{path}: {fieldname}: {expected}")


def _str_list(path: Path, name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise _err(path, name, f"expected a list of strings, got {value!r}")
    if any("\0" in a for a in value):  # no process can be given one: every run would fail
        raise _err(path, name, "a NUL byte cannot be passed to a process")
    return tuple(value)


def _pos_int(path: Path | str, name: str, value: Any, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _err(path, name, f"expected an integer >= {minimum}, got {value!r}")
    if value > maximum:
        raise _err(
            path, name, f"expected an integer >= {minimum} and at most {maximum}, got {value}"
        )
    return value


def _seconds(
    path: Path, name: str, value: Any, maximum: float, *, zero_ok: bool, default: str
) -> float:
    """A finite number of seconds in range; nan and inf would mean "never" without saying so."""
    want = "a number of seconds >= 0" if zero_ok else "a positive number of seconds"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _err(path, name, f"expected {want}, got {value!r}")
    if not math.isfinite(value):
        raise _err(
            path,
            name,
            f"expected a finite number of seconds, got {value!r} (leave it out for {default})",
        )
    if value < 0 or (value == 0 and not zero_ok):
        raise _err(path, name, f"expected {want}, got {value!r}")
    if value > maximum:
        raise _err(path, name, f"expected at most {maximum:g} seconds, got {value:g}")
    return float(value)


def check_name(path: Path | str, where: str, name: Any) -> str:
    """A name that becomes a directory and a printed line: no control characters, no separators."""
    if isinstance(name, str) and _CONTROL_RE.search(name):
        raise _err(path, where, f"a name may not contain control characters, got {name!r}")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise _err(
            path,
            where,
            f"expected a name of letters, digits, '_', '.' or '-' (at most 100), got {name!r}",
        )
    return name


def check_counts(spec: ExperimentSpec) -> ExperimentSpec:
    """Raise SpecError unless the spec's counts are within the MAX_* limits."""
    src = spec.source
    _pos_int(src, "repeats", spec.repeats, 1, MAX_REPEATS)
    _pos_int(src, "warmup", spec.warmup, 0, MAX_WARMUP)
    if len(spec.variants) > MAX_VARIANTS:
        raise _err(src, "variants", f"at most {MAX_VARIANTS} variants, got {len(spec.variants)}")
    total = len(spec.variants) * (spec.repeats + spec.warmup)
    if total > MAX_RUNS:
        raise _err(
            src,
            "repeats",
            f"at most {MAX_RUNS:,} runs in all, got {total:,} ({len(spec.variants)} variants × "
            f"({spec.repeats} repeats + {spec.warmup} warm-ups)): run fewer, or split it",
        )
    return spec


def _variant(path: Path, name: str, table: Any) -> VariantSpec:
    where = "variants." + (repr(name)[1:-1] if _CONTROL_RE.search(name) else name)  # one line
    check_name(path, where, name)
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
    for k, v in env.items():  # what the OS refuses in an environment, refused before any run
        if not k or "=" in k or "\0" in k or "\0" in v:
            raise _err(
                path,
                f"{where}.env",
                f"{k!r}: a name must be non-empty without '=' or NUL, and a value without NUL",
            )
    return VariantSpec(name, args, dict(env))


def parse_min_difference(value: str | dict[str, Any]) -> dict[str, float]:
    """The smallest difference that matters: `5` (every metric) or `wall_time_s=5,acc=0.5`
    (text, as `--min-difference` and the `r` dialog take it) or a {metric: percent} table; each
    a percentage above 0 and at most 100 (ValueError: one line saying what was expected)."""
    if isinstance(value, str):
        table: dict[str, Any] = {}
        for part in (p.strip() for p in value.split(",")):
            if part:
                name, eq, pct = part.rpartition("=")
                table[name.strip() if eq else "*"] = pct.strip().removesuffix("%")
        value = table
    out: dict[str, float] = {}
    for name, pct in value.items():
        try:
            x = float(pct) if not isinstance(pct, bool) else math.nan
        except (TypeError, ValueError):
            x = math.nan
        if not (0 < x <= 100) or not name:
            raise ValueError(
                f"expected a percentage above 0 and at most 100 (5, or wall_time_s=5), got "
                f"{name + '=' if name != '*' else ''}{pct!r}"
            )
        out[str(name)] = x
    return out


def check_executable(spec: ExperimentSpec) -> None:
    """Raise SpecError if the command's program cannot be found for some variant (here: a
    cluster's runs find theirs on their node, and one that is missing fails with that reason)."""
    if spec.backend.remote:
        return
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
    name = check_name(path, "name", data.get("name"))
    if "command" not in data:
        raise _err(path, "command", 'missing; expected an argv list such as ["python", "train.py"]')
    command = _str_list(path, "command", data["command"])
    if not command:
        raise _err(path, "command", "expected a non-empty argv list")
    repeats = _pos_int(path, "repeats", data.get("repeats", 3), 1, MAX_REPEATS)
    warmup = _pos_int(path, "warmup", data.get("warmup", 0), 0, MAX_WARMUP)
    timeout = data.get("timeout_s")
    if timeout is not None:
        timeout = _seconds(
            path, "timeout_s", timeout, MAX_TIMEOUT_S, zero_ok=False, default="no timeout"
        )
    grace = _seconds(
        path,
        "kill_grace_s",
        data.get("kill_grace_s", 5.0),
        MAX_KILL_GRACE_S,
        zero_ok=True,
        default="5 s",
    )
    base = path.parent.resolve()
    workdir = data.get("workdir", ".")
    if not isinstance(workdir, str):
        raise _err(path, "workdir", f"expected a directory path, got {workdir!r}")
    wd = (base / workdir).resolve()
    if not wd.is_dir():
        raise _err(path, "workdir", f"expected an existing directory, {wd} is not one")
    output = data.get("output", "tuiprof-experiments")
    if not isinstance(output, str) or not output or any(c in output for c in "\n\r\0"):
        raise _err(path, "output", f"expected a directory path on one line, got {output!r}")
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
    backend = parse_backend(data["backend"], path, base) if "backend" in data else BackendSpec()
    matters = data.get("min_difference_pct", {})
    try:
        matters = parse_min_difference(matters if isinstance(matters, dict) else {"*": matters})
    except ValueError as exc:
        raise _err(path, "min_difference_pct", str(exc)) from None
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
        kill_grace_s=grace,
        source=str(path),
        backend=backend,
        min_difference_pct=matters,
    )
    check_counts(spec)
    check_executable(spec)
    return spec


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate a spec file; raise SpecError with a one-line message on any problem."""
    p = Path(path)
    try:  # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SpecError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError(f"{p}: not a regular file (a spec is a TOML file)")
        raw = b""
        while len(raw) <= MAX_SPEC_BYTES and (chunk := os.read(fd, MAX_SPEC_BYTES + 1)):
            raw += chunk
    except OSError as exc:
        raise SpecError(f"{p}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"{p}: larger than 1 MiB; a spec is a few lines of TOML")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nested array: 100,000 `[` exhaust the stack
        raise SpecError(f"{p}: invalid TOML: nested too deeply") from None
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
        out = replace(out, repeats=_pos_int(spec.source, "repeats", repeats, 1, MAX_REPEATS))
    if warmup is not None:
        out = replace(out, warmup=_pos_int(spec.source, "warmup", warmup, 0, MAX_WARMUP))
    return check_counts(out)


def default_experiment_dir(spec: ExperimentSpec, now: float | None = None) -> Path:
    """`<output>/<name>-<YYYYmmdd-HHMMSS>`, with a suffix if that already exists."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = Path(spec.output) / f"{spec.name}-{stamp}"
    cand, n = base, 1
    while cand.exists():
        n += 1
        cand = base.with_name(f"{base.name}-{n}")
    return cand
