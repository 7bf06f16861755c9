"""XSpace/XPlane message classes built at import time, without TensorFlow or generated code.

Contract: the descriptor below matches tsl/profiler/protobuf/xplane.proto (package
`tensorflow.profiler`, proto3) field for field, so the classes parse any profiler's
`*.xplane.pb`. Building them from a descriptor avoids the version skew between generated
`_pb2` modules and the installed protobuf runtime. Names of the classes are the proto's.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "tensorflow.profiler"
FILE_NAME = "tsl/profiler/protobuf/xplane.proto"

_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_I64, _U64, _DBL = _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_DOUBLE
_STR, _BYT, _MSG = _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE

# (message, [(field name, number, label, type, message type or "", oneof index or None)])
_MESSAGES: list[tuple[str, list[tuple[str, int, int, int, str, int | None]]]] = [
    (
        "XSpace",
        [
            ("planes", 1, _REP, _MSG, "XPlane", None),
            ("errors", 2, _REP, _STR, "", None),
            ("warnings", 3, _REP, _STR, "", None),
            ("hostnames", 4, _REP, _STR, "", None),
        ],
    ),
    (
        "XPlane",
        [
            ("id", 1, _OPT, _I64, "", None),
            ("name", 2, _OPT, _STR, "", None),
            ("lines", 3, _REP, _MSG, "XLine", None),
            ("event_metadata", 4, _REP, _MSG, "XPlane.EventMetadataEntry", None),
            ("stat_metadata", 5, _REP, _MSG, "XPlane.StatMetadataEntry", None),
            ("stats", 6, _REP, _MSG, "XStat", None),
        ],
    ),
    (
        "XLine",
        [
            ("id", 1, _OPT, _I64, "", None),
            ("display_id", 10, _OPT, _I64, "", None),
            ("name", 2, _OPT, _STR, "", None),
            ("display_name", 11, _OPT, _STR, "", None),
            ("timestamp_ns", 3, _OPT, _I64, "", None),
            ("duration_ps", 9, _OPT, _I64, "", None),
            ("events", 4, _REP, _MSG, "XEvent", None),
        ],
    ),
    (
        "XEvent",
        [
            ("metadata_id", 1, _OPT, _I64, "", None),
            ("offset_ps", 2, _OPT, _I64, "", 0),
            ("num_occurrences", 5, _OPT, _I64, "", 0),
            ("duration_ps", 3, _OPT, _I64, "", None),
            ("stats", 4, _REP, _MSG, "XStat", None),
        ],
    ),
    (
        "XStat",
        [
            ("metadata_id", 1, _OPT, _I64, "", None),
            ("double_value", 2, _OPT, _DBL, "", 0),
            ("uint64_value", 3, _OPT, _U64, "", 0),
            ("int64_value", 4, _OPT, _I64, "", 0),
            ("str_value", 5, _OPT, _STR, "", 0),
            ("bytes_value", 6, _OPT, _BYT, "", 0),
            ("ref_value", 7, _OPT, _U64, "", 0),
        ],
    ),
    (
        "XEventMetadata",
        [
            ("id", 1, _OPT, _I64, "", None),
            ("name", 2, _OPT, _STR, "", None),
            ("display_name", 4, _OPT, _STR, "", None),
            ("metadata", 3, _OPT, _BYT, "", None),
            ("stats", 5, _REP, _MSG, "XStat", None),
            ("child_id", 6, _REP, _I64, "", None),
        ],
    ),
    (
        "XStatMetadata",
        [
            ("id", 1, _OPT, _I64, "", None),
            ("name", 2, _OPT, _STR, "", None),
            ("description", 3, _OPT, _STR, "", None),
        ],
    ),
]
_ONEOFS = {"XEvent": "data", "XStat": "value"}
_RESERVED = {"XLine": [(5, 6), (6, 7), (7, 8), (8, 9)]}
_MAP_ENTRIES = {
    "XPlane": [("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata")]
}


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _add_field(
    msg: descriptor_pb2.DescriptorProto, spec: tuple[str, int, int, int, str, int | None]
) -> None:
    name, number, label, ftype, type_name, oneof = spec
    field = msg.field.add(
        name=name, number=number, label=label, type=ftype, json_name=_json_name(name)
    )
    if type_name:
        field.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        field.oneof_index = oneof


def file_descriptor_proto(*, lenient: bool = False) -> descriptor_pb2.FileDescriptorProto:
    """The hand-written equivalent of xplane.proto (a test compares it with TensorFlow's).

    lenient=True types every string field as bytes (the same wire format): profilers write
    names unchecked, and proto3 parsing rejects a whole message over one invalid UTF-8 name.
    """
    fdp = descriptor_pb2.FileDescriptorProto(
        name=FILE_NAME.replace(".proto", "_lenient.proto") if lenient else FILE_NAME,
        package=PACKAGE,
        syntax="proto3",
    )
    fdp.options.cc_enable_arenas = True
    for msg_name, fields in _MESSAGES:
        msg = fdp.message_type.add(name=msg_name)
        for spec in fields:
            _add_field(msg, (*spec[:3], _BYT, *spec[4:]) if lenient and spec[3] == _STR else spec)
        for entry_name, value_type in _MAP_ENTRIES.get(msg_name, []):
            entry = msg.nested_type.add(name=entry_name)
            _add_field(entry, ("key", 1, _OPT, _I64, "", None))
            _add_field(entry, ("value", 2, _OPT, _MSG, value_type, None))
            entry.options.map_entry = True
        for start, end in _RESERVED.get(msg_name, []):
            msg.reserved_range.add(start=start, end=end)
        if msg_name in _ONEOFS:
            msg.oneof_decl.add(name=_ONEOFS[msg_name])
    return fdp


def _build(*, lenient: bool = False) -> dict[str, Any]:  # generated message classes
    # A private pool: never clashes with a real xplane_pb2 that TensorFlow may have loaded.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor_proto(lenient=lenient))
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name, _ in _MESSAGES
    }


_CLASSES = _build()
XSpace = _CLASSES["XSpace"]
XPlane = _CLASSES["XPlane"]
XLine = _CLASSES["XLine"]
XEvent = _CLASSES["XEvent"]
XStat = _CLASSES["XStat"]
XEventMetadata = _CLASSES["XEventMetadata"]
XStatMetadata = _CLASSES["XStatMetadata"]

# The same messages with names as bytes: what tuiprof's reader parses with (see lenient above).
RAW_CLASSES = _build(lenient=True)

__all__ = [
    "RAW_CLASSES",
    "XEvent",
    "XEventMetadata",
    "XLine",
    "XPlane",
    "XSpace",
    "XStat",
    "XStatMetadata",
    "file_descriptor_proto",
]
