"""The machine's state while a run ran, so a loaded or throttled run is named, not taken for a
slow variant (as pyperf warns that a benchmark seems unstable).

Contract: `MachineProbe.start()` just before a local run starts and `probe.finish(job_cpu_s)` just
after it ended return the run's `machine_state` (stored in its environment):
    load_avg            the 1-minute load average at the end
    cpus                cores of this machine
    others_cores        cores' worth of CPU used by processes other than the run and this tuiprof
                        over the run (all busy time in /proc/stat minus the run's own CPU time
                        and tuiprof's), e.g. 1.2
    cpu_governor        the CPU frequency governors in use, where /sys says ("performance")
    gpus                per GPU where nvidia-smi answers: SM clock and its maximum (MHz),
                        temperature (°C), active throttle reasons (nvidia-smi's names); else
                        where rocm-smi answers: shader clock (sclk, MHz), temperature (°C, edge
                        sensor, else junction) and performance level, no throttle reasons
                        (rocm-smi's JSON has none that can be trusted: some cards always set
                        the hotspot bit of `throttle_status`, so `throttle` is left out)
Reading it costs two small /proc reads and one nvidia-smi (or rocm-smi) call after the run (none
during it), so the observer stays out of the measurement. `noise_reasons(state)` says why a run
is suspect: "under load" when other processes used at least `LOADED_CORES` cores on average,
"GPU throttled (…)" when a GPU reports a power or thermal slowdown. Both are empty for runs
measured elsewhere (a cluster's node) or before tuiprof recorded this.
"""

from __future__ import annotations

import glob
import json
import os
import re
import resource
import shutil
import subprocess
import time
from typing import Any

LOADED_CORES = 0.25  # other processes busy a quarter of a core on average: the run shared the CPU
# nvidia-smi's throttle reasons that slow a GPU down (not "idle" or "applications clocks setting")
SLOWING = ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown",
           "hw_power_brake_slowdown")  # fmt: skip
_GPU_QUERY = "clocks.sm,clocks.max.sm,temperature.gpu," + ",".join(
    f"clocks_throttle_reasons.{r}" for r in SLOWING
)


def _busy_jiffies() -> int | None:
    """Busy time of all CPUs since boot, in clock ticks (everything but idle and iowait)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    guest = sum(fields[8:10]) if len(fields) > 9 else 0  # already counted in user and nice
    return sum(fields) - idle - guest


def _self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_governors() -> list[str]:
    """The distinct scaling governors of this machine's CPUs ([] where /sys does not say)."""
    found: set[str] = set()
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"):
        try:
            with open(path, encoding="ascii") as f:
                found.add(f.read().strip())
        except OSError:
            continue
    return sorted(found)


def gpu_state(timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """Clocks, temperature and active slowdowns per GPU from nvidia-smi, else clocks and
    temperature from rocm-smi ([] where neither answers)."""
    if shutil.which("nvidia-smi") is None:
        return rocm_state(timeout_s)
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={_GPU_QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3 + len(SLOWING):
            continue
        gpus.append(
            {
                "sm_clock_mhz": _num(cells[0]),
                "sm_clock_max_mhz": _num(cells[1]),
                "temperature_c": _num(cells[2]),
                "throttle": [r for r, c in zip(SLOWING, cells[3:], strict=True) if c == "Active"],
            }
        )
    return gpus


def rocm_state(timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """Shader clock, temperature and performance level per AMD GPU from rocm-smi ([] where it
    is absent or does not answer)."""
    if shutil.which("rocm-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["rocm-smi", "--showtemp", "--showclocks", "--showperflevel", "--json"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_rocm_smi(out)


def parse_rocm_smi(text: str) -> list[dict[str, Any]]:
    """rocm-smi's `--json` document ({"card0": {"sclk clock speed:": "(1700Mhz)",
    "Temperature (Sensor edge) (C)": "56.0", ...}, "system": {...}}) as one dict per card, in
    card order; [] for anything else (rocm-smi prints warnings as text where it cannot read)."""
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return []
    if not isinstance(doc, dict):
        return []
    cards = sorted(
        (int(m.group(1)), v)
        for k, v in doc.items()
        if (m := re.fullmatch(r"card(\d+)", k)) and isinstance(v, dict)
    )
    gpus = []
    for _, card in cards:
        fields = {str(k).lower(): str(v) for k, v in card.items()}
        clock = re.search(r"(\d+(?:\.\d+)?)\s*mhz", fields.get("sclk clock speed:", ""), re.I)
        temp = None
        for sensor in ("edge", "junction"):
            temp = _num(fields.get(f"temperature (sensor {sensor}) (c)", ""))
            if temp is not None:
                break
        gpu: dict[str, Any] = {
            "sm_clock_mhz": float(clock.group(1)) if clock else None,
            "temperature_c": temp,
        }
        level = fields.get("performance level")
        if level:
            gpu["perf_level"] = level
        gpus.append(gpu)
    return gpus


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class MachineProbe:
    """Taken around one local run: what else the machine did meanwhile."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._busy0 = _busy_jiffies()
        self._self0 = _self_cpu_s()

    @classmethod
    def start(cls) -> MachineProbe:
        return cls()

    def finish(self, job_cpu_s: float | None) -> dict[str, Any]:
        wall = time.monotonic() - self._t0
        busy1 = _busy_jiffies()
        state: dict[str, Any] = {"load_avg": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
        if self._busy0 is not None and busy1 is not None and wall > 0 and job_cpu_s is not None:
            busy_s = (busy1 - self._busy0) / os.sysconf("SC_CLK_TCK")
            others = busy_s - job_cpu_s - (_self_cpu_s() - self._self0)
            state["others_cores"] = round(max(0.0, others / wall), 3)
        governors = cpu_governors()
        if governors:
            state["cpu_governor"] = "/".join(governors)
        gpus = gpu_state()
        if gpus:
            state["gpus"] = gpus
        return state


def noise_reasons(state: dict[str, Any] | None) -> list[str]:
    """Why a run's timing is suspect, from its `machine_state` ([]: nothing known against it)."""
    if not isinstance(state, dict):
        return []
    reasons = []
    others = state.get("others_cores")
    if isinstance(others, int | float) and others >= LOADED_CORES:
        cpus = state.get("cpus")
        of = f" of {cpus}" if cpus else ""
        reasons.append(f"under load: other processes used {others:.1f}{of} cores")
    for i, gpu in enumerate(state.get("gpus") or ()):
        slow = gpu.get("throttle") if isinstance(gpu, dict) else None
        if slow:
            reasons.append(f"GPU {i} throttled ({', '.join(slow)})")
    return reasons
