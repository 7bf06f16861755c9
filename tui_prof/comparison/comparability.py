"""The apples-to-apples guard: do the runs being compared agree on what should not change?

Contract: `check_comparability(runs)` compares the fields in `CHECKED_FIELDS`, read from each
`RunRecord.environment` as the runner's fingerprint stores them (tui_prof.experiments.fingerprint):
    gpu_model, gpu_count, gpu_driver, cuda_version     where nvidia-smi exists
    framework_versions.<package>                        e.g. framework_versions.tensorflow
    python_version, host, cpu_model
    dataset_fingerprint, epochs, batch_size             when the job reports them
(`dataset_fingerprint`, `epochs` and `batch_size` are also taken from `metrics` when a job
reported them as numbers). A field nobody reported is not a difference; a field some runs
report and others do not is one ("not reported"). Fields a variant changes on purpose, such as
a batch size its arguments set, are passed as `intentional` and reported as such, never hidden;
fields the design absorbs (`by_design`: the node and host of runs blocked by node, which differ
between blocks and never within one) are reported the same way, saying so. The node is checked
too, so runs of one cluster experiment on different nodes are listed.
Everything else in the environment (precision policy, pids, paths) is not compared. Runs whose
`machine_state` says they ran under load or throttled (tui_prof.experiments.noise) are counted
and named in `noisy`, apart from the fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui_prof.experiments.noise import noise_reasons
from tui_prof.model import RunRecord

# (field, label) in the order differences are reported: the most consequential first.
CHECKED_FIELDS: tuple[tuple[str, str], ...] = (
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPU count"),
    ("gpu_driver", "GPU driver"),
    ("cuda_version", "CUDA version"),
    ("framework_versions.*", "framework version"),
    ("dataset_fingerprint", "dataset fingerprint"),
    ("epochs", "epochs"),
    ("batch_size", "batch size"),
    ("node", "node"),
    ("host", "host"),
    ("cpu_model", "CPU model"),
    ("python_version", "Python version"),
)
_FROM_METRICS = ("dataset_fingerprint", "epochs", "batch_size")
NOT_REPORTED = "(not reported)"


@dataclass(frozen=True)
class Difference:
    """One field on which the runs disagree: each distinct value with the runs that have it."""

    field: str
    label: str
    values: tuple[tuple[str, tuple[str, ...]], ...]  # (value, run ids), most common value first
    scope: str  # "between variants" (confounded with the variant) or "within variants"
    intentional: bool = False
    message: str = ""  # one line, e.g. "GPU model differs between variants: 'A100' in all 5 ..."

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "label": self.label,
            "scope": self.scope,
            "intentional": self.intentional,
            "values": [{"value": v, "runs": list(r)} for v, r in self.values],
            "message": self.message,
        }


@dataclass(frozen=True)
class Comparability:
    """The guard's answer: ok when no unintended difference was found; `noisy` names the runs
    measured under load or throttled (their timings are suspect, whatever the fields say)."""

    ok: bool
    differences: tuple[Difference, ...]  # unintended ones first
    checked: tuple[str, ...]  # fields some run reported
    runs: int
    noisy: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (run id, reasons)

    @property
    def noise_message(self) -> str:
        """One line: "2 of 10 runs measured under load or throttled: a-r1 (…), b-r3 (…)"."""
        if not self.noisy:
            return ""
        shown = "; ".join(f"{rid} ({', '.join(why)})" for rid, why in self.noisy[:4])
        more = f"; and {len(self.noisy) - 4} more" if len(self.noisy) > 4 else ""
        return (
            f"{len(self.noisy)} of {self.runs} runs measured under load or throttled, their "
            f"timings less trustworthy: {shown}{more}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "differences": [d.to_dict() for d in self.differences],
            "checked": list(self.checked),
            "runs": self.runs,
            "noisy_runs": [{"run_id": r, "reasons": list(why)} for r, why in self.noisy],
        }


def _runs_text(runs: Sequence[RunRecord], totals: Mapping[str, int], limit: int = 6) -> str:
    """ "all 5 fp32 runs, mixed-r0" rather than every id, so a long experiment stays readable."""
    parts: list[str] = []
    for variant in dict.fromkeys(r.variant for r in runs):
        ids = [r.run_id for r in runs if r.variant == variant]
        if len(ids) == totals[variant] and len(ids) > 1:
            parts.append(f"all {len(ids)} {variant} runs")
        else:
            parts.extend(ids)
    shown = ", ".join(parts[:limit])
    return shown + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


def _message(
    label: str,
    scope: str,
    intended: bool,
    values: list[tuple[str, list[RunRecord]]],
    totals: Mapping[str, int],
    designed: bool = False,
) -> str:
    why = " (intended by the variants)" if intended else ""
    if designed:
        why = " (by design: variants are compared within each node)"
    parts = [f"{value!r} in {_runs_text(runs, totals)}" for value, runs in values]
    return f"{label} differs {scope}{why}: " + "; ".join(parts)


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _fields_of(run: RunRecord) -> dict[str, str | None]:
    env = run.environment or {}
    out: dict[str, str | None] = {}
    for name, _label in CHECKED_FIELDS:
        if name == "framework_versions.*":
            versions = env.get("framework_versions")
            if isinstance(versions, Mapping):
                for pkg, ver in versions.items():
                    out[f"framework_versions.{pkg}"] = _text(ver)
            continue
        value = env.get(name)
        if name == "node":
            value = value or run.node or None
        if value is None and name in _FROM_METRICS:
            value = run.metrics.get(name)
        out[name] = _text(value)
    return out


def _label(name: str) -> str:
    if name.startswith("framework_versions."):
        return f"{name.split('.', 1)[1]} version"
    return dict(CHECKED_FIELDS).get(name, name)


def _order(name: str) -> int:
    key = "framework_versions.*" if name.startswith("framework_versions.") else name
    return [f for f, _ in CHECKED_FIELDS].index(key)


def check_comparability(
    runs: Sequence[RunRecord], *, intentional: Iterable[str] = (), by_design: Iterable[str] = ()
) -> Comparability:
    """Compare the checked fields across `runs` (the ones that will be compared)."""
    wanted = set(intentional)
    designed = set(by_design)
    per_run = [(r, _fields_of(r)) for r in runs]
    names = sorted(
        {k for _, f in per_run for k, v in f.items() if v is not None}, key=lambda n: (_order(n), n)
    )  # name breaks ties: set order varies between processes
    diffs: list[Difference] = []
    totals: dict[str, int] = {}
    for r in runs:
        totals[r.variant] = totals.get(r.variant, 0) + 1
    for name in names:
        groups: dict[str, list[RunRecord]] = {}
        by_variant: dict[str, set[str]] = {}
        for run, f in per_run:
            value = f.get(name) or NOT_REPORTED
            groups.setdefault(value, []).append(run)
            by_variant.setdefault(run.variant, set()).add(value)
        if len(groups) < 2:
            continue
        single = all(len(v) == 1 for v in by_variant.values())
        scope = "between variants" if single else "within variants"
        ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        intended = name in wanted and single
        by_plan = name in designed
        diffs.append(
            Difference(
                field=name,
                label=_label(name),
                values=tuple((v, tuple(r.run_id for r in rs)) for v, rs in ordered),
                scope=scope,
                intentional=intended or by_plan,
                message=_message(_label(name), scope, intended, ordered, totals, by_plan),
            )
        )
    diffs.sort(key=lambda d: d.intentional)
    noisy = tuple(
        (r.run_id, tuple(why))
        for r in runs
        if (why := noise_reasons((r.environment or {}).get("machine_state")))
    )
    return Comparability(
        ok=not any(not d.intentional for d in diffs),
        differences=tuple(diffs),
        checked=tuple(names),
        runs=len(runs),
        noisy=noisy,
    )


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def intentional_fields(variants: Mapping[str, tuple[Sequence[str], Mapping[str, str]]]) -> set[str]:
    """Checked fields a variant's own arguments or environment name, e.g. `--batch-size 64`.

    `variants` maps a variant name to its (args, env). Only fields that could plausibly be set
    that way (epochs, batch size, dataset) count; a hardware or version field never does.
    """
    settable = {"epochs": "epochs", "batch_size": "batchsize", "dataset_fingerprint": "dataset"}
    words: set[str] = set()
    for args, env in variants.values():
        words.update(_squash(a) for a in args)
        words.update(_squash(k) for k in env)
    return {f for f, token in settable.items() if any(token in w for w in words)}
