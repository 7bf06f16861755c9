"""XSpace profiles built at test time, event by event, for cases no public file covers exactly.

They use the same message classes tuiprof reads with (profiles/xplane/proto.py, which mirror
tsl's xplane.proto field for field), so what is written is what a profiler would write: planes
named as XLA names them, events with metadata ids, stats by metadata id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui_prof.profiles.xplane.proto import XSpace

US = 1_000_000  # picoseconds per microsecond


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
        events: list[tuple[str, float, float, dict[str, int | str]]],
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
