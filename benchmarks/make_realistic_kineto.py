"""Make a large PyTorch (Kineto) trace that compresses like a real one: a real trace repeated.

The source trace's own text is repeated until the file reaches `--size-gb` of JSON: each copy's
events are the source's bytes with `ts` shifted by the trace's span + 1 ms per copy, correlation
ids, external ids and flow ids moved by a per-copy offset, and `ProfilerStep#N` renumbered, so
every copy's steps are steps of their own and every kernel still links to its launch. Metadata
(`M`) events and everything after them are written once. Output is gzip at level 6 (zlib's
default, what Python's and Kineto's writers produce with no level given; the A100 source
itself is level 6, 18.6:1), so the file compresses as traces from the field do (≈ 16–19:1, vs
the 100:1 of the synthetic file tests/unit/test_kineto_bad_input.py builds for the memory bound).

    python benchmarks/make_realistic_kineto.py --size-gb 2 --out /tmp/a100_2g.json.gz

Keep such files out of the repository (/tmp, or the git-ignored benchmarks/out/). A 2 GiB file
takes about a minute and a half here (gzip is most of it); memory stays near two copies' text.
"""

from __future__ import annotations

import argparse
import gzip
import math
import re
import sys
import threading
import time
import zlib
from pathlib import Path
from queue import Queue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO

SOURCE = REPO.parent / "shared" / "traces" / "kineto" / "a100_rank0.json.gz"
LEVEL = 6
# The fields each copy moves: times, ids that link events, step numbers.
FIELD = re.compile(
    rb'"(ts|correlation|External id|external id|id)": (-?\d+(?:\.\d+)?)|"name": "ProfilerStep#(\d+)"'
)
META = re.compile(rb'"ph"\s*:\s*"M"')
ARRAY = re.compile(rb'"traceEvents"\s*:\s*\[')


def _split(text: bytes) -> tuple[bytes, bytes, bytes]:
    """(head up to and with `[`, the timed events' text ending in `,`, the rest once)."""
    m = ARRAY.search(text)
    if m is None:
        sys.exit("the source has no traceEvents array")
    meta = META.search(text, m.end())
    start = text.rfind(b"{", m.end(), meta.start()) if meta else -1
    if start < 0:
        sys.exit("the source has no metadata (ph M) events after its timed ones")
    body = text[m.end() : start].rstrip()
    if not body.endswith(b","):
        sys.exit("the source's metadata events do not follow its timed events")
    return text[: m.end()], body + b"\n", text[start:]


class Template:
    """The events' text cut at every field a copy moves: literal pieces and the values between."""

    def __init__(self, body: bytes) -> None:
        self.pieces: list[bytes] = []
        self.slots: list[tuple[str, str]] = []  # (what, the value's text)
        at = 0
        for m in FIELD.finditer(body):
            if m.group(3) is not None:
                self.pieces.append(body[at : m.start(3)])
                self.slots.append(("step", m.group(3).decode()))
                at = m.end(3)
            else:
                self.pieces.append(body[at : m.start(2)])
                key = m.group(1).decode()
                self.slots.append(("ts" if key == "ts" else "id", m.group(2).decode()))
                at = m.end(2)
        self.pieces.append(body[at:])
        ts = [float(v) for k, v in self.slots if k == "ts"]
        steps = [int(v) for k, v in self.slots if k == "step"]
        ids = [abs(int(float(v))) for k, v in self.slots if k == "id"]
        # span of the events' starts; + the longest event's length is unknown here: + 1 s margin
        self.shift = math.ceil(max(ts) - min(ts)) + 1_000_000 if ts else 0
        self.id_shift = (max(ids) + 1) if ids else 0
        self.step_shift = (max(steps) - min(steps) + 1) if steps else 0

    def copy(self, k: int) -> bytes:
        """Copy k (0: the source's own text)."""
        if k == 0:
            vals = [v for _, v in self.slots]
        else:
            ts, ids, st = k * self.shift, k * self.id_shift, k * self.step_shift
            vals = [_moved(what, v, ts, ids, st) for what, v in self.slots]
        out = [self.pieces[0]]
        for v, piece in zip(vals, self.pieces[1:], strict=True):
            out.append(v.encode())
            out.append(piece)
        return b"".join(out)


def _moved(what: str, v: str, ts: int, ids: int, steps: int) -> str:
    if what == "ts":
        whole, dot, frac = v.partition(".")
        return f"{int(whole) + ts}{dot}{frac}"
    if what == "step":
        return str(int(v) + steps)
    n = int(v) if "." not in v else int(float(v))
    return str(n + ids) if n > 0 else v  # 0 and -1 mean "none"


def make(source: Path, out: Path, size: int) -> dict[str, float]:
    raw = source.read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    head, body, tail = _split(text)
    tpl = Template(body)
    copies = max(1, round((size - len(head) - len(tail)) / len(body)))
    comp = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)  # gzip container
    q: Queue[bytes | None] = Queue(maxsize=2)
    written = 0

    def writer() -> None:  # zlib releases the GIL: compress here while the next copy is made
        nonlocal written
        with out.open("wb") as f:
            while (data := q.get()) is not None:
                c = comp.compress(data)
                f.write(c)
                written += len(c)
            c = comp.flush()
            f.write(c)
            written += len(c)

    t = threading.Thread(target=writer)
    t.start()
    unpacked = 0
    q.put(head)
    for k in range(copies):
        chunk = tpl.copy(k)
        unpacked += len(chunk)
        q.put(chunk)
    q.put(tail)
    q.put(None)
    t.join()
    unpacked += len(head) + len(tail)
    return {
        "copies": copies,
        "unpacked": unpacked,
        "gzip": written,
        "steps": copies * tpl.step_shift,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--source", type=Path, default=SOURCE, help="a Kineto trace (.json or .gz)")
    ap.add_argument("--size-gb", type=float, default=2.0, help="JSON size to reach (GiB)")
    ap.add_argument("--out", type=Path, required=True, help="the .json.gz to write")
    args = ap.parse_args()
    if not args.source.exists():
        sys.exit(f"{args.source} not found: the shared public traces are needed")
    t = time.perf_counter()
    info = make(args.source, args.out, int(args.size_gb * 2**30))
    print(
        f"made {args.out}: {info['copies']} copies, {info['unpacked'] / 2**30:.2f} GiB JSON, "
        f"{info['gzip'] / 2**20:.0f} MB gzip ({info['unpacked'] / info['gzip']:.1f}:1), "
        f"in {time.perf_counter() - t:.0f} s"
    )


if __name__ == "__main__":
    main()
