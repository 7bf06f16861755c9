"""Read the TF1-era Cloud TPU profiler's tool files (`*.overview_page.json`, `*.input_pipeline.json`).

Contract: those files are lists of Google Charts DataTables (`{"cols": [...], "rows": [{"c":
[{"v": ...}]}], "p": {...}}`), the format TensorBoard's profile plugin served before the
protobuf tools (tensorboard/plugins/profile/README.md; the plugin's own
profile_demo.overview_page.json, 2020). Tables are found by what they hold, columns by id, never
by position: the step table has a `stepnum` column, the run environment `tpu_type`/`host_count`,
the performance summary `hardware_type`. Step columns over the years: TensorCore compute
(`noninfeedTimeMs`, later `tcComputeTimeMs`), input (`infeedTimeMs`, later `tcInfeedTimeMs`,
when `infeedTimeMs` became the TensorCore's idle time) and idle (`tcIdleTimeMs`); a step's time
is the TensorCore's (BarnaCore columns run beside it), as the plugin's chart and the files'
own tooltips add it up; a step's number is its tooltip's ("step 3123:", where the input
pipeline's rows count 1, 2, …), else its `stepnum`. Raises ProfileError with one line for a file that is none of this.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_prof.model import CATEGORIES, ProfileError, StepBreakdown, UnreadableProfile, os_reason

_LEADING_INT = re.compile(r"\s*(\d+)")
_TOOLTIP_STEP = re.compile(r"\s*step (\d+):")  # "step 3123:\nTime waiting for input data = …"


@dataclass(frozen=True)
class ToolFile:
    """What one TF1-era JSON tool file says."""

    steps: list[StepBreakdown]
    device_type: str | None  # "TPU"
    device_name: str | None  # the run environment's tpu_type ("TPU v2", "Cloud TPU")
    device_count: int | None  # TPU cores
    input_percent: float | None  # the file's own average share of step time waiting for input


def _tables(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableProfile(f"{path.name}: cannot read ({os_reason(exc)})") from exc
    if not data.strip():
        raise ProfileError(f"{path.name}: empty file, not a TensorBoard tool file")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ProfileError(f"{path.name}: not JSON (truncated or damaged)") from exc
    tables = doc if isinstance(doc, list) else [doc]
    found = [t for t in tables if isinstance(t, dict) and ("cols" in t or "p" in t)]
    if not found:
        raise ProfileError(f"{path.name}: JSON, but not a TensorBoard tool file (no DataTable)")
    return found


def _number(cell: Any) -> float:
    v = cell.get("v") if isinstance(cell, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            return float(str(v)) if v is not None else 0.0
        except ValueError:
            return 0.0
    return float(v)


def _prop_float(props: dict[str, Any], key: str) -> float | None:
    raw = str(props.get(key, "")).strip().rstrip("%")
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def _step_table(path: Path, table: dict[str, Any]) -> list[StepBreakdown]:
    cols = [c.get("id") if isinstance(c, dict) else None for c in table.get("cols", [])]
    idx = {c: i for i, c in enumerate(cols) if isinstance(c, str)}
    compute = idx.get("tcComputeTimeMs", idx.get("noninfeedTimeMs"))
    if "tcInfeedTimeMs" in idx:
        infeed: int | None = idx["tcInfeedTimeMs"]
        idle = idx.get("tcIdleTimeMs", idx.get("infeedTimeMs"))
    else:
        infeed, idle = idx.get("infeedTimeMs"), idx.get("tcIdleTimeMs")
    outfeed = idx.get("tcOutfeedTimeMs")
    if compute is None and infeed is None:
        raise ProfileError(f"{path.name}: a step table without time columns tuiprof knows")
    steps = []
    for n, row in enumerate(table.get("rows") or []):
        cells = row.get("c") if isinstance(row, dict) else None
        if not isinstance(cells, list):
            continue

        def at(i: int | None, cells: list[Any] = cells) -> float:
            return _number(cells[i]) if i is not None and i < len(cells) else 0.0

        parts = dict.fromkeys(CATEGORIES, 0.0)
        parts["device_compute"] = at(compute)
        parts["input"] = at(infeed)
        parts["output"] = at(outfeed)
        parts["other"] = at(idle)
        at_step = idx["stepnum"]
        cell = cells[at_step] if at_step < len(cells) else None
        label = str(cell.get("v", "")) if isinstance(cell, dict) else ""
        number = int(label) if label.strip().isdigit() else n
        tip = idx.get("tooltip")
        tip_cell = cells[tip] if tip is not None and tip < len(cells) else None
        if isinstance(tip_cell, dict) and (m := _TOOLTIP_STEP.match(str(tip_cell.get("v", "")))):
            number = int(m.group(1))  # the input pipeline's rows count 1, 2, …; the tip says
        steps.append(StepBreakdown(number, sum(parts.values()), parts))
    return steps


def read(path: Path) -> ToolFile:
    """One `*.overview_page.json` or `*.input_pipeline.json` (see the module's contract)."""
    steps: list[StepBreakdown] = []
    device_type = device_name = None
    device_count = None
    input_percent = None
    for table in _tables(path):
        raw_props = table.get("p")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        cols = [c.get("id") for c in table.get("cols", []) if isinstance(c, dict)]
        if "stepnum" in cols and not steps:
            steps = _step_table(path, table)
            input_percent = _prop_float(props, "infeed_percent_average")
        if props.get("hardware_type"):
            device_type = str(props["hardware_type"])
        if props.get("tpu_type"):
            device_name = str(props["tpu_type"])
            device_type = device_type or "TPU"
        if m := _LEADING_INT.match(str(props.get("tpu_core_count", ""))):
            device_count = int(m.group(1))
    return ToolFile(steps, device_type, device_name, device_count, input_percent)
