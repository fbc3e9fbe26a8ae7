"""Tensor bytes in and out of the protobuf wire form without protobuf's copies.

A ModelInferRequest's ``raw_input_contents`` are found by walking the message's top-level
fields (a few per request): each becomes a memoryview of the received message, and only the
rest (names, shapes, parameters: small) is parsed by protobuf. The tensors' numpy arrays view
the received bytes, so the one copy left is into the batch buffer. A reply's
``raw_output_contents`` are written after the rest of the message, straight from the output
arrays: one copy, into the reply's bytes. Protobuf allows a message's fields in any order and
repeated elements split across the message, so both forms are what protobuf itself reads.
"""

from __future__ import annotations

REQUEST_RAW = 7  # ModelInferRequest.raw_input_contents
RESPONSE_RAW_TAG = bytes([6 << 3 | 2])  # ModelInferResponse.raw_output_contents, length-delimited


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def split_request(payload: bytes) -> tuple[bytes, list[memoryview]] | None:
    """(the message without its raw_input_contents, views of those contents in order), or None
    where the message does not walk cleanly (protobuf's own parse then says what is wrong)."""
    view = memoryview(payload)
    raw: list[memoryview] = []
    rest: list[memoryview] = []
    i, end = 0, len(payload)
    try:
        while i < end:
            start = i
            key, i = _varint(payload, i)
            wire = key & 7
            if wire == 2:
                length, i = _varint(payload, i)
                if i + length > end:
                    return None
                if key >> 3 == REQUEST_RAW:
                    raw.append(view[i:i + length])
                    i += length
                    continue
                i += length
            elif wire == 0:
                _, i = _varint(payload, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            else:
                return None
            rest.append(view[start:i])
    except (IndexError, ValueError):
        return None
    if i != end:
        return None
    if not raw:
        return payload, raw
    return b"".join(rest), raw


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def join_response(message: bytes, raw: list) -> bytes:
    """A serialized ModelInferResponse without raw_output_contents, and those contents (buffers)."""
    parts = [message]
    for buffer in raw:
        parts += (RESPONSE_RAW_TAG, _varint_bytes(len(buffer)), buffer)
    return b"".join(parts)
