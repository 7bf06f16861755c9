"""A small real TensorFlow training job that starts a profiler server, for `tuiprof capture`.

Why: capture needs a live job to attach to; this one trains a small Keras model on the CPU for a
set time, so tests and users have something real to profile. Run it, then, while it trains:

    python examples/profiler_server_job.py --port 6009 --seconds 60
    tuiprof capture localhost:6009 --duration-ms 2000 --logdir /tmp/tb

The profiler server binds all interfaces (gRPC's default); run it inside a private network
namespace (`unshare -n`) or on a trusted network. It prints `READY <port>` on stdout once the
server is up and the first step has run, so a caller knows capture can start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True, help="profiler server port")
    p.add_argument("--seconds", type=float, default=60.0, help="train for this long, then exit")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--idle", action="store_true", help="start the server but never train")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import numpy as np
    import tensorflow as tf

    tf.profiler.experimental.server.start(args.port)
    if args.idle:
        print(f"READY {args.port}", flush=True)
        time.sleep(args.seconds)
        return 0

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 32)).astype("float32")
    y = rng.integers(0, 10, size=4096).astype("int64")
    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(4096)
        .batch(args.batch_size)
        .repeat()
        .prefetch(2)
    )
    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(32,)),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(ds, steps_per_epoch=1, epochs=1, verbose=0)  # build and trace once
    print(f"READY {args.port}", flush=True)
    deadline = time.monotonic() + args.seconds
    epochs = 0
    while time.monotonic() < deadline:
        model.fit(ds, steps_per_epoch=20, epochs=1, verbose=0)
        epochs += 1
    print(f"DONE {epochs} epochs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
