"""Tensor bytes on the wire: raw little-endian data and BYTES' 4-byte length prefixes
(serving_protocol.md A.5), shared by the HTTP binary extension and gRPC raw contents."""

from __future__ import annotations

import struct

import numpy as np

from tritonctl.serve.core.errors import invalid_arg
from tritonctl.serve.core.types import NUMPY_DTYPE


MAX_DIMS = 32  # numpy takes 64; Triton's tensors far fewer
MAX_EXTENT = 1 << 56  # the product of a shape's non-zero dims: above it, no element size is addressable


def element_count(shape) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def checked_count(shape, name: str, model: str) -> int:
    """The element count of a request tensor's declared ``shape``, refused (invalid_arg) before
    anything is allocated when no buffer could hold it: too many dims, or dims whose product
    (zeros left out, as numpy checks them) is past what memory can address. The count is then
    held against the bytes the client sent, never allocated from the shape alone."""
    if len(shape) > MAX_DIMS:
        raise invalid_arg(f"input '{name}' for model '{model}' has {len(shape)} dimensions; at most {MAX_DIMS} are "
                          "allowed")
    count, extent = 1, 1
    for dim in shape:
        dim = int(dim)
        if dim < 0:
            raise invalid_arg(f"invalid shape {list(shape)} for input '{name}' of model '{model}'")
        count *= dim
        extent *= max(dim, 1)
        if extent > MAX_EXTENT:
            raise invalid_arg(f"shape {list(shape)} of input '{name}' for model '{model}' declares more than "
                              f"{MAX_EXTENT} elements, more than any request can carry")
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
    if count > len(view) // 4:  # each element takes at least its 4-byte length: refused before allocating
        raise invalid_arg(f"input byte size mismatch for input '{name}' for model '{model}': {count} BYTES "
                          f"elements need at least {4 * count} bytes, got {len(view)}")
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
    """A numpy array over ``buffer`` (no copy for numeric types): the declared shape is held
    against the bytes present before anything is allocated."""
    count = checked_count(shape, name, model)
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
