"""The JSON-lines protocol jobs use to report to tuiprof through $TUIPROF_METRICS_FILE.

Contract: each line is one JSON object, either `{"metric": NAME, "value": NUMBER}` (optionally
with "epoch"/"step") or an object of several `name: value` pairs. Numbers become metrics (the
last value of a name is its final value; every value stays in the series), except that a name
reported more than once alone on its line (a step aside) and never with an `epoch` is a
distribution (a latency per request): its samples are kept and it becomes `NAME:p50|p90|p99`
(tui_prof.experiments.samples); `epoch`,
`step`, `epochs` and `batch_size` are context, not metrics; strings and booleans are run
information (e.g. `dataset_fingerprint`). A line that is not such an object is skipped, never
fatal, so a job's bad line cannot lose a run. Reading is incremental, so a growing file can be
followed.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_prof.experiments.samples import MAX_DISTRIBUTIONS, Reservoir, summarise
from tui_prof.printable import printable

# Keys that describe where in training a line is, or the training setup, rather than a result.
CONTEXT_KEYS = ("epoch", "step", "epochs", "batch_size", "steps_per_epoch")
# Information the apples-to-apples guard compares across runs when a job reports it.
FINGERPRINT_KEYS = ("dataset_fingerprint", "epochs", "batch_size")


# A job's reports are summarised as they arrive, in bounded memory whatever it writes: the first
# MAX_SERIES lines are kept as they were (the start of its curves), at most MAX_NAMES distinct
# metric names (and information keys) are followed, and each distribution keeps a reservoir
# (samples.py). `dropped_names` counts names past the cap: the runner says so in the run's log.
MAX_SERIES = 10_000
MAX_NAMES = 1_000
READ_CHUNK = 4 * 2**20


@dataclass
class MetricsState:
    """What a run has reported so far."""

    final: dict[str, float] = field(default_factory=dict)
    series: list[dict[str, Any]] = field(default_factory=list)  # the parsed lines, in order
    info: dict[str, Any] = field(default_factory=dict)
    bad_lines: int = 0
    epoch: int | None = None  # as reported (0- or 1-based, see `progress`)
    epochs: int | None = None
    progress_text: str | None = None
    samples: dict[str, Reservoir] = field(default_factory=dict)  # values reported without epoch
    per_epoch: set[str] = field(default_factory=set)  # names reported with an epoch: a curve
    seed: int = 0  # of the reservoirs, so the same reports keep the same samples
    lines: int = 0  # every line folded in, kept in `series` or not
    dropped_names: int = 0  # reports of a new name past MAX_NAMES, left out

    def distributions(self) -> dict[str, Reservoir]:
        """Names reported more than once and never per epoch, with their kept samples."""
        return {k: r for k, r in self.samples.items() if r.count >= 2 and k not in self.per_epoch}

    def results(self) -> dict[str, float]:
        """The run's metrics: final values, distributions as their percentiles."""
        return summarise(self.final, self.distributions())

    def progress(self) -> str:
        """A short text such as "epoch 3/5" for the run table."""
        if self.progress_text:
            return self.progress_text
        if self.epoch is None:
            return ""
        # Keras counts epochs from 0 in callbacks; jobs that count from 1 report epoch == epochs.
        done = self.epoch + 1 if self.epochs is None or self.epoch < self.epochs else self.epoch
        return f"epoch {done}/{self.epochs}" if self.epochs else f"epoch {done}"


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def parse_line(line: str) -> dict[str, Any] | None:
    """One protocol line as a plain object, or None if it is not one."""
    line = line.strip()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        return None
    if not isinstance(obj, dict):
        return None
    obj = _printable(obj)  # names, progress and information are shown: no escape sequences
    assert isinstance(obj, dict)
    if "metric" in obj and "value" in obj and isinstance(obj["metric"], str):
        out = {k: v for k, v in obj.items() if k not in ("metric", "value")}
        out[obj["metric"]] = obj["value"]
        return out
    return obj


def _printable(value: Any, depth: int = 3) -> Any:
    """Strings made printable down to `depth` (a line's names, `info`'s; deeper values are shown
    only through repr, which escapes)."""
    if isinstance(value, str):
        return printable(value)
    if depth and isinstance(value, dict):
        return {printable(str(k)): _printable(v, depth - 1) for k, v in value.items()}
    if depth and isinstance(value, list):
        return [_printable(v, depth - 1) for v in value]
    return value


def _sample_of(obj: dict[str, Any]) -> str | None:
    """The one metric a line reports outside an epoch (`{"latency_ms": 3.2}`, perhaps with a
    `step`): a sample of a distribution. A line with an epoch or several metrics is results."""
    if "epoch" in obj:
        return None
    names = [
        k
        for k, v in obj.items()
        if k not in CONTEXT_KEYS and k not in ("progress", "info") and _number(v) is not None
    ]
    return names[0] if len(names) == 1 else None


def apply(state: MetricsState, obj: dict[str, Any]) -> None:
    """Fold one parsed line into the state."""
    state.lines += 1
    if len(state.series) < MAX_SERIES:
        state.series.append(obj)
    sample = _sample_of(obj)
    for key, value in obj.items():
        n = _number(value)
        if key == "progress" and isinstance(value, str):
            state.progress_text = value
        elif key == "info" and isinstance(value, dict):
            for k, v in value.items():
                if k in state.info or len(state.info) < MAX_NAMES:
                    state.info[k] = v
        elif key in CONTEXT_KEYS:
            if n is None or n != int(n):
                continue
            if key == "epoch":
                state.epoch = int(n)
            elif key != "step":
                state.info[key] = int(n)
        elif n is not None:
            if key not in state.final and len(state.final) >= MAX_NAMES:
                state.dropped_names += 1
                continue
            state.final[key] = n
            if "epoch" in obj:
                state.per_epoch.add(key)
            elif key == sample and (key in state.samples or len(state.samples) < MAX_DISTRIBUTIONS):
                state.samples.setdefault(key, Reservoir(seed=state.seed)).add(n)
        elif (
            value is not None
            and (isinstance(value, bool) or not isinstance(value, (int, float)))
            and (key in state.info or len(state.info) < MAX_NAMES)
        ):
            state.info[key] = value
    if isinstance(state.info.get("epochs"), int):
        state.epochs = state.info["epochs"]


class MetricsReader:
    """Follows a metrics file: each `poll()` reads only what was appended since the last one."""

    def __init__(self, path: str | Path, seed: int = 0) -> None:
        self.path = Path(path)
        self.state = MetricsState(seed=seed)
        self._offset = 0
        self._partial = b""

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        """Read new complete lines (and, when `final`, a last line without a newline), a chunk
        at a time: a job that wrote 200 MB since the last poll costs READ_CHUNK of memory, not
        200 MB. Returns the new lines (at most MAX_SERIES of them)."""
        new: list[dict[str, Any]] = []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                while data := f.read(READ_CHUNK):
                    self._offset += len(data)
                    self._lines(self._partial + data, new, last=False)
                    if len(self._partial) > READ_CHUNK:  # a "line" of megabytes: not a report
                        self._partial = b""
                        self.state.bad_lines += 1
        except OSError:
            return new
        if final and self._partial:
            self._lines(self._partial, new, last=True)
        return new

    def _lines(self, data: bytes, new: list[dict[str, Any]], *, last: bool) -> None:
        lines = data.split(b"\n")
        self._partial = b"" if last else lines.pop()
        for raw in lines:
            if not raw.strip():
                continue
            obj = parse_line(raw.decode("utf-8", errors="replace"))
            if obj is None:
                self.state.bad_lines += 1
                continue
            apply(self.state, obj)
            if len(new) < MAX_SERIES:
                new.append(obj)


def read_metrics(path: str | Path) -> MetricsState:
    """The whole file at once (a finished run)."""
    reader = MetricsReader(path)
    reader.poll(final=True)
    return reader.state


def tail_text(path: str | Path, lines: int = 20, max_bytes: int = 16384) -> str:
    """The last lines of a log file, for failure messages and the TUI's log pane."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    out = text.splitlines()[-lines:]
    return printable("\n".join(out), multiline=True)  # shown in errors and the TUI: no escapes


# Settings a job may read through `tui_prof.instrument.settings` instead of its command line.
# Its runs report what they read under this `info` key, which is how tuiprof knows a job exposes
# a change (tui_prof.experiments.suggest) and can offer it as a variant.
SETTINGS_KEY = "tuiprof_settings"
SETTING_VARS: dict[str, str] = {
    "precision": "TUIPROF_PRECISION",  # "float32" or "mixed"
    "xla": "TUIPROF_XLA",  # "1" or "0": compile the step with XLA / jit
    "batch_size": "TUIPROF_BATCH_SIZE",  # an integer
    "prefetch": "TUIPROF_PREFETCH",  # "1" or "0": overlap the input pipeline with training
}
