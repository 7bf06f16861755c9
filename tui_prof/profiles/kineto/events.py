"""The Kineto trace events tuiprof reads, as typed msgspec structs, and what each category means.

Contract: `Event`/`Args` name only the fields the reader uses; msgspec skips every other field
without building it, which is most of the speed and memory win over a dict per event (see
stream.py). `kind_of(cat)` maps every category spelling in the wild to one Kind: the 2021 names
(`Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset`, `DataLoader`), today's (`cpu_op`,
`cuda_runtime`, `kernel`, `gpu_memcpy`, …) and other back ends' runtimes (`*_runtime`,
`*_driver`: ROCm's `hip*` calls arrive as `cuda_runtime`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, ClassVar, Union, cast

import msgspec


class Args(msgspec.Struct, gc=False):
    """The `args` fields the reader uses (two spellings of the external id across versions)."""

    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    correlation: int | None = None
    device: int | None = None
    # a tuple: hashable, so the 16-bit test runs once per distinct signature (collect.py)
    input_type: tuple[str, ...] | None = msgspec.field(default=None, name="Input type")
    occupancy: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    blocks_per_sm: float | None = msgspec.field(default=None, name="blocks per SM")
    # Efficiency (kineto/flop_counts.py, kineto/memory.py). Raw: kept as their JSON text and
    # decoded (raw_list) only for the few ops with a FLOP model; building every op's nested
    # lists cost a quarter of the whole decode. Empty where absent.
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    flops: float | None = None
    nbytes: float | None = msgspec.field(default=None, name="Bytes")
    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    device_type: int | None = msgspec.field(default=None, name="Device Type")


RAW_ARGS = ("Input Dims", "Concrete Inputs")


def raw_list(raw: msgspec.Raw) -> list[object] | None:
    """A Raw arg decoded: its list, or None where absent, null, not a list or not JSON."""
    if not raw:
        return None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, list) else None


class Event(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """One Chrome-trace event; `ts`/`dur` in microseconds (floats: ROCm traces carry ns).

    Decoded by its phase (`ph`, msgspec's tag): a complete event ("X") as Event, any other
    phase as a subclass of it named for that phase, with the same fields, except flow events
    ("s", "t", "f": 40% of a Kineto trace's events, read by nothing here), which decode to a
    class without fields and are dropped (`events_of`): building them was a third of the decode.
    `ph` reads each one's phase ("" where the file gave none, or one no trace format has).
    """

    ph: ClassVar[str] = "X"
    cat: str = ""
    name: str = ""
    ts: float | None = None
    dur: float | None = None
    pid: int | str = 0
    tid: int | str = 0
    args: Args | None = None


class Flow(msgspec.Struct, gc=False, tag_field="ph", tag="f"):
    """A flow event ("f"; FlowStart and FlowStep below): nothing of it is decoded."""

    ph: ClassVar[str] = "f"


class FlowStart(Flow, tag="s", gc=False):
    ph: ClassVar[str] = "s"


class FlowStep(Flow, tag="t", gc=False):
    ph: ClassVar[str] = "t"


# Every other phase of the Chrome trace format (and its deprecated async ones), and "" for an
# event without one or with an unknown one (stream.salvage gives it that): one subclass each,
# at module level under its own name so that a worker process can pickle it.
_OTHER_PHASES = ("", "B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "P", "N", "O",
                 "D", "M", "V", "v", "R", "c", "(", ")")  # fmt: skip


def _phase_class(ph: str) -> type[Event]:
    name = f"Phase{ord(ph)}" if ph else "NoPhase"
    cls = msgspec.defstruct(
        name, [], bases=(Event,), tag=ph, namespace={"ph": ph}, module=__name__, gc=False
    )
    globals()[name] = cls
    return cast("type[Event]", cls)


PHASES: dict[str, type[Event]] = {"X": Event} | {ph: _phase_class(ph) for ph in _OTHER_PHASES}
if TYPE_CHECKING:
    AnyEvent = Event  # the decoded list holds Flow too, until events_of drops them
else:
    AnyEvent = Union[(*PHASES.values(), Flow, FlowStart, FlowStep)]


def events_of(decoded: Sequence[object]) -> list[Event]:
    """A decoded list of AnyEvent without its flow events."""
    return [e for e in decoded if isinstance(e, Event)]


class Trace(msgspec.Struct):
    """The top-level object: events plus the metadata Kineto writes before or after them."""

    traceEvents: list[AnyEvent] = []  # flow events too: events_of
    schemaVersion: int | str | None = None
    deviceProperties: list[dict[str, object]] | None = None
    distributedInfo: dict[str, object] | None = None


class Meta(msgspec.Struct):
    """Trace metadata without the events (decoding a head or tail part alone)."""

    schemaVersion: int | str | None = None
    deviceProperties: list[dict[str, object]] | None = None
    distributedInfo: dict[str, object] | None = None


class Kind(IntEnum):
    """What an event is to the reader."""

    IGNORED = 0
    OP = 1  # cpu_op / Operator / python (the plugin's CPU Exec)
    ANNOTATION = 2  # user_annotation: ProfilerStep#N, nccl:*, DataLoader, Optimizer.step
    RUNTIME = 3  # cuda_runtime, cuda_driver, hip*, *_runtime: kernel launches and other API calls
    RUNTIME_2021 = 4  # `Runtime`: the only runtime category the plugin reads
    KERNEL = 5
    MEMCPY = 6
    MEMSET = 7
    DATALOADER = 8  # the 2021 `DataLoader` category


_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.OP,
    "operator": Kind.OP,
    "python": Kind.OP,
    "user_annotation": Kind.ANNOTATION,
    "runtime": Kind.RUNTIME_2021,
    "kernel": Kind.KERNEL,
    "memcpy": Kind.MEMCPY,
    "gpu_memcpy": Kind.MEMCPY,
    "memset": Kind.MEMSET,
    "gpu_memset": Kind.MEMSET,
    "dataloader": Kind.DATALOADER,
    # GPU-side copies of host annotations: the plugin counts their ProfilerStep#N as extra
    # steps (a bug); they say nothing the host side does not.
    "gpu_user_annotation": Kind.IGNORED,
}
_cache: dict[str, Kind] = {}


def kind_of(cat: str) -> Kind:
    """The Kind of a category, whatever its spelling (cached: a trace has a handful of them)."""
    k = _cache.get(cat)
    if k is None:
        low = cat.lower()
        k = _KINDS.get(low)
        if k is None:
            k = Kind.RUNTIME if low.endswith(("_runtime", "_driver")) else Kind.IGNORED
        _cache[cat] = k
    return k
