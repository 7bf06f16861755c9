"""Where a session's cached summary lives: its key and path, apart from the cache's encoding.

The launcher asks whether the cache holds the first session's summary before it starts an
analysis it would not need; this module imports neither msgspec nor the model (~20 ms), so the
answer comes before Textual's import starts. `profiles.cache` re-exports these names.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tui_prof import __version__

if TYPE_CHECKING:
    from tui_prof.profiles.discover import Session

# 2: top_ops holds every op (the diff needs them all), no longer the first 50.
# 3: device utilisation, XLA programs, the precision's source.
# 4: kernels carry their launch shape (grid, block).
# 5: names made printable (tui_prof.printable) before they are stored.
# 6: efficiency (FLOPs, MFU) and memory; ops carry their FLOPs and bytes.
# 7: PyTorch traces: the plugin's GPU figures (gpu_metrics).
# 8: the verdict's parts (dominant, secondary, start-up) and start-up calls.
# 9: stored as msgspec MessagePack of the model's types (no hand-written mirror).
# 10: float32 math that ran as TF32 counts against the TF32 peak; FFMA xmma kernels are not Tensor Cores.
# 11: XSpace GPU FLOPs counted from the profile's own HLO too (library GEMM calls).
# 12: Precision.measured (a 16-bit share that rests on no types is not shown as one).
# 13: several hosts' devices named "host · device"; a TPU's device compute from its "XLA Ops" lines.
# 14: the timeline's XSpace host events that launched device work are kernel launch.
# 15: the matrix-unit tip on units that run no 32-bit format (a V100) says to go 16-bit.
# 16: the CPU-job and collectives tips no longer say "dominates" (they also come as second tips).
# 17: the 16-bit recipe is said once (the matrix-unit tip points at it); PyTorch's launch tip reworded.
# 18: PyTorch's copies tip no longer says memcpy/memset "take the step" (also a second tip).
# 19: the all-others tip points at tuiprof's Timeline where the profile holds events.
# 20: tips that give the 16-bit recipe to a partly 16-bit profile say what its 32-bit rest often is.
# 21: after the device-compute tip the matrix-unit tip points at it (no TF32, shapes twice).
SCHEMA = 21
SUFFIX = ".msgpack"


def cache_dir() -> Path:
    if os.environ.get("TUIPROF_CACHE_DIR"):
        return Path(os.environ["TUIPROF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tuiprof"


def cache_key(session: Session, variant: str = "") -> str:
    """Changes whenever a host file, tuiprof's version or the analysis variant changes."""
    h = hashlib.sha256(f"{SCHEMA}|{__version__}|{variant}".encode())
    for host in sorted(session.hosts, key=lambda x: str(x.path)):
        for path in (host.path, *host.extra):
            st = path.stat()
            h.update(b"|" + os.fsencode(os.path.abspath(path)))
            h.update(f"|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def cache_path(key: str) -> Path:
    return cache_dir() / f"{key}{SUFFIX}"
