"""The Keras callback: per-epoch time and metrics, official step markers, a profiled step range.

Contract: `TuiprofCallback` does nothing outside `tuiprof run`. Under it, each training batch is
wrapped in `tf.profiler.experimental.Trace("train", step_num=n, _r=1)` (entered in
on_train_batch_begin, left in on_train_batch_end; n counts batches from 1 across epochs, as
Keras's own `profile_batch` does), so TensorBoard's overview page finds the steps of the
profiles it takes; steps `profile_steps=(first, last)` are profiled into $TUIPROF_RUN_DIR.
"""

from __future__ import annotations

import time
from typing import Any

import keras

from tui_prof.instrument.report import (
    StepProfiler,
    enabled,
    framework_versions,
    report_line,
    start_profiler_server,
)


class TuiprofCallback(keras.callbacks.Callback):
    """Reports to tuiprof; pass batch_size and dataset_fingerprint so runs can be checked alike."""

    def __init__(
        self,
        profile_steps: tuple[int, int] | None = None,
        batch_size: int | None = None,
        dataset_fingerprint: str | None = None,
        step_markers: bool = True,
        **info: Any,
    ) -> None:
        super().__init__()
        if profile_steps is not None and not (0 < profile_steps[0] <= profile_steps[1]):
            raise ValueError("profile_steps must be (first, last) with 0 < first <= last")
        self.active = enabled()
        self._profiler = StepProfiler(profile_steps, markers=step_markers)
        self._info = {
            k: v
            for k, v in {
                "batch_size": batch_size,
                "dataset_fingerprint": dataset_fingerprint,
                **info,
            }.items()
            if v is not None
        }
        self._step = 0
        self._epochs: int | None = None
        self._epoch_steps: list[int] = []  # global step at the start of each epoch
        self._t_train = self._t_epoch = 0.0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if not self.active:
            return
        start_profiler_server()
        params = self.params or {}
        self._epochs = params.get("epochs")
        info = {**self._info, "framework_versions": framework_versions()}
        if self._epochs is not None:
            info["epochs"] = self._epochs
        if params.get("steps") is not None:
            info["steps_per_epoch"] = params["steps"]
        report_line({"info": info, "epochs": self._epochs} if self._epochs else {"info": info})
        self._t_train = time.perf_counter()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.active:
            self._epoch_steps.append(self._step)
            self._t_epoch = time.perf_counter()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.active:
            self._step += 1
            self._profiler.begin(self._step)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.active:
            self._profiler.end(self._step)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if not self.active:
            return
        line: dict[str, Any] = {"epoch": epoch, "epoch_time_s": time.perf_counter() - self._t_epoch}
        if self._epochs:
            line["epochs"] = self._epochs
        line.update({k: v for k, v in (logs or {}).items() if k not in line})
        report_line(line)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if not self.active:
            return
        self._profiler.stop()
        # Step time leaves out the first epoch (tracing, caches) when there is more than one.
        skip = self._epoch_steps[1] if len(self._epoch_steps) > 1 else 1
        report_line(
            {
                "train_time_s": time.perf_counter() - self._t_train,
                **self._profiler.summary(skip=skip),
            }
        )
