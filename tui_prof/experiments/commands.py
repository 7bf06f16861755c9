"""Experiments from plain commands, as `tuiprof run --variant NAME='COMMAND …'` and the TUI's
new-experiment dialog take them, and any spec written back as TOML.

Contract:
- `parse_variant("mixed=python train.py --precision mixed")` splits at the first "=" into a
  name and a command. The command is split into words the way a POSIX shell splits them
  (shlex: quotes, backslashes), and is never run by a shell: no globbing, pipes or `$VAR`
  (but `${TUIPROF_REPEAT}` is replaced per run, as in a spec). Leading `VAR=value` words are
  the variant's environment, as `env VAR=value command …` would set them.
- `spec_from_commands(...)`: the variants run one program. The spec's `command` is the words
  every variant shares up to the first option (`python train.py`); each variant's `args` are
  the rest, so the apples-to-apples guard sees what each one changes. The result is validated
  by `parse_spec` exactly as a spec file would be (names, repeats, the program on PATH).
- `spec_to_toml(spec)` is a TOML file that `load_spec` reads back into the same spec (absolute
  `workdir` and `output`); `save_spec` writes it atomically. Every experiment directory that
  `tuiprof run` or the TUI creates gets one, `SPEC_FILE`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tui_prof.experiments.spec import ExperimentSpec, SpecError, parse_spec

SPEC_FILE = "spec.toml"
SOURCE = "--variant"  # what messages about a spec made from commands name as its source
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def parse_variant(text: str) -> tuple[str, dict[str, str], list[str]]:
    """`NAME=COMMAND` -> (name, environment, argv); SpecError with one line if malformed."""
    name, sep, command = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise SpecError(f"{SOURCE} {text!r}: expected NAME=COMMAND, e.g. fp32='python train.py'")
    try:
        words = shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise SpecError(f"{SOURCE} {name}: cannot split the command: {exc}") from None
    env: dict[str, str] = {}
    while words and _ENV_WORD.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if not words:
        raise SpecError(f"{SOURCE} {name}: no command after the name")
    return name, env, words


def command_text(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The inverse of `parse_variant`'s split: words quoted so they split back the same."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join([*prefix, shlex.join(argv)])


def _default_name(names: Sequence[str]) -> str:
    """ "fp32-vs-mixed"; other characters become "_" so a bad variant name is the one reported."""
    text = re.sub(r"[^A-Za-z0-9_.-]", "_", "-vs-".join(names))[:60].strip("-.")
    return text if text and text[0].isalnum() else f"x{text}"


def _shared_command(argvs: Sequence[Sequence[str]]) -> list[str]:
    """The words every argv shares, from the start up to the first option."""
    shared: list[str] = []
    for words in zip(*argvs, strict=False):
        if len(set(words)) > 1 or words[0].startswith("-"):
            break
        shared.append(words[0])
    return shared


def spec_from_commands(
    variants: Sequence[str],
    *,
    name: str | None = None,
    repeats: int = 3,
    warmup: int = 0,
    baseline: str | None = None,
    workdir: str | Path = ".",
    output: str = "tuiprof-experiments",
) -> ExperimentSpec:
    """A validated spec from `NAME=COMMAND` strings (see the module contract)."""
    parsed = [parse_variant(v) for v in variants]
    if not parsed:
        raise SpecError(f"{SOURCE}: give at least one variant as NAME=COMMAND")
    names = [p[0] for p in parsed]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SpecError(f"{SOURCE} {dup}: the same name is given twice")
    programs = dict.fromkeys(argv[0] for _, _, argv in parsed)
    if len(programs) > 1:
        a, b = list(programs)[:2]
        raise SpecError(
            f"{SOURCE}: the variants run different programs ({a!r}, {b!r}); an experiment "
            "compares one program's variants: the same program with other arguments or "
            "environment"
        )
    command = _shared_command([argv for _, _, argv in parsed])
    data = {
        "name": name or _default_name(names),
        "command": command,
        "repeats": repeats,
        "warmup": warmup,
        "workdir": str(Path(workdir).resolve()),
        "output": output,
        "baseline": baseline or names[0],
        "variants": {n: {"args": argv[len(command) :], "env": env} for n, env, argv in parsed},
    }
    fake = Path(workdir).resolve() / SPEC_FILE  # relative paths start at the working directory
    try:
        spec = parse_spec(data, fake)
    except SpecError as exc:
        raise SpecError(f"{SOURCE}: {str(exc).removeprefix(f'{fake}: ')}") from None
    return replace(spec, source=SOURCE)


def _toml_str(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, save DEL, which TOML wants escaped too."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError(f"{value!r}: not representable in TOML (not valid Unicode)") from None
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def spec_to_toml(spec: ExperimentSpec) -> str:
    """The spec as a TOML file that `load_spec` reads back into the same spec."""
    lines = [
        "# A tuiprof experiment spec: `tuiprof run THIS_FILE` runs it again (into `output`).",
        f"name = {_toml_str(spec.name)}",
        f"command = {_toml_list(spec.command)}",
        f"workdir = {_toml_str(spec.workdir)}",
        f"output = {_toml_str(spec.output)}",
        f"repeats = {spec.repeats}",
        f"warmup = {spec.warmup}",
        f"order = {_toml_str(spec.order)}",
        f"metrics = {_toml_list(spec.metrics)}",
        f"baseline = {_toml_str(spec.baseline)}",
        f"kill_grace_s = {spec.kill_grace_s!r}",
    ]
    if spec.timeout_s is not None:
        lines.append(f"timeout_s = {spec.timeout_s!r}")
    if spec.min_difference_pct:
        pairs = ", ".join(f"{_toml_str(k)} = {x!r}" for k, x in spec.min_difference_pct.items())
        lines.append(f"min_difference_pct = {{ {pairs} }}")
    for v in spec.variants:
        lines += ["", f"[variants.{_toml_str(v.name)}]", f"args = {_toml_list(v.args)}"]
        if v.env:
            pairs = ", ".join(f"{_toml_str(k)} = {_toml_str(x)}" for k, x in v.env.items())
            lines.append(f"env = {{ {pairs} }}")
    lines += spec.backend.toml_lines(_toml_str)
    return "\n".join(lines) + "\n"


def save_spec(spec: ExperimentSpec, path: str | Path, *, replace: bool = False) -> Path:
    """Write the spec's TOML; an existing file is replaced (atomically: a temporary file renamed
    over it) only with `replace` (the TUI asks first), else SpecError and the file stays."""
    target = Path(path)
    text = spec_to_toml(spec)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not replace:
            with open(target, "x", encoding="utf-8") as f:  # exclusive: never over a user's file
                f.write(text)
            return target
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except FileExistsError:
        raise SpecError(f"{target}: exists; not replaced") from None
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise SpecError(f"{target}: cannot write: {exc.strerror or exc}") from None
    return target
