"""Train a small MLP on scikit-learn's digits with JAX and profile a few steps with JAX's profiler.

The JAX counterpart of train_cnn.py: a jitted `train_step` (plain JAX, no Flax or Optax), run on
the GPU where JAX sees one, else on the CPU. Nothing downloads: the digits data set (1,797 8x8
images) ships inside scikit-learn. Steps --profile-steps are traced into --logdir; with
--step-markers each step sits in `jax.profiler.StepTraceAnnotation`, which TensorBoard's
converter reads as a step marker; without, tuiprof takes each run of the jitted `train_step`
as a step (step source `xla_program_runs`).

    python examples/train_jax.py --logdir logs/jax --step-markers
    tuiprof summary logs/jax

Under `tuiprof run` it reports through tui_prof.instrument.jax.trace_steps (metrics, markers,
the profiled range in $TUIPROF_RUN_DIR, a profiler server for `tuiprof capture`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits

DATASET = "sklearn-digits"
Params = dict[str, jax.Array]


def parse_steps(text: str) -> tuple[int, int] | None:
    """'5,9' -> (5, 9); '0' -> None (no profile)."""
    if text == "0":
        return None
    first, last = (int(s) for s in text.split(","))
    if not 1 <= first <= last:
        raise argparse.ArgumentTypeError("need 1 <= first <= last")
    return first, last


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--precision",
        choices=["float32", "bf16"],
        default="float32",
        help="bf16: the matmuls in bfloat16 (float32 master weights and loss)",
    )
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument(
        "--profile-steps",
        type=parse_steps,
        default="5,14",
        help="first,last global step (1-based) to trace; '0' disables profiling",
    )
    p.add_argument(
        "--logdir",
        default=os.environ.get("TUIPROF_RUN_DIR") or "logs",
        help="TensorBoard logdir (default: $TUIPROF_RUN_DIR, else ./logs)",
    )
    p.add_argument(
        "--step-markers",
        action="store_true",
        help="wrap each step in jax.profiler.StepTraceAnnotation (official step markers)",
    )
    p.add_argument(
        "--small-profile",
        action="store_true",
        help="leave the HLO protos and Python calls out of the profile (for sample_traces/)",
    )
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """Digits as float32 vectors in [0, 1], split 80/20 with a seeded shuffle, and a fingerprint."""
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")  # (1797, 64)
    y = digits.target.astype("int32")
    fingerprint = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()[:16]
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:], fingerprint


def init_params(key: jax.Array, hidden: int) -> Params:
    k1, k2, k3 = jax.random.split(key, 3)
    scale = 1.0 / np.sqrt(64)
    return {
        "w1": jax.random.normal(k1, (64, hidden)) * scale,
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden, hidden)) / np.sqrt(hidden),
        "b2": jnp.zeros(hidden),
        "w3": jax.random.normal(k3, (hidden, 10)) / np.sqrt(hidden),
        "b3": jnp.zeros(10),
    }


def make_fns(compute: jnp.dtype, lr: float) -> tuple[Any, Any]:
    """The jitted train step and accuracy; matmuls in `compute`, weights and loss in float32."""

    def logits(params: Params, x: jax.Array) -> jax.Array:
        h = x.astype(compute)
        for i in (1, 2):
            w, b = params[f"w{i}"].astype(compute), params[f"b{i}"].astype(compute)
            h = jax.nn.relu(h @ w + b)
        out = h @ params["w3"].astype(compute) + params["b3"].astype(compute)
        return out.astype(jnp.float32)

    def loss_fn(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(logits(params, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def train_step(params: Params, x: jax.Array, y: jax.Array) -> tuple[Params, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    @jax.jit
    def accuracy(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean(jnp.argmax(logits(params, x), axis=1) == y)

    return train_step, accuracy


def batches(x: np.ndarray, y: np.ndarray, size: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """Shuffled full batches (a fixed shape, so the step compiles once)."""
    order = np.random.default_rng(seed).permutation(len(x))
    for i in range(0, len(x) - size + 1, size):
        idx = order[i : i + size]
        yield x[idx], y[idx]


class PlainProfiler:
    """Without tuiprof: JAX's own API, the lines to copy into a training loop."""

    def __init__(
        self, logdir: str, steps: tuple[int, int] | None, markers: bool, small: bool
    ) -> None:
        self.logdir, self.steps, self.markers = logdir, steps, markers
        self.options = jax.profiler.ProfileOptions()
        if small:
            self.options.enable_hlo_proto = False
            self.options.python_tracer_level = 0
        self.tracing = False

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        if self.steps and step == self.steps[0]:
            jax.profiler.start_trace(self.logdir, profiler_options=self.options)
            self.tracing = True
        marker: AbstractContextManager[Any] = (
            jax.profiler.StepTraceAnnotation("train", step_num=step)
            if self.markers
            else nullcontext()
        )
        with marker:
            yield
        if self.tracing and self.steps and step == self.steps[1]:
            self.__exit__()

    def __enter__(self) -> PlainProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tracing:  # training may end inside the traced range
            self.tracing = False
            jax.profiler.stop_trace()

    def epoch_begin(self) -> None:
        pass

    def epoch_end(self, epoch: int, **metrics: Any) -> None:
        print(f"epoch {epoch + 1}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))

    def report(self, **metrics: Any) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"JAX {jax.__version__} on {jax.default_backend()}: {jax.devices()}")
    x_train, y_train, x_val, y_val, fingerprint = load_data(args.seed)
    compute = jnp.bfloat16 if args.precision == "bf16" else jnp.float32
    train_step, accuracy = make_fns(compute, args.lr)
    params = init_params(jax.random.PRNGKey(args.seed), args.hidden)
    info = {
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "dataset": DATASET,
        "dataset_fingerprint": fingerprint,
        "precision": args.precision,
        "backend": jax.default_backend(),
    }
    if os.environ.get("TUIPROF_METRICS_FILE"):
        from tui_prof.instrument.jax import trace_steps

        run: Any = trace_steps(args.profile_steps, markers=args.step_markers, **info)
    else:
        run = PlainProfiler(args.logdir, args.profile_steps, args.step_markers, args.small_profile)
    start = time.perf_counter()
    step = 0
    with run:
        for epoch in range(args.epochs):
            run.epoch_begin()
            for xb, yb in batches(x_train, y_train, args.batch_size, args.seed + epoch):
                step += 1
                with run.step(step):
                    params, loss = train_step(params, xb, yb)
                    loss.block_until_ready()  # the step's time includes its device work
            val = float(accuracy(params, x_val, y_val))
            run.epoch_end(epoch, loss=float(loss), val_accuracy=val)
        train_time = time.perf_counter() - start
        run.report(final_val_accuracy=val)
    print(f"final val_accuracy {val:.4f}, train time {train_time:.2f} s, logdir {args.logdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
