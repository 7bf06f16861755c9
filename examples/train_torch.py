"""Train a small CNN on scikit-learn's digits with PyTorch and profile a few steps.

The PyTorch twin of examples/train_cnn.py: the same model (two 3x3 conv layers, a dense head), the
same data (1,797 8x8 images shipped inside scikit-learn, nothing downloads) and the same split and
dataset fingerprint. ``--precision autocast`` runs the forward pass under ``torch.autocast``:
bfloat16 on a CPU, float16 on a CUDA GPU (with a GradScaler, as float16 needs). The device is a
CUDA GPU where torch sees one, else the CPU (``--device`` to choose). Steps 5-9 are profiled with
``torch.profiler`` by tuiprof's one-line helper, into ``$TUIPROF_RUN_DIR`` under ``tuiprof run``,
else into ``--logdir``; the trace is Kineto JSON (``*.pt.trace.json.gz``).

    python examples/train_torch.py --precision autocast --logdir logs/torch_autocast
    tuiprof logs/torch_autocast
    tuiprof run examples/torch_autocast.toml     # float32 vs autocast, 5 repeats each

Needs torch, numpy and scikit-learn only (``pip install -e ".[torch]"``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from tui_prof.instrument.torch import torch_profiler
except ImportError:  # run from a clone without installing tuiprof
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tui_prof.instrument.torch import torch_profiler

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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--precision",
        choices=["float32", "autocast"],
        default="float32",
        help="autocast: torch.autocast with bfloat16 on a CPU, float16 (and a GradScaler) on CUDA",
    )
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="auto: CUDA where torch sees a GPU, else the CPU",
    )
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--width",
        type=int,
        default=1,
        help="channel multiplier of the conv layers (1: 32 and 64 channels)",
    )
    p.add_argument(
        "--image-size",
        type=int,
        default=8,
        help="upsample the 8x8 digits to this size (bilinear) for a heavier, GPU-sized job",
    )
    p.add_argument(
        "--profile-steps",
        type=parse_steps,
        default="5,9",
        help="first,last global step (1-based) to profile; '0' disables profiling",
    )
    p.add_argument(
        "--logdir",
        default=os.environ.get("TUIPROF_RUN_DIR") or "logs/torch",
        help="where the trace goes (default: $TUIPROF_RUN_DIR, else ./logs/torch)",
    )
    p.add_argument(
        "--profile-memory",
        action="store_true",
        help="record allocations too (torch.profiler's profile_memory: [memory] events)",
    )
    p.add_argument(
        "--with-flops",
        action="store_true",
        help="torch.profiler's with_flops=True (it records shapes; torch 2.x keeps its own FLOP "
        "counts in memory, not in the trace file, so tuiprof counts from the shapes)",
    )
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def load_data(
    seed: int, image_size: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """The digits as train_cnn.py splits them, and the same fingerprint (same bytes: one channel),
    upsampled to image_size x image_size where asked (the fingerprint is of the 8x8 data)."""
    digits = load_digits()
    x = (digits.images / 16.0).astype("float32")[:, None, :, :]  # (1797, 1, 8, 8)
    y = digits.target.astype("int32")
    fingerprint = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()[:16]
    if image_size != 8:
        big = nn.functional.interpolate(
            torch.from_numpy(x), size=(image_size, image_size), mode="bilinear"
        )
        x = big.numpy()
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:], fingerprint


def build_model(width: int = 1, image_size: int = 8) -> nn.Module:
    """Two conv layers and a dense head, as in train_cnn.py (logits out); `width` multiplies the
    channels and `image_size` is the input's side, so a GPU has real work to do."""
    c1, c2, side = 32 * width, 64 * width, image_size // 2
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(c1, c2, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(c2 * side * side, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def pick_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA GPU")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def autocast_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on CPUs (float16 is slow there), float16 on CUDA GPUs (Tensor Cores)."""
    return torch.float16 if device.type == "cuda" else torch.bfloat16


def loader(
    x: np.ndarray, y: np.ndarray, batch_size: int, seed: int, train: bool, cuda: bool
) -> DataLoader[tuple[torch.Tensor, ...]]:
    data = TensorDataset(torch.from_numpy(x), torch.from_numpy(y.astype("int64")))
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        data, batch_size=batch_size, shuffle=train, generator=generator, pin_memory=cuda
    )


def evaluate(
    model: nn.Module,
    data: DataLoader[tuple[torch.Tensor, ...]],
    device: torch.device,
    cast: Callable[[], AbstractContextManager[object]],
) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in data:
            images, labels = images.to(device), labels.to(device)
            with cast():
                logits = model(images)
            correct += int((logits.argmax(1) == labels).sum())
            total += len(labels)
    model.train()
    return correct / max(total, 1)


def main(argv: list[str] | None = None) -> int:
    """Train, profile steps first..last, print the accuracy and report metrics to tuiprof."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = pick_device(args.device)
    cuda = device.type == "cuda"
    if args.width < 1 or not 8 <= args.image_size <= 256:
        raise SystemExit("--width must be at least 1 and --image-size 8 to 256")
    x_train, y_train, x_val, y_val, fingerprint = load_data(args.seed, args.image_size)
    train_data = loader(x_train, y_train, args.batch_size, args.seed, True, cuda)
    val_data = loader(x_val, y_val, args.batch_size, args.seed, False, cuda)

    model = build_model(args.width, args.image_size).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    autocast = args.precision == "autocast"
    dtype = autocast_dtype(device) if autocast else torch.float32
    scaler = torch.amp.GradScaler("cuda", enabled=autocast and dtype == torch.float16)
    print(f"device {device}, precision {args.precision} ({str(dtype).removeprefix('torch.')})")

    def cast() -> AbstractContextManager[object]:
        return torch.autocast(device.type, dtype=dtype) if autocast else nullcontext()

    first, last = args.profile_steps or (5, 9)
    warmup = 1 if first >= 2 else 0  # one step to settle the profiler where there is room
    start = time.perf_counter()
    # The one line: profile steps first..last into the logdir ($TUIPROF_RUN_DIR under tuiprof)
    # and report run information, epochs and step time to tuiprof.
    with torch_profiler(
        wait=first - 1 - warmup,
        warmup=warmup,
        active=last - first + 1,
        logdir=args.logdir,
        profile=args.profile_steps is not None,
        profile_memory=args.profile_memory,
        with_flops=args.with_flops,
        epochs=args.epochs,
        batch_size=args.batch_size,
        width=args.width,
        image_size=args.image_size,
        dataset=DATASET,
        dataset_fingerprint=fingerprint,
        precision=args.precision,
        autocast_dtype=str(dtype).removeprefix("torch."),
        device=device.type,
    ) as prof:
        for epoch in range(args.epochs):
            correct = seen = 0
            loss = torch.zeros(())
            for images, labels in train_data:
                images = images.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)
                with cast():
                    logits = model(images)
                    loss = loss_fn(logits, labels)
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                correct += int((logits.argmax(1) == labels).sum())
                seen += len(labels)
                prof.step()
            val_accuracy = evaluate(model, val_data, device, cast)
            accuracy = correct / max(seen, 1)
            print(
                f"epoch {epoch + 1}/{args.epochs}: loss {float(loss.detach()):.4f} "
                f"accuracy {accuracy:.4f} val_accuracy {val_accuracy:.4f}",
                flush=True,
            )
            last_loss = float(loss.detach())
            prof.epoch_end(epoch, loss=last_loss, accuracy=accuracy, val_accuracy=val_accuracy)
        prof.report(final_val_accuracy=val_accuracy)
    train_time = time.perf_counter() - start
    where = f", trace in {args.logdir}" if args.profile_steps else ""
    print(f"final val_accuracy {val_accuracy:.4f}, train time {train_time:.2f} s{where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
