"""Reporting to tuiprof from a job, and step markers for custom training loops.

Contract: `report()` appends one JSON line to $TUIPROF_METRICS_FILE (the protocol of
tui_prof.experiments.protocol) and is a no-op outside `tuiprof run`. `Reporter` is what the
loop helpers report (run information, epochs, results, training and step time), so the
custom-loop, PyTorch and JAX helpers report alike. `StepProfiler` holds the TensorFlow side
(markers, step-range profiling, profiler server) and imports TensorFlow only when it is first
needed, under tuiprof.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_server_started = False


def enabled() -> bool:
    """Whether this process runs under `tuiprof run`."""
    return bool(os.environ.get("TUIPROF_METRICS_FILE"))


def _clean(value: Any) -> Any:
    if hasattr(value, "numpy"):  # a framework scalar tensor
        value = value.numpy()
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def report_line(obj: dict[str, Any]) -> None:
    """Append one object as a JSON line to the metrics file (no-op outside tuiprof)."""
    path = os.environ.get("TUIPROF_METRICS_FILE")
    if not path:
        return
    line = json.dumps(_clean(obj), separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


def report(**metrics: Any) -> None:
    """Report metrics, e.g. `report(val_accuracy=0.93)`; the last value of a name is its result."""
    report_line(metrics)


@contextmanager
def timed(name: str = "latency_ms") -> Iterator[None]:
    """Time the block and report it in milliseconds, e.g. one inference request:
    `with timed("latency_ms"): predict(x)`. A name reported more than once (and not per epoch)
    is a distribution: tuiprof keeps its samples and compares runs by p50, p90 and p99. A block
    that raises reports nothing: a failed request has no latency."""
    t0 = time.perf_counter()
    yield
    if enabled():
        report_line({name: (time.perf_counter() - t0) * 1000.0})


def report_info(**info: Any) -> None:
    """Report facts about the run the apples-to-apples guard compares (dataset_fingerprint,
    epochs, batch_size, ...)."""
    report_line({"info": info})


def framework_versions() -> dict[str, str]:
    """Versions of the frameworks this job has imported (so none is imported for it)."""
    out = {}
    for mod, name in (
        ("tensorflow", "tensorflow"),
        ("keras", "keras"),
        ("torch", "torch"),
        ("jax", "jax"),
    ):
        m = sys.modules.get(mod)
        version = getattr(m, "__version__", None) if m is not None else None
        if isinstance(version, str):
            out[name] = version
    return out


def start_profiler_server() -> int | None:
    """Start TensorFlow's profiler server on $TUIPROF_PROFILER_PORT once, for `tuiprof capture`."""
    global _server_started
    port = os.environ.get("TUIPROF_PROFILER_PORT")
    if _server_started or not port or not enabled():
        return None
    try:
        import tensorflow as tf

        tf.profiler.experimental.server.start(int(port))
    except Exception as exc:  # a busy port must not kill the job
        print(f"tuiprof: profiler server not started on port {port}: {exc}", file=sys.stderr)
        return None
    _server_started = True
    return int(port)


class StepProfiler:
    """Official step markers around each step and profiling of the steps first..last (1-based)."""

    def __init__(self, profile_steps: tuple[int, int] | None = None, markers: bool = True) -> None:
        self.enabled = enabled()  # under tuiprof: time the steps
        self.tf_ok = self.enabled and (
            markers or profile_steps is not None
        )  # ... and use TensorFlow
        self.profile_steps = profile_steps
        self.markers = markers
        self.profiling = False
        self.step_times_s: list[float] = []
        self._trace: Any = None
        self._t0 = 0.0
        self._tf: Any = None

    def _tensorflow(self) -> Any:
        if self._tf is None and self.tf_ok:
            try:
                import tensorflow as tf
            except ImportError:  # e.g. Keras on JAX or PyTorch: report metrics, skip the markers
                print(
                    "tuiprof: TensorFlow is not installed: no step markers, no profile",
                    file=sys.stderr,
                )
                self.tf_ok = False
                return None
            self._tf = tf
        return self._tf

    def begin(self, step: int) -> None:
        if not self.enabled:
            return
        tf = self._tensorflow()
        if tf is not None:
            if self.profile_steps and step == self.profile_steps[0] and not self.profiling:
                try:
                    tf.profiler.experimental.start(os.environ.get("TUIPROF_RUN_DIR") or ".")
                    self.profiling = True
                except Exception as exc:  # e.g. another profiler session is active
                    print(f"tuiprof: profiling not started: {exc}", file=sys.stderr)
            if self.markers:
                self._trace = tf.profiler.experimental.Trace("train", step_num=step, _r=1)
                self._trace.__enter__()
        self._t0 = time.perf_counter()

    def end(self, step: int) -> None:
        if not self.enabled:
            return
        self.step_times_s.append(time.perf_counter() - self._t0)
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        if self.profiling and self.profile_steps and step >= self.profile_steps[1]:
            self.stop()

    def stop(self) -> None:
        """Stop profiling (writes the profile); safe to call when not profiling."""
        if self.profiling:
            self.profiling = False
            self._tensorflow().profiler.experimental.stop()

    def summary(self, skip: int = 1) -> dict[str, float | int]:
        """Median step time, leaving out the first `skip` steps (tracing and warm-up)."""
        return median_step_ms(self.step_times_s, skip)


def median_step_ms(step_times_s: list[float], skip: int = 1) -> dict[str, float | int]:
    """The median step time, leaving out the first `skip` steps (tracing, compilation, lazy
    initialisation), and how many steps ran."""
    times = step_times_s[skip:] or step_times_s
    if not times:
        return {}
    return {"step_time_ms": statistics.median(times) * 1000.0, "steps": len(step_times_s)}


class Reporter:
    """What every framework's helper reports, and how: the run information on entry, each
    epoch with its time, results, and on exit the training time and the median step time.
    A no-op outside `tuiprof run` (`reporting` is False)."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.reporting = enabled()
        self.info = {k: v for k, v in info.items() if v is not None}
        self.step_times_s: list[float] = []
        self._t0 = self._epoch_t0 = time.perf_counter()

    def _epochs(self) -> dict[str, int]:
        """The planned epoch count, where the job gave one: the runner shows "epoch 2/5"."""
        epochs = self.info.get("epochs")
        return {"epochs": epochs} if isinstance(epochs, int) else {}

    def open_report(self) -> None:
        """Report the run information and start the training clock."""
        if self.reporting:
            info = {**self.info, "framework_versions": framework_versions()}
            report_line({"info": info, **self._epochs()})
        self._t0 = self._epoch_t0 = time.perf_counter()

    def close_report(self) -> None:
        """Report the training time and the median step time."""
        if self.reporting:
            report_line({"train_time_s": time.perf_counter() - self._t0, **self.summary()})

    def epoch_begin(self) -> None:
        """Start an epoch's clock (optional: each epoch's clock also starts when the last ends)."""
        self._epoch_t0 = time.perf_counter()

    def epoch_end(self, epoch: int, **metrics: Any) -> None:
        """Report an epoch's metrics (epoch counted from 0) with its time."""
        now = time.perf_counter()
        line: dict[str, Any] = {"epoch": epoch, "epoch_time_s": now - self._epoch_t0}
        line.update(self._epochs())
        line.update(metrics)
        self._epoch_t0 = now
        if self.reporting:
            report_line(line)

    def report(self, **metrics: Any) -> None:
        """Report results (e.g. the final validation accuracy)."""
        if self.reporting:
            report_line(metrics)

    def summary(self, skip: int = 1) -> dict[str, float | int]:
        return median_step_ms(self.step_times_s, skip)


class TuiprofRun(Reporter):
    """A custom training loop's handle: `step(n)` marks a step, `report()` reports results."""

    def __init__(self, profile_steps: tuple[int, int] | None = None, **info: Any) -> None:
        super().__init__(info)
        self.profiler = StepProfiler(profile_steps)

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Wrap one training step (1-based numbering matches `profile_steps`)."""
        self.profiler.begin(step)
        try:
            yield
        finally:
            self.profiler.end(step)

    def summary(self, skip: int = 1) -> dict[str, float | int]:
        return median_step_ms(self.profiler.step_times_s, skip)

    def __enter__(self) -> TuiprofRun:
        if self.reporting:
            start_profiler_server()
        self.open_report()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.reporting:
            return
        self.profiler.stop()
        self.close_report()


def tuiprof_run(profile_steps: tuple[int, int] | None = None, **info: Any) -> TuiprofRun:
    """`with tuiprof_run(profile_steps=(5, 9), epochs=3, batch_size=32) as run:` for custom loops;
    keyword arguments are reported as run information (e.g. dataset_fingerprint)."""
    return TuiprofRun(profile_steps, **info)
