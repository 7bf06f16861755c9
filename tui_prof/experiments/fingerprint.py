"""The environment fingerprint of a run: what must match for two runs to be comparable.

Contract: `host_fingerprint()` describes this machine (GPU model, driver and CUDA version where
`nvidia-smi` exists, framework versions, host, CPU, Python) without importing any framework:
versions come from installed package metadata, so fingerprinting costs milliseconds, not the
seconds a TensorFlow import takes. `run_fingerprint()` adds what the job itself reported
(dataset fingerprint, epochs, batch size, and framework versions, which win over ours because
the job may run in another environment).
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any

from tui_prof.experiments.protocol import FINGERPRINT_KEYS

FRAMEWORKS = ("tensorflow", "tensorflow-cpu", "tf-nightly", "keras", "torch", "jax")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def framework_versions() -> dict[str, str]:
    """Installed versions of the frameworks jobs use, from package metadata (no imports)."""
    out: dict[str, str] = {}
    for name in FRAMEWORKS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def gpu_info(timeout_s: float = 10.0) -> dict[str, Any]:
    """GPU model, count, driver and CUDA version from nvidia-smi; empty values where it is absent."""
    empty: dict[str, Any] = {
        "gpu_model": None,
        "gpu_count": 0,
        "gpu_driver": None,
        "cuda_version": None,
    }
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return empty
    try:
        q = subprocess.run(
            [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        head = subprocess.run([exe], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return empty
    rows = [[c.strip() for c in line.split(",")] for line in q.stdout.splitlines() if line.strip()]
    if q.returncode != 0 or not rows:
        return empty
    models = sorted({r[0] for r in rows})
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", head.stdout)
    return {
        "gpu_model": " + ".join(models),
        "gpu_count": len(rows),
        "gpu_driver": rows[0][1] if len(rows[0]) > 1 else None,
        "gpu_memory": rows[0][2] if len(rows[0]) > 2 else None,
        "cuda_version": cuda.group(1) if cuda else None,
    }


@functools.lru_cache(maxsize=1)
def host_fingerprint() -> dict[str, Any]:
    """This machine, once per process (nvidia-smi takes a while on big GPU hosts)."""
    fp: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "framework_versions": framework_versions(),
    }
    fp.update(gpu_info())
    return fp


def run_fingerprint(host: dict[str, Any], reported: dict[str, Any]) -> dict[str, Any]:
    """The host fingerprint plus what the job reported about itself."""
    fp = dict(host)
    fp["framework_versions"] = dict(host.get("framework_versions", {}))
    for key in FINGERPRINT_KEYS:
        fp[key] = reported.get(key)
    versions = reported.get("framework_versions")
    if isinstance(versions, dict):
        fp["framework_versions"] = {str(k): str(v) for k, v in versions.items()}
    for key in ("gpu_model", "python_version"):
        if isinstance(reported.get(key), str):
            fp[key] = reported[key]
    fp["reported"] = dict(reported)  # everything else the job said about itself, e.g. its policy
    return fp
