"""The part of XLA's HloProto that FLOP counting reads, as message classes built at import time.

Contract: `HloProto` parses the `Hlo Proto` stat a profile's `/host:metadata` plane keeps per
XLA program (xla/service/hlo.proto, package `xla`). Only the fields below are declared (their
numbers are the proto's); the rest of each message is kept as unknown fields and never read.
Strings are bytes (the reader decodes leniently). Built as proto.py builds the XPlane classes:
no TensorFlow, JAX or generated `_pb2` module.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "tuiprof.xla"  # not `xla`: a private pool, but a distinct name all the same
FILE_NAME = "tuiprof/xla_hlo_subset.proto"

_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_I64, _BYT, _MSG, _ENUM_AS_INT, _BOOL = (
    _F.TYPE_INT64,
    _F.TYPE_BYTES,
    _F.TYPE_MESSAGE,
    _F.TYPE_INT32,  # PrimitiveType is an enum: int32 on the wire
    _F.TYPE_BOOL,
)

# (message, [(field name, number, label, type, message type or "")])
_MESSAGES: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
    ("HloProto", [("hlo_module", 1, _OPT, _MSG, "HloModuleProto")]),
    (
        "HloModuleProto",
        [
            ("name", 1, _OPT, _BYT, ""),
            ("computations", 3, _REP, _MSG, "HloComputationProto"),
            ("id", 5, _OPT, _I64, ""),
            ("entry_computation_id", 6, _OPT, _I64, ""),
        ],
    ),
    (
        "HloComputationProto",
        [
            ("name", 1, _OPT, _BYT, ""),
            ("instructions", 2, _REP, _MSG, "HloInstructionProto"),
            ("id", 5, _OPT, _I64, ""),
            ("root_id", 6, _OPT, _I64, ""),
        ],
    ),
    (
        "HloInstructionProto",
        [
            ("name", 1, _OPT, _BYT, ""),
            ("opcode", 2, _OPT, _BYT, ""),
            ("shape", 3, _OPT, _MSG, "ShapeProto"),
            ("metadata", 7, _OPT, _MSG, "OpMetadata"),
            ("window", 15, _OPT, _MSG, "Window"),
            ("convolution_dimension_numbers", 16, _OPT, _MSG, "ConvolutionDimensionNumbers"),
            ("custom_call_target", 28, _OPT, _BYT, ""),
            ("dot_dimension_numbers", 30, _OPT, _MSG, "DotDimensionNumbers"),
            ("id", 35, _OPT, _I64, ""),
            ("operand_ids", 36, _REP, _I64, ""),
            ("called_computation_ids", 38, _REP, _I64, ""),
            ("backend_config", 43, _OPT, _BYT, ""),
            ("feature_group_count", 50, _OPT, _I64, ""),
            ("batch_group_count", 58, _OPT, _I64, ""),
        ],
    ),
    (
        "ShapeProto",
        [
            ("element_type", 2, _OPT, _ENUM_AS_INT, ""),
            ("dimensions", 3, _REP, _I64, ""),
            ("tuple_shapes", 4, _REP, _MSG, "ShapeProto"),
        ],
    ),
    (
        "DotDimensionNumbers",
        [
            ("lhs_contracting_dimensions", 1, _REP, _I64, ""),
            ("rhs_contracting_dimensions", 2, _REP, _I64, ""),
            ("lhs_batch_dimensions", 3, _REP, _I64, ""),
            ("rhs_batch_dimensions", 4, _REP, _I64, ""),
        ],
    ),
    (
        "ConvolutionDimensionNumbers",
        [
            ("kernel_input_feature_dimension", 3, _OPT, _I64, ""),
            ("kernel_output_feature_dimension", 4, _OPT, _I64, ""),
            ("kernel_spatial_dimensions", 6, _REP, _I64, ""),
        ],
    ),
    ("OpMetadata", [("op_name", 2, _OPT, _BYT, "")]),
    ("Window", [("dimensions", 1, _REP, _MSG, "WindowDimension")]),
    (
        "WindowDimension",
        [
            ("size", 1, _OPT, _I64, ""),
            ("stride", 2, _OPT, _I64, ""),
            ("window_reversal", 7, _OPT, _BOOL, ""),
        ],
    ),
]


def _build() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto3")
    for msg_name, fields in _MESSAGES:
        msg = fdp.message_type.add(name=msg_name)
        for name, number, label, ftype, type_name in fields:
            field = msg.field.add(name=name, number=number, label=label, type=ftype)
            if type_name:
                field.type_name = f".{PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name, _ in _MESSAGES
    }


_CLASSES = _build()
HloProto = _CLASSES["HloProto"]
HloModuleProto = _CLASSES["HloModuleProto"]

# xla_data.proto's PrimitiveType: bytes per element (sub-byte types as one), for bytes accessed
ELEMENT_BYTES: dict[int, int] = {
    1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 2, 8: 4, 9: 8, 10: 2, 11: 4, 12: 8, 15: 8, 16: 2,
    18: 16, 19: 1, 20: 1, 21: 1, 22: 1, 23: 1, 24: 1, 25: 1, 26: 1, 27: 1, 28: 1, 29: 1,
    30: 1, 31: 1, 32: 1, 33: 1,
}  # fmt: skip

# xla_data.proto's PrimitiveType numbers of the floating-point formats, as the peaks name them
FORMATS: dict[int, str] = {
    10: "fp16",
    11: "fp32",
    16: "bf16",
    12: "fp64",
    19: "fp8",
    20: "fp8",
    23: "fp8",
    24: "fp8",
    25: "fp8",
    28: "fp8",
    29: "fp8",
}
