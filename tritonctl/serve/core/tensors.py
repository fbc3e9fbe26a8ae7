"""Tensor bytes on the wire: raw little-endian data and BYTES' 4-byte length prefixes
(serving_protocol.md A.5), shared by the HTTP binary extension and gRPC raw contents."""

from __future__ import annotations

import struct

import numpy as np

from tritonctl.serve.core.errors import invalid_arg
from tritonctl.serve.core.types import NUMPY_DTYPE


def element_count(shape) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def serialize_bytes(array: np.ndarray) -> bytes:
    parts = []
    for item in array.reshape(-1):
        data = item if isinstance(item, bytes) else (item.encode() if isinstance(item, str) else bytes(item))
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes(buffer, count: int, name: str, model: str) -> np.ndarray:
    view = memoryview(buffer)
    out = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        if offset + 4 > len(view):
            raise invalid_arg(f"unexpected end of BYTES data for input '{name}' for model '{model}': "
                              f"expected {count} elements, found {i}")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise invalid_arg(f"BYTES element {i} of input '{name}' for model '{model}' runs past the end of the data")
        out[i] = bytes(view[offset:offset + length])
        offset += length
    if offset != len(view):
        raise invalid_arg(f"input byte size mismatch for input '{name}' for model '{model}'. Expected {offset}, "
                          f"got {len(view)}")
    return out


def to_raw(datatype: str, array: np.ndarray):
    """The tensor's wire bytes: a zero-copy buffer for contiguous numeric data."""
    if datatype == "BYTES":
        return serialize_bytes(array)
    expected = NUMPY_DTYPE[datatype]
    if array.dtype != expected:
        array = array.astype(expected)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return memoryview(array.reshape(-1)).cast("B") if array.size else b""


def from_raw(datatype: str, shape: list[int], buffer, name: str, model: str) -> np.ndarray:
    """A numpy array over ``buffer`` (no copy for numeric types)."""
    count = element_count(shape)
    if datatype == "BYTES":
        return deserialize_bytes(buffer, count, name, model).reshape(shape)
    dtype = NUMPY_DTYPE.get(datatype)
    if dtype is None:
        raise invalid_arg(f"invalid datatype '{datatype}' for input '{name}'")
    expected = count * dtype.itemsize
    if len(buffer) != expected:
        raise invalid_arg(f"input byte size mismatch for input '{name}' for model '{model}'. Expected {expected}, "
                          f"got {len(buffer)}")
    return np.frombuffer(buffer, dtype=dtype).reshape(shape)
