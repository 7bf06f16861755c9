"""The timeline's data: per-track sorted numpy arrays for a whole session, and one step cut out.

Why arrays: a large profile has millions of events; a step is found with `searchsorted` on each
track's sorted starts, so a step or a zoom never walks the events one by one in Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tui_prof.model import CATEGORIES, ProfileError
from tui_prof.printable import printable
from tui_prof.profiles.timeline import nesting

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int32]
CATEGORY_CODE: dict[str, int] = {c: i for i, c in enumerate(CATEGORIES)}


class NoEvents(ProfileError):
    """A session whose files keep no events (older TensorBoard tool files)."""


@dataclass(frozen=True)
class Track:
    """One host thread or device stream: events sorted by start (µs), their name ids and
    category codes (index into model.CATEGORIES)."""

    name: str
    kind: str  # "host" or "device"
    group: str  # the host or device it belongs to, for grouping
    start: Floats
    end: Floats
    nid: Ints
    cat: npt.NDArray[np.int8]
    # The longest event: events starting this long before a window can still reach into it.
    longest: float = 0.0
    # Launch ids linking a runtime call and the kernel or copy it started (Kineto correlation
    # ids, XSpace correlation_id stats); -1 where an event has none. Empty: none recorded.
    corr: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Each event's parent's category (nesting.py; -1: none), so the innermost event wins a cell.
    pcat: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    # Shapes and dtypes where recorded: ids into Timeline.infos (-1: none). Empty: none at all.
    info: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, dtype=np.int32))

    def cut(self, w: slice | npt.NDArray[np.bool_], **times: Floats) -> Track:
        """The events selected by `w` (a slice or mask of this track's), with new times."""

        def sub(a: Any) -> Any:
            return a[w] if len(a) else a

        return Track(
            self.name,
            self.kind,
            self.group,
            times.get("start", self.start[w]),
            times.get("end", self.end[w]),
            self.nid[w],
            self.cat[w],
            self.longest,
            sub(self.corr),
            sub(self.pcat),
            sub(self.info),
        )

    def window(self, lo: float, hi: float) -> slice:
        """The index range of events that may overlap [lo, hi] (sorted starts)."""
        a = int(np.searchsorted(self.start, lo - self.longest, side="left"))
        b = int(np.searchsorted(self.start, hi, side="left"))
        return slice(a, b)


def make_track(
    name: str,
    kind: str,
    group: str,
    start: Floats,
    end: Floats,
    nid: Ints,
    cat: Any,
    corr: Any = None,
    info: Any = None,
    pcat: Any = None,
) -> Track:
    """A track from unsorted events; `pcat` given (merged tracks) keeps each event's own
    parent's category, else nesting is found on this track."""
    # Each column is put in order and its unsorted copy let go before the next (a caller that
    # passes its only reference frees it here: a large track's build holds few copies at once).
    order = nesting.order(start, end)
    s = start[order]
    del start
    e = end[order]
    del end
    c = np.asarray(cat)[order].astype(np.int8)
    del cat
    ids = nid[order].astype(np.int32)
    del nid
    links = np.zeros(0, dtype=np.int64) if corr is None else np.asarray(corr, np.int64)[order]
    del corr
    shapes = np.zeros(0, dtype=np.int32) if info is None else np.asarray(info, np.int32)[order]
    del info
    pc = None if pcat is None else np.asarray(pcat, np.int8)[order]
    del order, pcat
    longest = float(np.subtract(e, s).max()) if len(s) else 0.0
    if pc is None:
        pc = nesting.parent_categories(s, e, c)
    return Track(printable(name), kind, printable(group), s, e, ids, c, longest, links, pc, shapes)


@dataclass(frozen=True)
class StepTimeline:
    """One step: tracks with events clipped to it, times in µs from the step's start."""

    step: int
    duration_us: float
    tracks: tuple[Track, ...]
    names: list[str]  # by name id, already printable
    source: str = ""  # which rank or host the step is from, where there are several
    infos: list[str] = field(default_factory=list)  # by info id: shapes and dtypes, printable

    @property
    def end_us(self) -> float:
        return self.duration_us

    def event_name(self, nid: int) -> str:
        return self.names[nid] if 0 <= nid < len(self.names) else "?"

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: step, start_us, end_us, tracks[name, kind, events[...]]; events
        add `inputs` (shapes and dtypes, XSpace op names) and `launch_id` where recorded."""
        tracks = []
        for k, t in enumerate(self.tracks):
            events = []
            for i, (s, e, n, c) in enumerate(zip(t.start, t.end, t.nid, t.cat, strict=True)):
                ev: dict[str, Any] = {
                    "name": self.event_name(int(n)),
                    "start_us": float(s),
                    "dur_us": float(e - s),
                    "category": CATEGORIES[int(c)],
                }
                info = self.info(k, i)
                if info:
                    ev["inputs"] = info
                if len(t.corr) and t.corr[i] >= 0:
                    ev["launch_id"] = int(t.corr[i])
                events.append(ev)
            tracks.append({"name": t.name, "kind": t.kind, "group": t.group, "events": events})
        return {
            "step": self.step,
            "start_us": 0.0,
            "end_us": self.duration_us,
            "source": self.source,
            "tracks": tracks,
        }

    def collapsed(self, groups: set[str]) -> StepTimeline:
        """The step with each named group's tracks merged into one row (a device's streams as
        one device); the order of the rows is kept."""
        if not groups:
            return self
        rows: list[Track] = []
        done: set[str] = set()
        for t in self.tracks:
            if t.group not in groups:
                rows.append(t)
            elif t.group not in done:
                done.add(t.group)
                members = [m for m in self.tracks if m.group == t.group]
                corr = [m.corr if len(m.corr) else np.full(len(m.start), -1) for m in members]
                info = [m.info if len(m.info) else np.full(len(m.start), -1) for m in members]
                pcat = [m.pcat if len(m.pcat) else np.full(len(m.start), -1) for m in members]
                rows.append(
                    make_track(
                        f"▸ {t.group} ({len(members)})",
                        t.kind,
                        t.group,
                        np.concatenate([m.start for m in members]),
                        np.concatenate([m.end for m in members]),
                        np.concatenate([m.nid for m in members]),
                        np.concatenate([m.cat for m in members]),
                        np.concatenate(corr),
                        np.concatenate(info),
                        np.concatenate(pcat),
                    )
                )
        return StepTimeline(
            self.step, self.duration_us, tuple(rows), self.names, self.source, self.infos
        )

    def _with_ids(self, ids: npt.NDArray[np.int64], but: int) -> list[tuple[int, int]]:
        """(track, event) of every event on other tracks carrying one of these launch ids, in
        time order."""
        out: list[tuple[int, int]] = []
        for k, other in enumerate(self.tracks):
            if k != but and len(other.corr) and len(ids):
                out += [(k, int(j)) for j in np.flatnonzero(np.isin(other.corr, ids))]
        return sorted(out, key=lambda kj: float(self.tracks[kj[0]].start[kj[1]]))

    def linked(self, track: int, event: int) -> list[tuple[int, int]]:
        """The events sharing this one's launch id on other tracks: the kernels or copies a
        runtime call started (a graph launch starts many), or the call that started a kernel;
        empty if none in this step."""
        t = self.tracks[track]
        if not len(t.corr) or t.corr[event] < 0:
            return []
        return self._with_ids(t.corr[event : event + 1], track)

    def launched(self, track: int, event: int) -> list[tuple[int, int]]:
        """What a host event started on a device, in time order: its own launch's kernels, or
        those of the runtime calls inside it (an op's)."""
        t = self.tracks[track]
        if t.kind != "host" or not len(t.corr):
            return []
        if t.corr[event] >= 0:
            return self.linked(track, event)
        w = nesting.inside(t.start, t.end, event)
        ids = t.corr[w][(t.corr[w] >= 0) & (t.end[w] <= t.end[event])]
        return [kj for kj in self._with_ids(ids, track) if self.tracks[kj[0]].kind == "device"]

    def launched_by(self, track: int, event: int) -> tuple[tuple[int, int], int | None] | None:
        """For a device event: the runtime call that started it, and the op that made that
        call (the event enclosing it on its thread), where recorded."""
        if self.tracks[track].kind != "device":
            return None
        calls = self.linked(track, event)
        if not calls:
            return None
        call = calls[0]
        h = self.tracks[call[0]]
        return call, nesting.enclosing(h.start, h.end, h.longest, call[1])

    def partner(self, track: int, event: int) -> tuple[int, int] | None:
        """Where `p` goes: a device event's launching call; a host event's (first) kernel."""
        found = (
            self.linked(track, event)
            if self.tracks[track].kind == "device"
            else self.launched(track, event)
        )
        return found[0] if found else None

    def info(self, track: int, event: int) -> str:
        """The event's recorded shapes and dtypes (and op names for XSpace), '' where none."""
        t = self.tracks[track]
        k = int(t.info[event]) if len(t.info) else -1
        return self.infos[k] if 0 <= k < len(self.infos) else ""

    def busy_us(self, track: Track) -> float:
        """Time the track is busy (the union of its events), µs."""
        if not len(track.start):
            return 0.0
        reach = np.maximum.accumulate(track.end)
        gaps = np.clip(track.start[1:] - reach[:-1], 0.0, None)
        return float(reach[-1] - track.start[0] - gaps.sum())


@dataclass(frozen=True)
class StepSpan:
    """Where one step lies in a source's clock (µs, as in the file)."""

    number: int
    start: float
    end: float


@dataclass
class Source:
    """One rank's trace or one host's XSpace: its tracks over the whole profile and its steps."""

    name: str
    tracks: list[Track]
    steps: list[StepSpan]


@dataclass
class Timeline:
    """A session's events, by source, and the names they refer to."""

    names: list[str]
    sources: list[Source] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)  # shapes and dtypes by info id, printable

    def step_numbers(self) -> list[int]:
        """Step numbers every source has, in order (the summary's rule for several ranks)."""
        sets = [{s.number for s in src.steps} for src in self.sources if src.steps]
        if not sets:
            return []
        return sorted(set.intersection(*sets))

    def renumber(self, steps: list[tuple[int, float]]) -> bool:
        """Take the summary's step numbers where its steps are these, in order, with the same
        times (ms): TensorBoard's converter numbers from 0 what tuiprof's finder numbers by its
        markers. True where renumbered; else nothing changes."""
        mine = self.step_numbers()
        if len(mine) != len(steps) or [n for n, _ in steps] == mine:
            return False
        for own, (_, ms) in zip(mine, steps, strict=True):
            if abs(self.step_length_us(own) / 1000.0 - ms) > 1e-6 * max(ms, 1.0):
                return False
        to = {own: n for own, (n, _) in zip(mine, steps, strict=True)}
        for src in self.sources:
            src.steps = [
                StepSpan(to[s.number], s.start, s.end) for s in src.steps if s.number in to
            ]
        return True

    def source_names(self) -> list[str]:
        return [src.name for src in self.sources]

    def step_length_us(self, number: int, source: str | None = None) -> float:
        """A step's length: its slowest source's, as the summary takes it, or `source`'s."""
        return max(
            (
                s.end - s.start
                for src in self.sources
                if source is None or src.name == source
                for s in src.steps
                if s.number == number
            ),
            default=0.0,
        )

    def slowest(self, source: str | None = None) -> int:
        nums = self.step_numbers()
        if not nums:
            raise ProfileError("the profile has no steps")
        return max(nums, key=lambda n: self.step_length_us(n, source))

    def median(self, source: str | None = None) -> int:
        nums = sorted(self.step_numbers(), key=lambda n: self.step_length_us(n, source))
        if not nums:
            raise ProfileError("the profile has no steps")
        return nums[(len(nums) - 1) // 2]

    def step(self, number: int, source: str | None = None) -> StepTimeline:
        """Step `number` from `source` (default: the source where it is slowest)."""
        found = [(src, s) for src in self.sources for s in src.steps if s.number == number]
        if source is not None:
            if source not in self.source_names():
                raise ProfileError(
                    f"no rank or host {source!r} here (have: {', '.join(self.source_names())})"
                )
            found = [f for f in found if f[0].name == source]
        if not found:
            nums = self.step_numbers()
            have = f"{nums[0]}..{nums[-1]}" if nums else "none"
            raise ProfileError(f"no step {number} in this profile (steps: {have})")
        src, span = max(found, key=lambda f: f[1].end - f[1].start)
        lo, hi = span.start, span.end
        tracks = []
        for t in src.tracks:
            w = t.window(lo, hi)
            s, e = t.start[w], t.end[w]
            keep = (e > lo) & (s < hi) | ((e == s) & (s >= lo) & (s < hi))
            if not keep.any():
                continue  # a thread or stream with nothing in this step
            tracks.append(
                t.cut(w).cut(
                    keep,
                    start=np.clip(s[keep], lo, hi) - lo,
                    end=np.clip(e[keep], lo, hi) - lo,
                )
            )
        label = src.name if len(self.sources) > 1 else ""
        return StepTimeline(number, hi - lo, tuple(tracks), self.names, label, self.infos)
