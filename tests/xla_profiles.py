"""XSpace profiles built at test time, event by event, for cases no public file covers exactly.

They use the same message classes tuiprof reads with (profiles/xplane/proto.py, which mirror
tsl's xplane.proto field for field), so what is written is what a profiler would write: planes
named as XLA names them, events with metadata ids, stats by metadata id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tui_prof.profiles.xplane.proto import XSpace

US = 1_000_000  # picoseconds per microsecond
# An event on a line: (name, start µs, duration µs, stats).
Event = tuple[str, float, float, Mapping[str, int | str]]


class Plane:
    """One XPlane being written: interns event and stat names, adds lines of events."""

    def __init__(self, msg: Any, stats: dict[str, int | str | bytes] | None = None) -> None:
        self.msg = msg
        self._events: dict[str, int] = {}
        self._stats: dict[str, int] = {}
        for name, value in (stats or {}).items():
            self._stat(self.msg.stats.add(metadata_id=self.stat_id(name)), value)

    def event_id(self, name: str) -> int:
        if name not in self._events:
            k = len(self._events) + 1
            self._events[name] = k
            self.msg.event_metadata[k].id = k
            self.msg.event_metadata[k].name = name
        return self._events[name]

    def stat_id(self, name: str) -> int:
        if name not in self._stats:
            k = len(self._stats) + 1
            self._stats[name] = k
            self.msg.stat_metadata[k].id = k
            self.msg.stat_metadata[k].name = name
        return self._stats[name]

    def event_stats(self, name: str, stats: dict[str, int | str]) -> None:
        """Stats of an event's metadata (what XLA puts there: `hlo_category`, …)."""
        meta = self.msg.event_metadata[self.event_id(name)]
        for sname, value in stats.items():
            self._stat(meta.stats.add(metadata_id=self.stat_id(sname)), value)

    @staticmethod
    def _stat(stat: Any, value: int | str | bytes) -> None:
        if isinstance(value, bytes):
            stat.bytes_value = value
        elif isinstance(value, str):
            stat.str_value = value
        else:
            stat.int64_value = value

    def line(
        self,
        line_id: int,
        name: str,
        events: Sequence[Event],
    ) -> None:
        """Events as (name, start µs, duration µs, stats), on one thread/stream."""
        line = self.msg.lines.add(id=line_id, name=name, display_name=name, timestamp_ns=0)
        for ev_name, start_us, dur_us, stats in events:
            e = line.events.add(
                metadata_id=self.event_id(ev_name),
                offset_ps=round(start_us * US),
                duration_ps=round(dur_us * US),
            )
            for sname, value in stats.items():
                self._stat(e.stats.add(metadata_id=self.stat_id(sname)), value)


class Space:
    """An XSpace being written; `save` puts it where a profiler would (logdir layout)."""

    def __init__(self, hostname: str = "testhost") -> None:
        self.msg = XSpace()
        self.msg.hostnames.append(hostname)
        self.hostname = hostname

    def plane(
        self, plane_id: int, name: str, stats: dict[str, int | str | bytes] | None = None
    ) -> Plane:
        return Plane(self.msg.planes.add(id=plane_id, name=name), stats)

    def task_environment(self, start_us: float, stop_us: float) -> None:
        """The profile's span as the profiler records it (nanoseconds)."""
        self.plane(
            99,
            "Task Environment",
            {
                "profile_start_time": round(start_us * 1000),
                "profile_stop_time": round(stop_us * 1000),
            },
        )

    def save(self, logdir: Path, session: str = "s1") -> Path:
        d = logdir / "plugins" / "profile" / session
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{self.hostname}.xplane.pb"
        path.write_bytes(self.msg.SerializeToString())
        return d


def damaged_line(src: Path) -> bytes:
    """A profile's bytes with its largest event line corrupted in the middle (the file's layout,
    its planes and their metadata stay intact: only decoding that line can find the damage)."""
    from tui_prof.profiles.xplane.xspace import XSpaceFile

    with XSpaceFile(src) as space:
        a, b = max((s for p in space.planes for s in p.line_spans), key=lambda s: s[1] - s[0])
    out = bytearray(src.read_bytes())
    mid = (a + b) // 2
    out[mid : mid + 8] = b"\xff" * 8  # an 8-byte run of 0xff: no valid varint or tag
    return bytes(out)


# --- JAX-like jobs, built event by event ------------------------------------------------------


def gpu_job(logdir: Path) -> Path:
    """Six calls of a jitted train step (two kernels each, launched inside XLA's execution on the
    host), a small metrics program after each, and one long init program (more device time than
    all the steps, but run once: not a step); a second GPU stays idle."""
    space = Space()
    space.task_environment(0, 1000)
    host = space.plane(0, "/host:CPU")
    python: list[Event] = []
    launches: list[Event] = []
    gpu0: list[Event] = []
    for k in range(6):
        t = 100.0 * k
        python += [
            ("PjitFunction(train_step)", t, 20, {}),
            ("jit_train_step:XLA GPU module", t + 5, 10, {}),
            ("PjitFunction(metrics)", t + 30, 5, {}),
            ("jit_metrics:XLA GPU module", t + 31, 3, {}),
        ]
        launches += [
            ("cuLaunchKernel", t + 6, 1, {"correlation_id": 10 * k + 1}),
            ("cuLaunchKernel", t + 8, 1, {"correlation_id": 10 * k + 2}),
            ("cuLaunchKernel", t + 32, 1, {"correlation_id": 10 * k + 3}),
        ]
        gpu0 += [
            ("gemm_bf16_kernel", t + 40, 20, {"correlation_id": 10 * k + 1}),
            ("reduce_f32", t + 65, 10, {"correlation_id": 10 * k + 2}),
            ("tiny", t + 80, 2, {"correlation_id": 10 * k + 3}),
        ]
    python += [("PjitFunction(init)", 700, 20, {}), ("jit_init:XLA GPU module", 705, 10, {})]
    launches.append(("cuLaunchKernel", 706, 1, {"correlation_id": 9001}))
    gpu0.append(("init_f32", 710, 250, {"correlation_id": 9001}))
    host.line(1, "python", python)
    host.line(77, "Host Threads/77", launches)
    space.plane(1, "/device:GPU:0", {"device_vendor": "Nvidia"}).line(
        10, "Stream #10(Kernel)", gpu0
    )
    space.plane(2, "/device:GPU:1", {"device_vendor": "Nvidia"})
    return space.save(logdir)


def tpu_job(logdir: Path) -> Path:
    """Two TPU cores running a jitted `f` four times: a module event per run, ops inside it."""
    space = Space("tpuhost")
    space.task_environment(0, 1000)
    host = space.plane(0, "/host:CPU")
    host.line(1, "main", [("PjitFunction(f)", 200.0 * k, 5, {}) for k in range(4)])
    for core in range(2):
        tpu = space.plane(10 + core, f"/device:TPU:{core}", {"device_type_string": "TPU v6 Lite"})
        tpu.line(2, "XLA Modules", [("jit_f(42)", 200.0 * k + 10, 100, {}) for k in range(4)])
        ops: list[Event] = []
        for k in range(4):
            t = 200.0 * k + 10
            ops += [
                ("%fusion = bf16[1024]{0} fusion(bf16[1024]{0} %p)", t + 5, 40, {}),
                ("%all-reduce = f32[8]{0} all-reduce(f32[8]{0} %x)", t + 50, 10, {}),
            ]
        tpu.line(3, "XLA Ops", ops)
        tpu.line(6, "XLA TraceMe", [("dependency-wait", 200.0 * k + 60, 50, {}) for k in range(4)])
    return space.save(logdir)


def tpu_steps_job(logdir: Path, hosts: int = 1, host_markers: bool = True) -> list[Path]:
    """A JAX training loop on two TPU cores per host, as XProf reads a TPU profile: the host's
    `StepTraceAnnotation("train", step_num=k)` around each call of the train step; per core a
    "Steps" line (a step marker per step, with its `group_id`), "XLA Modules" (the program's
    runs), "XLA Ops" (its HLO ops, with the step's `group_id`, input shapes in their names) and
    "XLA TraceMe"; no launch ids (TPU device events have none). Step 2 is slow (a long
    all-reduce on core 1). One session directory per host file (all in one session dir).
    `host_markers` False: a loop without StepTraceAnnotation (the cores' "Steps" lines alone)."""
    out = []
    for h in range(hosts):
        space = Space(f"tpuhost{h}")
        space.task_environment(0, 1000)
        host = space.plane(0, "/host:CPU")
        main: list[Event] = []
        for k in range(4):
            t = 200.0 * k
            if host_markers:
                main.append(("train", t, 150, {"step_num": k, "_r": 1}))
            main.append(("PjitFunction(train_step)", t + 2, 8, {}))
        host.line(1, "main", main)
        for core in range(2):
            tpu = space.plane(
                10 + core, f"/device:TPU:{core}", {"device_type_string": "TPU v6 Lite"}
            )
            steps: list[Event] = []
            modules: list[Event] = []
            ops: list[Event] = []
            traceme: list[Event] = []
            for k in range(4):
                t = 200.0 * k + 12
                reduce_us = 60.0 if (k == 2 and core == 1) else 10.0
                run = 5 + 40 + 5 + reduce_us
                steps.append((str(k), t, run + 2, {"group_id": k}))
                modules.append(("jit_train_step(42)", t + 1, run, {"group_id": k}))
                ops += [
                    (
                        "%fusion = bf16[1024]{0} fusion(bf16[1024]{0} %p)",
                        t + 6,
                        40,
                        {"group_id": k},
                    ),
                    (
                        "%all-reduce = f32[8]{0} all-reduce(f32[8]{0} %x)",
                        t + 51,
                        reduce_us,
                        {"group_id": k},
                    ),
                ]
                traceme.append(("dependency-wait", t + 48, 3, {}))
            tpu.line(1, "Steps", steps)
            tpu.line(2, "XLA Modules", modules)
            tpu.line(3, "XLA Ops", ops)
            tpu.line(6, "XLA TraceMe", traceme)
        out.append(space.save(logdir))
    return out
