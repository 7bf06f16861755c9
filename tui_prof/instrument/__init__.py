"""One-line instrumentation for training scripts run by `tuiprof run`.

    from tui_prof.instrument import TuiprofCallback
    model.fit(..., callbacks=[TuiprofCallback(profile_steps=(5, 9))])

or, in a custom loop:

    from tui_prof.instrument import tuiprof_run
    with tuiprof_run(profile_steps=(5, 9)) as run:
        for step, batch in enumerate(data, start=1):
            with run.step(step):
                train_step(batch)
        run.report(val_accuracy=acc)

or, in a JAX loop (tui_prof.instrument.jax; JAX's own step marker and tracer):

    from tui_prof.instrument.jax import trace_steps
    with trace_steps(profile_steps=(5, 9)) as run:
        for step, batch in enumerate(data, start=1):
            with run.step(step):
                state = train_step(state, batch)

and, for a distribution such as inference latency (compared by p50/p90/p99):

    from tui_prof.instrument import timed
    for x in requests:
        with timed("latency_ms"):
            predict(x)

Settings an experiment can change without the job's command line (TUIPROF_PRECISION,
TUIPROF_XLA, TUIPROF_BATCH_SIZE, TUIPROF_PREFETCH) are read through
`tui_prof.instrument.settings`.

Contract: outside `tuiprof run` (no $TUIPROF_METRICS_FILE) every helper is a no-op and imports
nothing; under it they append JSON lines to the metrics file, wrap each step in TensorBoard's
official step marker (`tf.profiler.experimental.Trace("train", step_num=..., _r=1)`) so
TensorBoard's overview finds steps, profile the given step range into $TUIPROF_RUN_DIR, and
start a profiler server on $TUIPROF_PROFILER_PORT for live capture (the JAX helper does the same
with `jax.profiler.StepTraceAnnotation`, `jax.profiler.start_trace` and `start_server`). Only
this package may import a framework (TensorFlow, JAX), and only lazily, when the job under
tuiprof has asked for one of these things.
"""

from __future__ import annotations

from typing import Any

from tui_prof.instrument.report import (
    TuiprofRun,
    enabled,
    report,
    report_info,
    timed,
    tuiprof_run,
)

__all__ = [
    "TuiprofCallback",
    "TuiprofRun",
    "enabled",
    "report",
    "report_info",
    "timed",
    "trace_steps",
    "tuiprof_run",
]


def __getattr__(name: str) -> Any:
    if name == "TuiprofCallback":  # imports keras, so only when asked for
        from tui_prof.instrument.keras import TuiprofCallback

        return TuiprofCallback
    if name == "trace_steps":  # JAX's helper (imports JAX only when a step asks for it)
        from tui_prof.instrument.jax import trace_steps

        return trace_steps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
