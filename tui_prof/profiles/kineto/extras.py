"""The efficiency pass over a Kineto trace's batches: FLOP counts and memory events.

Contract: `Extras.add(batch)` beside `Collector.add(batch)` for every batch the stream yields,
then `result(collector, steps)`. Kept apart from the collector (whose loop is the reader's hot
path) so each can change alone: this loop looks only at events with args and touches only ops
with shapes or FLOPs and `[memory]` events; their share of `tuiprof summary`'s time is measured
in benchmarks/efficiency_overhead.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tui_prof.profiles.kineto.collect import Collector
from tui_prof.profiles.kineto.events import Event, Kind, kind_of
from tui_prof.profiles.kineto.flop_counts import FlopCounter, FlopCounts
from tui_prof.profiles.kineto.memory import MemoryRecorder, RankMemory
from tui_prof.profiles.kineto.steps import Steps

MEMORY_EVENT = "[memory]"


@dataclass
class RankExtras:
    flops: FlopCounts
    memory: RankMemory | None


@dataclass
class Extras:
    flops: FlopCounter = field(default_factory=FlopCounter)
    memory: MemoryRecorder = field(default_factory=MemoryRecorder)
    _ops: dict[str, bool] = field(default_factory=dict)  # category → is an op
    _names: dict[str, bool] = field(default_factory=dict)  # op name → FlopCounter wants it

    def add(self, batch: Sequence[Event]) -> None:
        self.take(self.pick(batch))

    def pick(self, batch: Sequence[Event]) -> list[Event]:
        """The events of a batch this pass uses, in order (a worker process picks them:
        workers.py): timed ops with a profiler FLOP count or shapes of a modelled op, and
        memory events."""
        ops, names, counter = self._ops, self._names, self.flops
        out: list[Event] = []
        for e in batch:
            a = e.args
            if a is None:
                continue
            if e.ph == "X":
                if a.flops is None:  # else the profiler counted it (with_flops)
                    if not a.input_dims:
                        continue
                    wanted = names.get(e.name)
                    if wanted is None:
                        wanted = names[e.name] = counter.wants(e.name)
                    if not wanted:
                        continue
                is_op = ops.get(e.cat)
                if is_op is None:
                    is_op = ops[e.cat] = kind_of(e.cat) is Kind.OP
                ts, dur = e.ts, e.dur
                if is_op and ts is not None and dur is not None and ts == ts and dur == dur:
                    out.append(e)
            elif e.name == MEMORY_EVENT:
                out.append(e)
        return out

    def take(self, picked: Sequence[Event]) -> None:
        """Fold in what `pick` chose."""
        counter, memory = self.flops, self.memory
        for e in picked:
            a, ts, dur = e.args, e.ts, e.dur
            assert a is not None
            if e.ph != "X":
                memory.add(e, a)
            elif ts is not None and dur is not None:
                counter.add(e, a, ts, ts + max(dur, 0.0))

    def result(self, c: Collector, steps: Steps | None) -> RankExtras:
        spans = steps.spans if steps else []
        numbers = steps.numbers if steps else []
        return RankExtras(self.flops.result(spans, numbers), self.memory.result(c, spans, numbers))
