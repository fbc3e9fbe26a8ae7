"""Canonical, readable config.pbtxt text for any ModelConfig.

The style is the one Triton's documentation uses::

    max_batch_size: 8
    input [
      {
        name: "INPUT0"
        data_type: TYPE_FP32
        dims: [ 3, 224, 224 ]
      }
    ]
    parameters { key: "k" value { string_value: "v" } }

Only fields that differ from their default (or whose presence matters) are
written, in schema order, nested blocks indented by two spaces, scalar lists
inline, map entries on one line when they fit. protobuf's ``text_format`` and
tritonctl's own parser both read the output back to the same message.
"""

from __future__ import annotations

import math
import struct

from google.protobuf import text_encoding
from google.protobuf.descriptor import FieldDescriptor

INDENT = "  "
# A map entry is written on one line when it fits in this many characters.
ONE_LINE_WIDTH = 100

_FLOAT = FieldDescriptor.TYPE_FLOAT
_DOUBLE = FieldDescriptor.TYPE_DOUBLE


def to_pbtxt(message, header: str | None = None) -> str:
    """The message as config.pbtxt text; ``header`` becomes a leading ``#`` comment."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    lines.extend(_fields(message, 0))
    return "\n".join(lines) + "\n" if lines else ""


def _present(message, fd) -> bool:
    if fd.is_repeated:
        return len(getattr(message, fd.name)) > 0
    if fd.containing_oneof is not None:
        return message.WhichOneof(fd.containing_oneof.name) == fd.name
    if fd.type == FieldDescriptor.TYPE_MESSAGE or fd.has_presence:
        return message.HasField(fd.name)
    return getattr(message, fd.name) != fd.default_value


def _fields(message, depth: int) -> list[str]:
    lines: list[str] = []
    pad = INDENT * depth
    for fd in message.DESCRIPTOR.fields:
        if not _present(message, fd):
            continue
        value = getattr(message, fd.name)
        if _is_map(fd):
            for key in sorted(value):
                lines.extend(_map_entry(fd, key, value[key], depth))
        elif fd.is_repeated and fd.type == FieldDescriptor.TYPE_MESSAGE:
            lines.append(f"{pad}{fd.name} [")
            for i, item in enumerate(value):
                comma = "," if i < len(value) - 1 else ""
                lines.extend(_block(item, depth + 1, opener="{", suffix=comma))
            lines.append(f"{pad}]")
        elif fd.is_repeated:
            lines.append(f"{pad}{fd.name}: [ {', '.join(_scalar(fd, v) for v in value)} ]")
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            lines.extend(_block(value, depth, opener=f"{fd.name} {{"))
        else:
            lines.append(f"{pad}{fd.name}: {_scalar(fd, value)}")
    return lines


def _block(message, depth: int, opener: str, suffix: str = "") -> list[str]:
    pad = INDENT * depth
    inner = _fields(message, depth + 1)
    if not inner:
        return [f"{pad}{opener}{_empty_body(message)} }}{suffix}"]
    return [f"{pad}{opener}", *inner, f"{pad}}}{suffix}"]


def _empty_body(message) -> str:
    """A present message with only defaults: spell out its one field when it has one, so
    `enable: false` or `reshape { shape: [ ] }` (a scalar) stay visible to a reader."""
    fields = message.DESCRIPTOR.fields
    if len(fields) != 1 or fields[0].type == FieldDescriptor.TYPE_MESSAGE:
        return ""
    fd = fields[0]
    return f" {fd.name}: [ ]" if fd.is_repeated else f" {fd.name}: {_scalar(fd, fd.default_value)}"


def _is_map(fd) -> bool:
    return (fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.has_options
            and fd.message_type.GetOptions().map_entry)


def _map_entry(fd, key, value, depth: int) -> list[str]:
    pad = INDENT * depth
    key_fd = fd.message_type.fields_by_name["key"]
    value_fd = fd.message_type.fields_by_name["value"]
    key_text = f"key: {_scalar(key_fd, key)}"
    if value_fd.type != FieldDescriptor.TYPE_MESSAGE:
        return [f"{pad}{fd.name} {{ {key_text} value: {_scalar(value_fd, value)} }}"]
    body = _fields(value, depth + 2)
    flat = " ".join(line.strip() for line in body)
    compact = all(line.startswith(INDENT * (depth + 2)) and not line.startswith(INDENT * (depth + 3))
                  for line in body)
    flat = flat or _empty_body(value).strip()
    inside = f" {flat} " if flat else " "
    one_line = f"{pad}{fd.name} {{ {key_text} value {{{inside}}} }}"
    if compact and len(one_line) <= ONE_LINE_WIDTH:
        return [one_line]
    return [f"{pad}{fd.name} {{", f"{pad}{INDENT}{key_text}", *_block(value, depth + 1, "value {"), f"{pad}}}"]


def _scalar(fd, value) -> str:
    if fd.type == FieldDescriptor.TYPE_STRING:
        return f'"{text_encoding.CEscape(value, as_utf8=True)}"'
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return f'"{text_encoding.CEscape(value, as_utf8=False)}"'
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if fd.type == FieldDescriptor.TYPE_ENUM:
        enum_value = fd.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if fd.type in (_FLOAT, _DOUBLE):
        return _float(value, single=fd.type == _FLOAT)
    return str(value)


def _float(value: float, single: bool) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if single:  # the shortest text that reads back to the same 32-bit float
        stored = struct.unpack("f", struct.pack("f", value))[0]
        for digits in range(6, 10):
            text = f"{value:.{digits}g}"
            if struct.unpack("f", struct.pack("f", float(text)))[0] == stored:
                break
    else:
        text = repr(value)
    return text if any(c in text for c in ".en") else f"{text}.0"


_INT64_TYPES = frozenset({FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
                          FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64})


def to_json_dict(message) -> dict:
    """The message as Triton's ``GET /v2/models/<m>/config`` shows it: proto field names,
    every field without presence printed (defaults too), 64-bit integers as JSON
    numbers rather than protobuf's strings, fields in schema order."""
    from google.protobuf import json_format

    try:
        data = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf < 5.26 names the option differently
        data = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         including_default_value_fields=True)
    return _json_message(message.DESCRIPTOR, data)


def _json_message(descriptor, data: dict) -> dict:
    result = {}
    for fd in descriptor.fields:
        if fd.name not in data:
            continue
        value = data[fd.name]
        if _is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            result[fd.name] = {k: _json_value(value_fd, v) for k, v in value.items()}
        elif fd.is_repeated:
            result[fd.name] = [_json_value(fd, v) for v in value]
        else:
            result[fd.name] = _json_value(fd, value)
    return result


def _json_value(fd, value):
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return _json_message(fd.message_type, value)
    if fd.type in _INT64_TYPES:
        return int(value)
    return value
