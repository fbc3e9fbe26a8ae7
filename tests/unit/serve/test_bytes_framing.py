"""The BYTES wire form (each element: a 4-byte little-endian length, then its bytes), read from
what clients send and written for what models return, with Triton's rules and texts."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.tensors import deserialize_bytes, serialize_bytes

elements = st.lists(st.binary(max_size=40), max_size=12)


@settings(deadline=None)
@given(elements)
def test_what_is_written_reads_back(items):
    array = np.empty(len(items), dtype=object)
    array[:] = items
    assert deserialize_bytes(serialize_bytes(array), len(items), "IN", "m").tolist() == items


@settings(deadline=None)
@given(st.binary(max_size=200), st.integers(0, 1 << 40))
def test_any_buffer_is_read_or_refused_as_a_client_fault(buffer, count):
    try:
        out = deserialize_bytes(buffer, count, "IN", "m")
    except ServeError as exc:
        assert exc.status is Status.INVALID_ARG and "inference input 'IN'" in exc.message
    else:
        assert len(out) == count
        assert serialize_bytes(out) == buffer


@pytest.mark.parametrize("buffer,count,text", [
    (b"427", 1, "incomplete string length indicator for inference input 'IN' for model 'm', expecting 4 bytes but "
     "only 3 bytes available. Please make sure the string length indicator is in one buffer."),
    (struct.pack("<I", 9) + b"427", 1, "incomplete string data for inference input 'IN', expecting string of length "
     "9 but only 3 bytes available"),
    (struct.pack("<I", 1) + b"a", 3, "expected 3 string elements for inference input 'IN' for model 'm', got 1"),
    (struct.pack("<I", 0) * 2, 1, "unexpected number of string elements 2 for inference input 'IN' for model 'm', "
     "expecting 1"),
])
def test_refusals_use_tritons_texts(buffer, count, text):
    with pytest.raises(ServeError) as caught:
        deserialize_bytes(buffer, count, "IN", "m")
    assert caught.value.message == text


def test_elements_that_are_not_bytes_are_written_as_their_str_like_triton():
    """Triton's serialize_byte_tensor: bytes as they are, anything else as ``str(item)`` in UTF-8."""
    array = np.array([b"raw", "text", 1, 123.5, True, -3, None], dtype=object)
    written = serialize_bytes(array)
    assert deserialize_bytes(written, 7, "OUT", "m").tolist() == [b"raw", b"text", b"1", b"123.5", b"True", b"-3",
                                                                  b"None"]
