"""Make a large PyTorch (Kineto) trace by replicating a real one's steps.

Every event of the source trace is written N times, each copy shifted by the trace's whole span
+ 1 ms, with its correlation ids, external ids, flow ids and ProfilerStep#N numbers moved per copy,
so each copy's steps are steps of their own and every kernel still links to its launch. Metadata
(`M`) events are written once. The default source is the A100 training trace in
../shared/traces/kineto (25 MB unpacked, today's categories) doubled: about 50 MB;
`--source plugin` uses the PyTorch TensorBoard plugin's own 2021 sample (35 MB unpacked).

    python benchmarks/make_large_kineto.py [--source a100|plugin] [--copies 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, REPO

SHARED = REPO.parent / "shared" / "traces"
SOURCES = {
    "a100": SHARED / "kineto" / "a100_rank0.json.gz",
    "plugin": SHARED / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz",
}
STEP = re.compile(r"^ProfilerStep#(\d+)$")
ID_KEYS = ("correlation", "External id", "external id")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def replicate(source: Path, out_dir: Path, copies: int) -> dict[str, Any]:
    doc = json.loads(gzip.decompress(source.read_bytes()))
    events = doc.pop("traceEvents")
    timed = [e for e in events if _number(e.get("ts")) and e.get("ph") != "M"]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + (e.get("dur") or 0) for e in timed if _number(e.get("dur") or 0))
    shift = (hi - lo) + 1000
    max_id = 1 + max(
        [
            int(e["args"][k])
            for e in events
            for k in ID_KEYS
            if _number((e.get("args") or {}).get(k))
        ]
        + [int(e["id"]) for e in events if _number(e.get("id"))]
        + [0]
    )
    steps = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    out: list[dict[str, Any]] = [e for e in events if e.get("ph") == "M"]
    for k in range(copies):
        for e in timed:
            c = dict(e)
            c["ts"] = e["ts"] + k * shift
            if k:
                args = dict(e.get("args") or {})
                for key in ID_KEYS:
                    if _number(args.get(key)) and args[key]:
                        args[key] = args[key] + k * max_id
                if "args" in e:
                    c["args"] = args
                if _number(e.get("id")):
                    c["id"] = e["id"] + k * max_id
                m = STEP.match(str(e.get("name", "")))
                if m:
                    c["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_span}"
            out.append(c)
    doc["traceEvents"] = out
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{source.name.split('.')[0]}_x{copies}.pt.trace.json"
    data = json.dumps(doc, indent=1).encode()
    path.write_bytes(data)
    return {"path": str(path), "bytes": len(data), "events": len(out), "copies": copies}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--source", choices=sorted(SOURCES), default="a100")
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT / "large_kineto")
    args = ap.parse_args()
    src = SOURCES[args.source]
    if not src.exists():
        sys.exit(f"{src} not found: the shared public traces are needed")
    t = time.perf_counter()
    info = replicate(src, args.out, args.copies)
    print(
        f"made {info['path']}: {info['bytes'] / 2**20:.0f} MB, {info['events']:,} events, "
        f"in {time.perf_counter() - t:.1f} s"
    )


if __name__ == "__main__":
    main()
