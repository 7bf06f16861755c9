"""Small JAX jobs the tests run in their own processes (JAX's profiler is process-wide).

python tests/jax_job.py trace LOGDIR [--markers]
    a minimal job: a jitted `step(w, x)` called 12 times inside `jax.profiler.trace`
    (with --markers, each call in `jax.profiler.StepTraceAnnotation` and waited for)
python tests/jax_job.py helper [--profile FIRST,LAST] [--steps N] [--seconds S]
    a loop under tui_prof.instrument.jax.trace_steps; prints READY after its first step
    and runs N steps, or for S seconds
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp


@jax.jit
def step(w: jax.Array, x: jax.Array) -> jax.Array:
    def loss(w: jax.Array) -> jax.Array:
        mse: jax.Array = jnp.mean((jnp.tanh(x @ w) - 1.0) ** 2)
        return mse

    updated: jax.Array = w - 0.1 * jax.grad(loss)(w)
    return updated


def trace(logdir: str, markers: bool) -> None:
    w, x = jnp.ones((256, 256)), jnp.ones((128, 256))
    w = step(w, x).block_until_ready()  # compile outside the trace
    with jax.profiler.trace(logdir):
        for i in range(12):
            if markers:
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    w = step(w, x).block_until_ready()
            else:
                w = step(w, x)
        w.block_until_ready()


def helper(profile: tuple[int, int] | None, steps: int, seconds: float) -> None:
    from tui_prof.instrument.jax import trace_steps

    w, x = jnp.ones((128, 128)), jnp.ones((64, 128))
    end = time.monotonic() + seconds
    with trace_steps(profile, batch_size=64, dataset_fingerprint="ones") as run:
        n = 0
        while n < steps or time.monotonic() < end:
            n += 1
            with run.step(n):
                w = step(w, x).block_until_ready()
            if n == 1:
                print("READY", flush=True)
            if seconds:
                time.sleep(0.01)
        run.report(final_loss=float(jnp.mean(w)))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("logdir")
    t.add_argument("--markers", action="store_true")
    h = sub.add_parser("helper")
    h.add_argument("--profile", default="")
    h.add_argument("--steps", type=int, default=10)
    h.add_argument("--seconds", type=float, default=0.0)
    args = p.parse_args()
    if args.cmd == "trace":
        trace(args.logdir, args.markers)
    else:
        first, _, last = args.profile.partition(",")
        helper((int(first), int(last)) if args.profile else None, args.steps, args.seconds)


if __name__ == "__main__":
    main()
