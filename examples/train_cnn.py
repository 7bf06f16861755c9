"""Train a small CNN on scikit-learn's digits and profile a few steps with TensorBoard's profiler.

This is the example users copy: it shows the two usual ways to profile TensorFlow training,
Keras 3 ``model.fit`` with the TensorBoard callback, and a custom ``tf.GradientTape`` loop with
official step markers (``tf.profiler.experimental.Trace("train", step_num=..., _r=1)``), which is
what lets TensorBoard's converter find steps on its own. After training it serves batch-1
predictions and times each one (``--inference-requests``): under ``tuiprof run`` every request
is reported as ``latency_ms``, which tuiprof compares by its p50, p90 and p99. Nothing
downloads: the digits data set (1,797 8x8 images) ships inside scikit-learn.

    python examples/train_cnn.py --mode custom --epochs 3 --logdir logs/custom
    tuiprof logs/custom
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from contextlib import nullcontext

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter short

import keras
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

DATASET = "sklearn-digits"


def parse_steps(text: str) -> tuple[int, int] | None:
    """'5,9' -> (5, 9); '0' -> None (no profile)."""
    if text == "0":
        return None
    first, last = (int(s) for s in text.split(","))
    if not 1 <= first <= last:
        raise argparse.ArgumentTypeError("need 1 <= first <= last")
    return first, last


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line; the defaults give a run of a few seconds on a laptop CPU."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--mode",
        choices=["fit", "custom"],
        default="fit",
        help="fit: keras model.fit + TensorBoard callback; custom: GradientTape loop with step markers",
    )
    p.add_argument(
        "--precision",
        choices=["float32", "mixed"],
        default="float32",
        help="mixed: mixed_float16 on a GPU, mixed_bfloat16 on a CPU",
    )
    p.add_argument(
        "--input-bound",
        action="store_true",
        help="add a deliberately slow tf.data map so the input pipeline is the bottleneck",
    )
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--profile-steps",
        type=parse_steps,
        default="5,9",
        help="first,last global step (1-based batch count) to profile; '0' disables profiling",
    )
    p.add_argument(
        "--logdir",
        default=os.environ.get("TUIPROF_RUN_DIR") or "logs",
        help="TensorBoard logdir (default: $TUIPROF_RUN_DIR, else ./logs)",
    )
    p.add_argument(
        "--step-markers",
        action="store_true",
        help="fit mode: profile with official step markers instead of the TensorBoard callback",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--inference-requests",
        type=int,
        default=200,
        help="after training, time this many batch-1 predictions (0: none)",
    )
    return p.parse_args(argv)


def write_metrics(record: dict) -> None:
    """Append one JSON line to $TUIPROF_METRICS_FILE, so tuiprof's experiment runner can read results."""
    path = os.environ.get("TUIPROF_METRICS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """Digits as float32 images in [0, 1], split 80/20 with a seeded shuffle; returns a fingerprint too."""
    digits = load_digits()
    x = (digits.images / 16.0).astype("float32")[..., None]  # (1797, 8, 8, 1)
    y = digits.target.astype("int32")
    fingerprint = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()[:16]
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:], fingerprint


def slow_map(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Stand-in for expensive decoding/augmentation: 20 ms of Python per batch, run serially."""

    def _sleep(x: tf.Tensor) -> tf.Tensor:
        time.sleep(0.02)
        return x

    images = tf.py_function(_sleep, [images], tf.float32)
    images.set_shape([None, 8, 8, 1])
    return images, labels


def make_dataset(
    x, y, batch_size: int, seed: int, input_bound: bool, training: bool
) -> tf.data.Dataset:
    """A tf.data pipeline; with input_bound the slow map runs without parallelism or prefetch."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if training:
        ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size)
    if input_bound and training:
        options = tf.data.Options()
        # Without this, tf.data injects a prefetch after the map and hides part of the wait.
        options.experimental_optimization.inject_prefetch = False
        return ds.map(slow_map).with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE)


def build_model() -> keras.Model:
    """Two small conv layers and a dense head; the last softmax stays float32 under mixed precision."""
    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
            keras.layers.Activation("softmax", dtype="float32"),
        ]
    )


def set_precision(precision: str) -> str:
    """Set Keras's global dtype policy; CPUs get bfloat16 because TensorFlow runs float16 slowly there."""
    if precision == "float32":
        policy = "float32"
    else:
        policy = "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"
    keras.mixed_precision.set_global_policy(policy)
    print(f"precision policy: {policy}")
    return policy


class EpochMetrics(keras.callbacks.Callback):
    """Times each epoch of model.fit and hands its metrics to write_metrics."""

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        write_metrics(
            {
                "epoch": epoch,
                "epoch_time_s": time.perf_counter() - self._start,
                "accuracy": float(logs.get("accuracy", float("nan"))),
                "val_accuracy": float(logs.get("val_accuracy", float("nan"))),
                "loss": float(logs.get("loss", float("nan"))),
            }
        )


class StepMarkerProfiler(keras.callbacks.Callback):
    """Profiles global batches first..last of model.fit, each inside an official step marker.

    Keras 3's TensorBoard callback marks batches as "Profiled batch" without `_r=1`, which
    TensorBoard's converter ignores ("No step marker observed"); these markers it does read.
    """

    def __init__(self, logdir: str, first: int, last: int):
        super().__init__()
        self.logdir, self.first, self.last = logdir, first, last
        self.step, self.marker = 0, None

    def on_train_batch_begin(self, batch, logs=None):
        self.step += 1
        if self.step == self.first:
            tf.profiler.experimental.start(self.logdir)
        if self.first <= self.step <= self.last:
            self.marker = tf.profiler.experimental.Trace("train", step_num=self.step, _r=1)
            self.marker.__enter__()

    def on_train_batch_end(self, batch, logs=None):
        if self.marker is not None:
            self.marker.__exit__(None, None, None)
            self.marker = None
        if self.step == self.last:
            tf.profiler.experimental.stop()

    def on_train_end(self, logs=None):
        if self.first <= self.step < self.last:
            tf.profiler.experimental.stop()  # training ended inside the profiled range


def train_fit(model, train_ds, val_ds, args: argparse.Namespace) -> float:
    """Keras model.fit; the TensorBoard callback profiles batches first..last (Keras counts from 1)."""
    callbacks = [EpochMetrics()]
    profile_steps = args.profile_steps
    if os.environ.get("TUIPROF_METRICS_FILE"):
        # Under `tuiprof run`, tuiprof's one-line callback reports each epoch and the result and
        # profiles those steps inside official step markers.
        from tui_prof.instrument import TuiprofCallback

        callbacks = [TuiprofCallback(profile_steps=profile_steps, batch_size=args.batch_size)]
        profile_steps = None
    if profile_steps and args.step_markers:
        callbacks.append(StepMarkerProfiler(args.logdir, *profile_steps))
    elif profile_steps:
        callbacks.append(
            keras.callbacks.TensorBoard(
                log_dir=args.logdir,
                profile_batch=profile_steps,
                write_graph=False,
                update_freq="epoch",
            )
        )
    # The dataset shuffles itself; Keras warns that fit's own shuffle=True does not apply to it.
    history = model.fit(
        train_ds, validation_data=val_ds, epochs=args.epochs, callbacks=callbacks, verbose=2
    )
    return float(history.history["val_accuracy"][-1])


def train_custom(model, train_ds, val_ds, args: argparse.Namespace) -> float:
    """A GradientTape loop; each profiled step sits in an official step marker so the converter finds steps."""
    optimizer = keras.optimizers.Adam()
    if keras.mixed_precision.global_policy().compute_dtype == "float16":
        # float16 needs loss scaling to keep small gradients; bfloat16 has float32's range.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    train_acc = keras.metrics.SparseCategoricalAccuracy()
    val_acc = keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            probs = model(images, training=True)
            loss = loss_fn(labels, probs)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        train_acc.update_state(labels, probs)
        return loss

    @tf.function
    def val_step(images, labels):
        val_acc.update_state(labels, model(images, training=False))

    first, last = args.profile_steps or (0, -1)
    steps_per_epoch = int(train_ds.cardinality())
    step = 0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        train_acc.reset_state()
        val_acc.reset_state()
        iterator = iter(train_ds)
        for _ in range(steps_per_epoch):
            step += 1
            if step == first:
                tf.profiler.experimental.start(args.logdir)
            profiling = first <= step <= last
            # The marker wraps fetching the batch too, so input time counts inside the step.
            with (
                tf.profiler.experimental.Trace("train", step_num=step, _r=1)
                if profiling
                else nullcontext()
            ):
                images, labels = next(iterator)
                loss = train_step(images, labels)
            if step == last:
                tf.profiler.experimental.stop()
        for images, labels in val_ds:
            val_step(images, labels)
        print(
            f"epoch {epoch + 1}/{args.epochs}: loss {float(loss):.4f} "
            f"accuracy {float(train_acc.result()):.4f} val_accuracy {float(val_acc.result()):.4f}"
        )
        write_metrics(
            {
                "epoch": epoch,
                "epoch_time_s": time.perf_counter() - start,
                "accuracy": float(train_acc.result()),
                "val_accuracy": float(val_acc.result()),
                "loss": float(loss),
            }
        )
    if first <= step < last:
        tf.profiler.experimental.stop()  # training ended inside the profiled range
    return float(val_acc.result())


INFERENCE_WARMUP = 10  # the first calls trace and compile the serving function: not counted


def time_inference(model: keras.Model, x: np.ndarray, requests: int, seed: int) -> list[float]:
    """Serve `requests` single-image predictions, as an online service would, and time each one
    (milliseconds). Under `tuiprof run` each is reported as `latency_ms` through
    `tui_prof.instrument.timed`, so tuiprof keeps them all and compares p50, p90 and p99."""
    timed = None
    if os.environ.get("TUIPROF_METRICS_FILE"):
        from tui_prof.instrument import timed

    serve = tf.function(lambda images: model(images, training=False))  # like a SavedModel signature
    order = np.random.default_rng(seed).integers(0, len(x), size=INFERENCE_WARMUP + requests)
    latencies = []
    for k, i in enumerate(order):
        image = tf.constant(x[i : i + 1])
        if k < INFERENCE_WARMUP:
            serve(image).numpy()
            continue
        t0 = time.perf_counter()
        with timed("latency_ms") if timed else nullcontext():
            serve(image).numpy()  # .numpy() waits for the result: the whole request
        latencies.append((time.perf_counter() - t0) * 1000.0)
    return latencies


def main(argv: list[str] | None = None) -> int:
    """Train, profile a few steps, print the final accuracy and time, and write the metrics lines."""
    args = parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    policy = set_precision(args.precision)
    x_train, y_train, x_val, y_val, fingerprint = load_data(args.seed)
    train_ds = make_dataset(
        x_train, y_train, args.batch_size, args.seed, args.input_bound, training=True
    )
    val_ds = make_dataset(x_val, y_val, args.batch_size, args.seed, False, training=False)

    model = build_model()
    start = time.perf_counter()
    if args.mode == "fit":
        model.compile(
            optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
        val_accuracy = train_fit(model, train_ds, val_ds, args)
    else:
        val_accuracy = train_custom(model, train_ds, val_ds, args)
    train_time = time.perf_counter() - start

    print(
        f"final val_accuracy {val_accuracy:.4f}, train time {train_time:.2f} s, logdir {args.logdir}"
    )
    if args.inference_requests > 0:
        latencies = time_inference(model, x_val, args.inference_requests, args.seed)
        p50, p90, p99 = np.percentile(latencies, [50, 90, 99])
        print(
            f"inference: {len(latencies)} batch-1 requests, latency p50 {p50:.2f} ms, "
            f"p90 {p90:.2f} ms, p99 {p99:.2f} ms"
        )
    write_metrics(
        {
            "final_val_accuracy": val_accuracy,
            "train_time_s": train_time,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "dataset": DATASET,
            "dataset_fingerprint": fingerprint,
            "precision_policy": policy,
            "mode": args.mode,
            "input_bound": args.input_bound,
            "profile_steps": args.profile_steps,
            "step_markers": args.mode == "custom" or args.step_markers,
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
