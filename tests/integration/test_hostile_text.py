"""Hostile names: one string with escape sequences (set the title, write the clipboard) through
every face. A terminal must see it as text, never obey it (tui_prof.printable)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import REPO, filled, run_cli, settle, shown, until
from kineto_factory import two_steps
from textual.app import App
from xla_profiles import Event, Space

from tui_prof.printable import printable, strict_json
from tui_prof.profiles.load import summarize_session

H = "\u001b]2;PWNED\u001b\\\u001b]52;c;cHduZWQ=\u001b\\x"
SHOWN = printable(H)  # ␛]2;PWNED␛\␛]52;c;cHduZWQ=␛\x
TF22_SESSION = REPO / "tests" / "data" / "legacy_tf22" / "plugins" / "profile" / "GPU-input-bound"


def _obeyable(text: str) -> bool:
    """Anything a terminal would act on: ESC, BEL, C1 (Rich's colours are off when piped)."""
    return any((ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 for c in text)


def _kineto(logdir: Path, run: str) -> Path:
    t = two_steps()
    t.meta["deviceProperties"][0]["name"] = "GPU " + H
    t.op("aten::" + H, 20012, 5)
    return t.write(logdir / run / f"host{H}.1.pt.trace.json")


def _legacy(logdir: Path) -> Path:
    from xprof.protobuf import tf_stats_pb2

    d = logdir / "old" / "plugins" / "profile" / "s"
    shutil.copytree(TF22_SESSION, d)
    db = tf_stats_pb2.TfStatsDatabase()
    r = db.without_idle.tf_stats_record.add(op_name="Legacy" + H, op_type="T" + H)
    r.host_or_device, r.occurrences, r.total_self_time_in_us = "Device", 1, 5.0
    (d / "localhost.tensorflow_stats.pb").write_bytes(db.SerializeToString())
    return d


def _program(logdir: Path) -> Path:
    """A JAX-like job whose one jitted program (the steps) carries the name."""
    space = Space()
    space.task_environment(0, 1000)
    host = space.plane(0, "/host:CPU")
    python: list[Event] = []
    launches: list[Event] = []
    gpu: list[Event] = []
    for k in range(5):
        t = 100.0 * k
        python += [(f"jit_{H}:XLA GPU module", t + 5, 10, {})]
        launches += [("cuLaunchKernel", t + 6, 1, {"correlation_id": k + 1})]
        gpu += [("k_f32", t + 40, 20, {"correlation_id": k + 1})]
    host.line(1, "python", python)
    host.line(77, "Host Threads/77", launches)
    space.plane(1, "/device:GPU:0", {"device_vendor": "Nvidia"}).line(10, "Stream #10", gpu)
    return space.save(logdir / "jax")


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    _kineto(root, "a" + H)
    _kineto(root, "b")
    _legacy(root)
    _program(root)
    return root


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={"TERM": "xterm-256color"}, timeout=120)


def test_the_sanitizer() -> None:
    assert SHOWN == "␛]2;PWNED␛\\␛]52;c;cHduZWQ=␛\\x"
    assert printable("a\tb\x9bc\x7f") == "a␉b\ufffdc␡"
    assert printable("a\tb\r\nc\x07", multiline=True) == "a\tb\n\nc␇"
    assert printable("plain ünïcode") == "plain ünïcode"
    assert (
        strict_json({"x": float("nan"), "n": H})
        == '{\n  "x": null,\n  "n": ' + json.dumps(H) + "\n}"
    )


def test_the_whole_summary_check_finds_every_character_it_must_replace() -> None:
    """printable_fields looks at msgspec's JSON of the whole first: every C0 character, DEL and
    C1 must send it to the walk, and names that only look escaped must not change."""
    from dataclasses import dataclass, field

    from tui_prof.printable import printable_fields

    @dataclass(frozen=True)
    class Row:
        name: str
        tags: tuple[str, ...] = ()
        by: dict[str, str] = field(default_factory=dict)

    for c in [*map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0))]:
        for row in (Row("a\\" + c), Row("x", ("ok", '"' + c)), Row("x", by={c: "v"})):
            out = printable_fields(row)
            assert out is not row and not _obeyable(repr((out.name, out.tags, out.by))), repr(c)
    for name in ("back\\nslash", '"quoted"', "\\u001b as text", "ünïcode µs\u00a0", "a/b"):
        row = Row(name, (name,), {name: name})
        assert printable_fields(row) is row


def test_indented_json_is_jsons_own_text() -> None:
    doc = {"a": [], "b": {}, "c": [1, 2.5, None, True, "é\u2028" + H], "d": {"e": [[], [{}]]}}
    assert strict_json(doc) == json.dumps(doc, indent=2, ensure_ascii=True)
    assert strict_json(doc, indent=None) == json.dumps(doc, ensure_ascii=True)
    assert strict_json(doc, indent=0) == json.dumps(doc, indent=0, ensure_ascii=True)


def test_every_reader_makes_names_printable(logdir: Path) -> None:
    k = summarize_session(next((logdir / ("a" + H)).glob("*.json")).parent)
    assert any(o.name == "aten::" + SHOWN for o in k.top_ops)
    assert k.environment.device_names == ("GPU " + SHOWN,) and SHOWN in k.path
    legacy = summarize_session(logdir / "old" / "plugins" / "profile" / "s")
    assert [o.name for o in legacy.top_ops] == ["Legacy" + SHOWN]
    jax = summarize_session(next(logdir.joinpath("jax").rglob("*.xplane.pb")).parent)
    assert SHOWN in jax.step_source_detail and not _obeyable(jax.step_source_detail)


@pytest.mark.parametrize("fmt", ["", "--markdown", "--csv", "--json"])
def test_summary_in_every_format(logdir: Path, fmt: str) -> None:
    r = _cli("summary", *([fmt] if fmt else []), str(logdir))
    assert r.returncode == 0, r.stderr
    assert not _obeyable(r.stdout + r.stderr)
    if fmt == "--json":
        doc = json.loads(r.stdout)
        assert any(o["name"] == "aten::" + SHOWN for s in doc["sessions"] for o in s["top_ops"])
    else:
        assert "␛]2;PWNED" in r.stdout  # file, host, device and program names
        assert fmt or "Legacy␛]2;PWNED" in r.stdout  # the op tables: the rich view only


def test_diff_tables(logdir: Path) -> None:
    a, b = (next((logdir / n).glob("*.json")).parent for n in ("a" + H, "b"))
    for fmt in ([], ["--markdown"], ["--json"]):
        r = _cli("diff", *fmt, str(a), str(b))
        assert r.returncode == 0, r.stderr
        assert not _obeyable(r.stdout + r.stderr)


JOB = f"""
import json, os, sys
h = {H!r}
print("out " + h, flush=True)
sys.stderr.write("err " + h + "\\n")
with open(os.environ["TUIPROF_METRICS_FILE"], "a") as f:
    f.write(json.dumps({{"progress": "step " + h}}) + "\\n")
    f.write(json.dumps({{"metric": "loss" + h, "value": 1.5}}) + "\\n")
"""


def test_a_jobs_output_progress_and_metric_names(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    out = tmp_path / "out"
    r = _cli(
        "run",
        "--headless",
        "--repeats",
        "2",
        "--output",
        str(out),
        "--variant",
        f"a={sys.executable} job.py",
        "--variant",
        f"b={sys.executable} job.py",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert not _obeyable(r.stdout + r.stderr)
    exp = r.stdout.strip().splitlines()[-1]
    for fmt in ([], ["--markdown"], ["--json"]):
        c = _cli("compare", *fmt, exp)
        assert c.returncode == 0, c.stderr
        assert not _obeyable(c.stdout + c.stderr) and ("loss" + SHOWN in c.stdout or fmt)


def _terminal_bytes(app: App[Any]) -> str:
    """What the app would write to the terminal for the whole screen now."""
    from textual._compositor import CompositorUpdate  # the one a full update is

    # typed as a renderable; a full update is a CompositorUpdate (its segments are what is written)
    update = cast(CompositorUpdate, app.screen._compositor.render_update(full=True))
    raw: str = update.render_segments(app.console)
    return raw


async def _drawn(pilot: Any, text: str = "") -> str:
    """The terminal's bytes once they hold `text` and are the same over two looks 0.1 s apart:
    what was just written is on screen (a fixed 0.3 s could pass first on a loaded machine)."""
    looks = ["", "\0"]

    def steady() -> bool:
        looks[:] = [looks[1], _terminal_bytes(pilot.app)]
        return looks[0] == looks[1] and text in looks[1]

    await until(pilot, steady)
    return looks[1]


def _no_sequence_but_textuals(raw: str) -> bool:
    """Textual writes CSI sequences (cursor, colours); an OSC (ESC ]) or BEL is never its own."""
    return "\x1b]" not in raw and "\x07" not in raw and "PWNED\x1b" not in raw


async def test_tui_tabs_tree_and_log(logdir: Path) -> None:
    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.screens.experiments import ExperimentsScreen

    app = TuiprofApp(logdir)
    # notifications=True: run_test leaves toasts out unless asked, and the last check reads one
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await settle(pilot)
        seen = ""
        for key in ("1", "2", "3", "4"):
            await pilot.press(key)
            await settle(pilot)
            raw = await _drawn(pilot)
            assert _no_sequence_but_textuals(raw), key
            seen += raw
        assert "␛]2;PWNED" in seen  # shown, as text
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ExperimentsScreen))
        screen = app.screen
        assert isinstance(screen, ExperimentsScreen)
        await shown(pilot, "#run-log")
        screen._write_log(["job says " + H, "and\rthen"])  # the face every log line goes through
        raw = await _drawn(pilot, "job says")
        assert _no_sequence_but_textuals(raw)
        app.notify("error in " + H)
        raw = await _drawn(pilot, "error in")  # the toast is on screen, as text
        assert _no_sequence_but_textuals(raw) and "PWNED" in raw


async def test_numbers_are_never_cut_in_the_step_table(tmp_path: Path) -> None:
    """17,708,812 ms of input showed as "17,708,8" in the 8-cell Input column."""
    import dataclasses

    from conftest import sample_session

    from tui_prof.profiles import cache
    from tui_prof.profiles.load import session_of
    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.widgets.summary_tables import StepBreakdownTable

    src = sample_session("custom_loop")
    shutil.copytree(src, tmp_path / "run" / "plugins" / "profile" / src.name)
    session = session_of(tmp_path / "run" / "plugins" / "profile" / src.name)
    real = summarize_session(session)
    step = real.steps[0]
    long = dataclasses.replace(
        step,
        step_time_ms=step.step_time_ms + 17_708_812.0,
        breakdown_ms={**step.breakdown_ms, "input": 17_708_812.0},
    )
    cache.store(cache.cache_key(session), dataclasses.replace(real, steps=(long, *real.steps[1:])))
    app = TuiprofApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        table = await filled(pilot, StepBreakdownTable)
        shown = "\n".join(table.render_line(y).text for y in range(table.size.height))
        assert "17,708,812" in shown, shown
