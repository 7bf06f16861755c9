"""TF1-era Cloud TPU sessions: `*.overview_page.json` / `*.input_pipeline.json` (Google Charts
DataTables, no protobuf) give their steps, step time, input share and device type.

The files are written here in the shapes TensorBoard's profile plugin served (its README's
column ids, 2017-2019, and its 2020 demo files' TensorCore/BarnaCore columns), with the values
of a TPU job that waited for input. The TPU profiler wrote each step's time into the row's
tooltip ("Step time = 313.800 ms"); the test reads the step times from that text, a second
statement of the same step independent of the columns tuiprof adds up.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from tui_prof.model import ProfileError
from tui_prof.profiles.discover import discover
from tui_prof.profiles.load import load_summary

# (step, TensorCore compute ms, waiting for input ms): 3 steps of 313.8 ms
STEPS = [(3121, 88.412, 225.388), (3122, 88.377, 225.423), (3123, 88.401, 225.399)]


def _col(cid: str, label: str, kind: str = "number", role: str | None = None) -> dict[str, Any]:
    col: dict[str, Any] = {"id": cid, "label": label, "type": kind}
    if role:
        col["p"] = {"role": role}
    return col


def _tooltip(step: int, infeed: float, total: float) -> dict[str, Any]:
    return {
        "v": f"step {step}:\nTime waiting for input data = {infeed:.3f} ms, "
        f"Step time = {total:.3f} ms"
    }


def step_table(era: str) -> dict[str, Any]:
    """The device step-time DataTable of one era."""
    pct = [100 * i / (c + i) for _, c, i in STEPS]
    if era == "2018":
        cols = [
            _col("stepnum", "stepnum", "string"),
            _col("noninfeedTimeMs", "compute time (in ms)"),
            _col("infeedTimeMs", "input time (in ms)"),
            _col("tooltip", "tooltip", "string", "tooltip"),
        ]
        rows = [[{"v": str(s)}, {"v": c}, {"v": i}, _tooltip(s, i, c + i)] for s, c, i in STEPS]
    else:  # 2020: TensorCore and BarnaCore columns; infeedTimeMs became the TensorCore's idle
        cols = [
            _col("stepnum", "stepnum", "string"),
            _col("tcComputeTimeMs", "TensorCore compute (in ms)"),
            _col("bcComputeTimeMs", "BarnaCore compute (in ms)"),
            _col("bcInfeedTimeMs", "BarnaCore input (in ms)"),
            _col("tcInfeedTimeMs", "TensorCore input (in ms)"),
            _col("tcIdleTimeMs", "TensorCore idle (in ms)"),
            _col("tooltip", "tooltip", "string", "tooltip"),
        ]
        rows = [
            [
                {"v": str(s)},
                {"v": c},
                {"v": 1.5},
                {"v": 0.25},
                {"v": i},
                {"v": 0},
                _tooltip(s, i, c + i),
            ]
            for s, c, i in STEPS
        ]
    cols += [
        _col("infeedPercentAverage", "% step time waiting for input data"),
        _col("infeedPercentMin", "Infeed percent min", role="interval"),
        _col("infeedPercentMax", "Infeed percent max", role="interval"),
    ]
    for row, p in zip(rows, pct, strict=True):
        row += [{"v": p}, {"v": p - 0.4}, {"v": p + 0.3}]
    times = [c + i for _, c, i in STEPS]
    return {
        "cols": cols,
        "rows": [{"c": r} for r in rows],
        "p": {
            "infeed_percent_average": f"{sum(pct) / len(pct):.1f}",
            "steptime_ms_average": f"{sum(times) / len(times):.1f}",
            "summary_conclusion": "(1) Your program is HIGHLY input-bound because 71.8% of "
            "the total step time sampled is waiting for input.",
        },
    }


def overview(era: str) -> list[dict[str, Any]]:
    """An overview page: performance summary, steps, run environment, recommendation."""
    summary = {
        "cols": [
            _col("selfTimePercent", "Time (%)"),
            _col("cumulativeTimePercent", "Cumulative time (%)"),
            _col("category", "Category", "string"),
            _col("operation", "Operation", "string"),
            _col("flopRate", "GFLOPs/Sec"),
        ],
        "rows": [
            {"c": [{"v": 0.718}, {"v": 0.718}, {"v": ""}, {"v": "infeed"}, {"v": 0}]},
            {
                "c": [
                    {"v": 0.121},
                    {"v": 0.839},
                    {"v": "Conv2D"},
                    {"v": "resnet_model/conv2d_12/Conv2D"},
                    {"v": 21874.2},
                ]
            },
        ],
        "p": {
            "device_idle_time_percent": "0.0%",
            "hardware_type": "TPU",
            "host_idle_time_percent": "88.0%",
            "mxu_utilization_percent": "9.3%",
        },
    }
    env = {
        "p": {
            "error_message": "",
            "host_count": "1",
            "tpu_core_count": "8 (Replica count = 8, num cores per replica = 1)",
            "tpu_type": "TPU v2",
        }
    }
    recommendation = {"cols": [], "rows": [], "p": {"bottleneck": "host"}}
    return [summary, step_table(era), env, recommendation]


def _session(root: Path, name: str, files: dict[str, Any]) -> Path:
    d = root / "plugins" / "profile" / name
    d.mkdir(parents=True)
    for fname, doc in files.items():
        (d / fname).write_text(json.dumps(doc, indent=1))
    return d


def _tooltip_times(table: dict[str, Any]) -> list[float]:
    tips = [c["v"] for r in table["rows"] for c in r["c"] if "Step time" in str(c.get("v"))]
    return [float(re.search(r"Step time = ([\d.]+) ms", t).group(1)) for t in tips]  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ["2018", "2020"])
def test_tf1_overview_gives_steps_input_share_and_device(tmp_path: Path, era: str) -> None:
    doc = overview(era)
    d = _session(
        tmp_path,
        "2019_03_01_10_00_00",
        {
            "10.0.0.2.overview_page.json": doc,
            "10.0.0.2.input_pipeline.json": [step_table(era)],
            "10.0.0.2.op_profile.json": {"byCategory": {}},
            "10.0.0.2.trace": "",
        },
    )
    (session,) = discover(tmp_path).sessions
    assert session.format == "legacy" and [h.host for h in session.hosts] == ["10.0.0.2"]
    s = load_summary(session, use_cache=False)
    assert [st.step for st in s.steps] == [3121, 3122, 3123]
    assert [round(st.step_time_ms, 3) for st in s.steps] == _tooltip_times(doc[1])
    assert s.average is not None
    assert s.average.step_time_ms == pytest.approx(313.8, abs=0.005)
    share = 100 * s.average.breakdown_ms["input"] / s.average.step_time_ms
    assert f"{share:.1f}" == doc[1]["p"]["infeed_percent_average"]
    assert s.average.breakdown_ms["device_compute"] == pytest.approx(88.397, abs=0.001)
    assert s.environment.device_type == "TPU" and s.environment.device_count == 8
    assert s.environment.device_names == ("TPU v2",)
    assert s.step_source == "precomputed"
    assert not any("no per-step details" in w for w in s.warnings)
    assert d.is_dir()


def test_bare_names_and_input_pipeline_alone(tmp_path: Path) -> None:
    """capture_tpu_profile could write `input_pipeline.json` with no host prefix; its rows
    count 1, 2, 3 where the tooltips name the steps (as in the plugin's 2020 demo file)."""
    table = step_table("2020")
    for n, row in enumerate(table["rows"], start=1):
        row["c"][0]["v"] = str(n)
    _session(tmp_path, "run1", {"input_pipeline.json": [table]})
    (session,) = discover(tmp_path).sessions
    assert [h.host for h in session.hosts] == ["run1"]
    s = load_summary(session, use_cache=False)
    assert [st.step for st in s.steps] == [3121, 3122, 3123]
    assert s.environment.device_type == "Unknown"
    r = subprocess.run(
        [sys.executable, "-m", "tui_prof.cli", "summary", str(tmp_path), "--json", "--no-cache"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["sessions"][0]
    assert len(doc["steps"]) == 3 and doc["step_source"] == "precomputed"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ('[{"cols": [', "not JSON"),
        ('{"lr": 0.1}', "no DataTable"),
        ('[{"cols": [{"id": "stepnum"}], "rows": []}]', "without time columns"),
    ],
)
def test_bad_tf1_files_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    d = tmp_path / "plugins" / "profile" / "bad"
    d.mkdir(parents=True)
    (d / "h.overview_page.json").write_text(text)
    with pytest.raises(ProfileError, match=message) as info:
        load_summary(discover(tmp_path).sessions[0], use_cache=False)
    assert "\n" not in str(info.value)
