"""Efficiency and memory in every face: `summary --markdown` and `--csv`, `diff --markdown`.

References: the figures each format shows are recomputed here from the JSON contract's own
numbers (FLOPs per step ÷ the step's time ÷ the peak), not read back from the same renderer.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from conftest import SAMPLES, run_cli

AUTOCAST = SAMPLES / "torch_cuda_autocast"  # H100, fp16 GEMMs and convolutions, shapes recorded
FLOAT32 = SAMPLES / "torch_cuda_float32"


def _json(path: object) -> dict[str, Any]:
    r = run_cli("summary", str(path), "--json")
    assert r.returncode == 0, r.stderr
    session: dict[str, Any] = json.loads(r.stdout)["sessions"][0]
    return session


def test_csv_has_each_steps_flops_and_mfu() -> None:
    s = _json(AUTOCAST)
    e = s["efficiency"]
    assert isinstance(e, dict) and e["peak_format"] == "fp16"
    r = run_cli("summary", str(AUTOCAST), "--csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    steps = s["steps"]
    assert isinstance(steps, list) and len(rows) == len(steps) == len(e["step_flops"])
    for row, flops in zip(rows, e["step_flops"], strict=True):
        assert float(row["flops"]) == flops
        achieved = flops / (float(row["step_time_ms"]) / 1e3) / 1e12
        assert float(row["achieved_tflops"]) == pytest.approx(achieved)
        assert float(row["mfu_percent"]) == pytest.approx(100 * achieved / e["peak_tflops"])
        assert row["peak_format"] == "fp16" and float(row["peak_tflops"]) == e["peak_tflops"]
    # the mean over steps of FLOPs ÷ step time is not the session's FLOPs ÷ mean step time,
    # but both lie within the steps' range
    rates = [float(row["achieved_tflops"]) for row in rows]
    assert min(rates) <= e["achieved_tflops"] <= max(rates)


def test_csv_without_efficiency_has_no_empty_columns() -> None:
    """A CPU-only JAX profile with no FLOP count: no efficiency columns at all."""
    r = run_cli("summary", str(SAMPLES / "jax_step_markers"), "--csv")
    assert r.returncode == 0, r.stderr
    assert "mfu_percent" not in r.stdout.splitlines()[0]


def test_markdown_has_the_efficiency_line_and_the_op_rates() -> None:
    s = _json(AUTOCAST)
    e = s["efficiency"]
    assert isinstance(e, dict)
    r = run_cli("summary", str(AUTOCAST), "--markdown", "--peak-tflops", "100")
    assert r.returncode == 0, r.stderr
    md = r.stdout
    achieved_g = e["achieved_tflops"] * 1e3
    mfu = 100 * e["achieved_tflops"] / 100.0  # against the given 100 TFLOP/s
    assert f"- Efficiency: MFU {mfu:.2g}% of 100 TFLOP/s (--peak-tflops); " in md
    assert f"{achieved_g:.3g} GFLOP/s achieved" in md
    # the op table: device rows, each op's FLOPs over its device self time
    ops = {o["name"]: o for o in s["top_ops"] if o["where"] == "Device" and o["flops"]}
    mm = ops["aten::mm"]
    rate = mm["flops"] / (mm["total_self_time_us"] * 1e-6) / 1e9
    line = next(x for x in md.splitlines() if x.startswith("| `aten::mm` | Device |"))
    assert f"| {rate:.3g} GFLOP/s |" in line or f"| {rate / 1e3:.3g} TFLOP/s |" in line
    assert "| Host |" not in md.split("Op with a FLOP count")[1].split("\n\n")[0]


def test_markdown_escapes_names_in_the_efficiency_lines() -> None:
    from tui_prof.cli.summary import _md_text

    assert _md_text("a|b `c` *d* <e>") == "a\\|b \\`c\\` \\*d\\* \\<e\\>"


def test_diff_markdown_compares_mfu() -> None:
    a, b = _json(FLOAT32)["efficiency"], _json(AUTOCAST)["efficiency"]
    assert isinstance(a, dict) and isinstance(b, dict)
    r = run_cli("diff", str(FLOAT32), str(AUTOCAST), "--markdown")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("- Efficiency (A → B): "))
    assert f"MFU {a['mfu_percent']:.2g}% → {b['mfu_percent']:.2g}%" in line


def test_diff_takes_a_peak_too() -> None:
    a, b = _json(FLOAT32)["efficiency"], _json(AUTOCAST)["efficiency"]
    assert isinstance(a, dict) and isinstance(b, dict)
    r = run_cli("diff", str(FLOAT32), str(AUTOCAST), "--json", "--peak-tflops", "100")
    assert r.returncode == 0, r.stderr
    mfu = json.loads(r.stdout)["efficiency"]["mfu_percent"]
    assert mfu["a"] == pytest.approx(a["achieved_tflops"])  # 100 × achieved ÷ 100 TFLOP/s
    assert mfu["b"] == pytest.approx(b["achieved_tflops"])
    bad = run_cli("diff", str(FLOAT32), str(AUTOCAST), "--peak-tflops", "-1")
    assert bad.returncode == 2 and "not a positive number of TFLOP/s" in bad.stderr


def test_a_profile_without_a_flop_count_says_why() -> None:
    """A JAX GPU profile that kept neither XLA's cost nor its HLO, and a TensorFlow one."""
    for sample, why in (
        ("jax_cuda_bf16", "neither XLA's cost of its device ops nor its programs' HLO"),
        ("keras_fit_mixed", "TensorFlow ops run without XLA carry none"),
    ):
        assert _json(SAMPLES / sample)["efficiency"] is None
        r = run_cli("summary", str(SAMPLES / sample), "--markdown")
        assert f"- Efficiency: no FLOP count — the profile keeps {why}" in r.stdout or (
            f"- Efficiency: no FLOP count — {why}" in r.stdout
        )
