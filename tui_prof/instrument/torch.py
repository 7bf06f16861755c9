"""PyTorch: one line sets up `torch.profiler` and reports to tuiprof from a training loop.

    from tui_prof.instrument.torch import torch_profiler

    with torch_profiler(wait=3, warmup=1, active=5, batch_size=64) as prof:
        for epoch in range(epochs):
            for x, y in loader:
                train_step(x, y)
                prof.step()
            prof.epoch_end(epoch, loss=loss.item(), val_accuracy=acc)

Contract: the only module that imports torch, and only when it will profile (in `__enter__`).
Under `tuiprof run` it profiles one window of steps, `wait` + `warmup` then `active` (a
`torch.profiler.schedule` with repeat=1, so one trace per run, steps 5-9 with the defaults as in
the TensorFlow example), with `tensorboard_trace_handler` into $TUIPROF_RUN_DIR, where the
experiment runner and the browse tree find it (`<run dir>/<host>_<pid>.<time>.pt.trace.json.gz`;
each step is a `ProfilerStep#N` range); and it reports run information, each epoch's metrics, the
median step time and the training time through the metrics protocol. Outside tuiprof it reports
nothing and profiles only into a `logdir` it is given; without one it only counts steps, so a
script runs the same with and without tuiprof. CUDA activity is recorded where torch sees a GPU.
"""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import Any

from tui_prof.instrument.report import Reporter


class TorchProfiler(Reporter):
    """Profiles a window of training steps and reports epochs; see `torch_profiler`."""

    def __init__(
        self,
        *,
        wait: int = 3,
        warmup: int = 1,
        active: int = 5,
        skip_first: int = 0,
        logdir: str | os.PathLike[str] | None = None,
        profile: bool = True,
        record_shapes: bool = True,
        profile_memory: bool = False,
        with_flops: bool = False,
        with_stack: bool = False,
        cuda: bool | None = None,
        use_gzip: bool = True,
        **info: Any,
    ) -> None:
        if min(wait, warmup, skip_first) < 0 or active < 1:
            raise ValueError("need wait, warmup, skip_first >= 0 and active >= 1")
        super().__init__(info)
        run_dir = os.environ.get("TUIPROF_RUN_DIR") if self.reporting else None
        self.logdir = (os.fspath(logdir) if logdir is not None else run_dir) if profile else None
        self.window = (skip_first, wait, warmup, active)
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.with_stack = with_stack
        self.cuda = cuda
        self.use_gzip = use_gzip
        self.steps = 0
        self._prof: Any = None
        self._t_step = 0.0

    @property
    def last_profiled_step(self) -> int:
        """The 1-based step that ends the profiled window."""
        return sum(self.window)

    def _start_profiler(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        activities = [ProfilerActivity.CPU]
        if self.cuda or (self.cuda is None and torch.cuda.is_available()):
            activities.append(ProfilerActivity.CUDA)
        skip_first, wait, warmup, active = self.window
        assert self.logdir is not None
        os.makedirs(self.logdir, exist_ok=True)
        self._prof = profile(
            activities=activities,
            schedule=schedule(
                skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=1
            ),
            on_trace_ready=tensorboard_trace_handler(self.logdir, use_gzip=self.use_gzip),
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_flops=self.with_flops,
            with_stack=self.with_stack,
        )
        self._prof.__enter__()

    def _stop_profiler(self) -> None:
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.__exit__(None, None, None)

    def __enter__(self) -> TorchProfiler:
        self.open_report()
        if self.logdir is not None:
            self._start_profiler()
        self._t0 = self._t_step = self._epoch_t0 = time.perf_counter()
        return self

    def step(self) -> None:
        """Call once after each training step (it also closes the step's `ProfilerStep#N`)."""
        now = time.perf_counter()
        self.step_times_s.append(now - self._t_step)
        self._t_step = now
        self.steps += 1
        if self._prof is not None:
            self._prof.step()
            if self.steps >= self.last_profiled_step:
                self._stop_profiler()  # the trace is written; the rest trains unprofiled

    def epoch_begin(self) -> None:
        super().epoch_begin()
        self._t_step = self._epoch_t0

    def epoch_end(self, epoch: int, **metrics: Any) -> None:
        """Report an epoch (counted from 0) with its time; the next epoch's clock starts now."""
        super().epoch_end(epoch, **metrics)
        self._t_step = self._epoch_t0  # evaluation after the last step is not a step

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop_profiler()
        if exc_type is None:
            self.close_report()


def torch_profiler(
    *,
    wait: int = 3,
    warmup: int = 1,
    active: int = 5,
    logdir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> TorchProfiler:
    """`with torch_profiler(batch_size=64, dataset_fingerprint=fp) as prof:` around the loop,
    `prof.step()` after each step. Keyword arguments other than the profiler's own (profile,
    skip_first, record_shapes, profile_memory, with_flops, with_stack, cuda, use_gzip) are reported as run
    information; `profile=False` reports without profiling."""
    return TorchProfiler(wait=wait, warmup=warmup, active=active, logdir=logdir, **options)
