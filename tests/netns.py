"""A private network namespace for tests whose servers bind every interface (profiler servers,
Ray): inside `unshare -n`, with loopback up, nothing they open is reachable from outside and
nothing they probe leaves the machine."""

from __future__ import annotations

import shutil
import subprocess


def unshare_prefix() -> list[str] | None:
    """How to get a private network namespace here (None: not permitted)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        try:
            ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return prefix
    return None
