"""The one-line JAX helper: step markers, a profiled step range and metrics for `tuiprof run`.

    from tui_prof.instrument.jax import trace_steps

    with trace_steps(profile_steps=(5, 9), batch_size=128) as run:
        for step, batch in enumerate(batches, start=1):
            with run.step(step):
                state, loss = train_step(state, batch)
                jax.block_until_ready(loss)  # the step's time is its device work too
        run.report(val_accuracy=accuracy)

Contract: under `tuiprof run` ($TUIPROF_METRICS_FILE) each step is wrapped in
`jax.profiler.StepTraceAnnotation("train", step_num=n)` (TensorBoard's converter reads it as an
official step marker), steps first..last (1-based) are traced with `jax.profiler` into
$TUIPROF_RUN_DIR, a profiler server listens on $TUIPROF_PROFILER_PORT for `tuiprof capture`,
and the run information, epochs, final metrics and the median step time go to the metrics file
(tui_prof.experiments.protocol). Outside tuiprof it does nothing and imports nothing, unless
given a `logdir`: then it marks and traces the steps into that logdir (no metrics). JAX is
imported only when one of these things is asked for.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from tui_prof.instrument.report import Reporter, enabled

_server: Any = None  # the process's profiler server (one per process)


def start_profiler_server() -> int | None:
    """JAX's profiler server on $TUIPROF_PROFILER_PORT, once per process (None if not asked)."""
    global _server
    port = os.environ.get("TUIPROF_PROFILER_PORT")
    if _server is not None or not port or not enabled():
        return None
    try:
        import jax

        _server = jax.profiler.start_server(int(port))
    except Exception as exc:  # a busy port must not kill the job
        print(f"tuiprof: JAX profiler server not started on port {port}: {exc}", file=sys.stderr)
        return None
    return int(port)


class JaxSteps(Reporter):
    """A JAX training loop's handle: `step(n)` marks (and maybe traces) a step, `report()`
    reports results; see the module's contract."""

    def __init__(
        self,
        profile_steps: tuple[int, int] | None = None,
        *,
        markers: bool = True,
        logdir: str | os.PathLike[str] | None = None,
        **info: Any,
    ) -> None:
        if profile_steps is not None and not (0 < profile_steps[0] <= profile_steps[1]):
            raise ValueError("profile_steps must be (first, last) with 0 < first <= last")
        super().__init__(info)
        self.logdir = os.fspath(logdir) if logdir else os.environ.get("TUIPROF_RUN_DIR") or None
        self.active = self.reporting or logdir is not None
        self.profile_steps = profile_steps if self.logdir else None
        self.markers = markers and self.active
        self.tracing = False
        self._jax: ModuleType | None = None

    def _import(self) -> ModuleType:
        if self._jax is None:
            import jax

            self._jax = jax
        return self._jax

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Wrap one training step (1-based, so it matches profile_steps)."""
        if not self.active:
            yield
            return
        if self.profile_steps and step == self.profile_steps[0] and not self.tracing:
            try:
                self._import().profiler.start_trace(self.logdir or ".")
                self.tracing = True
            except Exception as exc:  # e.g. another trace is running
                print(f"tuiprof: JAX trace not started: {exc}", file=sys.stderr)
        marker = (
            self._import().profiler.StepTraceAnnotation("train", step_num=step)
            if self.markers
            else None
        )
        t0 = time.perf_counter()
        try:
            if marker is None:
                yield
            else:
                with marker:
                    yield
        finally:
            self.step_times_s.append(time.perf_counter() - t0)
            if self.tracing and self.profile_steps and step >= self.profile_steps[1]:
                self.stop()

    def stop(self) -> None:
        """Stop tracing (writes the profile); safe to call when not tracing."""
        if self.tracing:
            self.tracing = False
            self._import().profiler.stop_trace()

    def __enter__(self) -> JaxSteps:
        if self.reporting:
            start_profiler_server()
        self.open_report()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close_report()


def trace_steps(
    profile_steps: tuple[int, int] | None = None,
    *,
    markers: bool = True,
    logdir: str | os.PathLike[str] | None = None,
    **info: Any,
) -> JaxSteps:
    """`with trace_steps(profile_steps=(5, 9), batch_size=128) as run:` around a JAX training
    loop; keyword arguments are reported as run information (e.g. dataset_fingerprint)."""
    return JaxSteps(profile_steps, markers=markers, logdir=logdir, **info)
