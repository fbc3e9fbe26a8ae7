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
    """Triton's BYTES wire form; an element that is not ``bytes`` is written as its ``str()`` in
    UTF-8, as Triton's ``serialize_byte_tensor`` does (1 -> b"1", True -> b"True", 0.5 -> b"0.5")."""
    parts = []
    for item in array.reshape(-1):
        data = bytes(item) if isinstance(item, (bytes, bytearray, memoryview)) else str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes(buffer, count: int, name: str, model: str, request_id: str | None = None) -> np.ndarray:
    """``count`` BYTES elements (4-byte little-endian length, then the bytes) from ``buffer``,
    refused with Triton's texts (its ValidateBytesInputs) when the buffer holds another number of
    elements or ends inside one. A declared shape never sizes memory beyond what the bytes sent
    can fill. With ``request_id`` (a request's, "" when it has none) the texts Triton prefixes with
    the request's id are prefixed as Triton does."""
    rid = "" if request_id is None else f"[request id: {request_id or '<id_unknown>'}] "
    view = memoryview(buffer)
    end = len(view)
    out = np.empty(min(count, end // 4), dtype=object)  # each element takes at least its 4-byte length
    found = 0
    offset = 0
    while offset < end:
        if end - offset < 4:
            raise invalid_arg(f"{rid}incomplete string length indicator for inference input '{name}' for model "
                              f"'{model}', expecting 4 bytes but only {end - offset} bytes available. Please make "
                              "sure the string length indicator is in one buffer.")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if length > end - offset:
            raise invalid_arg(f"incomplete string data for inference input '{name}', expecting string of length "
                              f"{length} but only {end - offset} bytes available")
        if found < len(out):
            out[found] = bytes(view[offset:offset + length])
        found += 1
        offset += length
    check_string_count(found, count, name, model, rid)
    return out


def check_string_count(given: int, expected: int, name: str, model: str, rid: str = "") -> None:
    """Refuse a BYTES input of ``given`` strings where its shape holds ``expected``, in Triton's
    words; ``rid`` is the "[request id: ...] " prefix, where Triton writes one."""
    if given < expected:
        raise invalid_arg(f"{rid}expected {expected} string elements for inference input '{name}' for model "
                          f"'{model}', got {given}")
    if given > expected:
        raise invalid_arg(f"{rid}unexpected number of string elements {given} for inference input '{name}' for "
                          f"model '{model}', expecting {expected}")


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


def from_raw(datatype: str, shape: list[int], buffer, name: str, model: str,
             request_id: str | None = None) -> np.ndarray:
    """A numpy array over ``buffer`` (no copy for numeric types): the declared shape is held
    against the bytes present before anything is allocated. ``request_id``: as for
    deserialize_bytes, the id Triton's texts name."""
    count = checked_count(shape, name, model)
    if datatype == "BYTES":
        return deserialize_bytes(buffer, count, name, model, request_id).reshape(shape)
    dtype = NUMPY_DTYPE.get(datatype)
    if dtype is None:
        raise invalid_arg(f"invalid datatype '{datatype}' for input '{name}'")
    expected = count * dtype.itemsize
    if len(buffer) != expected:
        rid = "" if request_id is None else f"[request id: {request_id or '<id_unknown>'}] "
        raise invalid_arg(f"{rid}input byte size mismatch for input '{name}' for model '{model}'. Expected "
                          f"{expected}, got {len(buffer)}")
    return np.frombuffer(buffer, dtype=dtype).reshape(shape)
