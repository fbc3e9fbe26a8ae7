"""pb_utils' BYTES helpers (serialize_byte_tensor, deserialize_bytes_tensor) and Tensor.triton_dtype,
checked against tritonclient's own implementation of the same wire form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient import utils as client_utils

from tritonctl.serve.backends import pb_utils

elements = st.one_of(st.binary(max_size=40), st.text(max_size=20), st.integers(), st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(elements, max_size=12), st.sampled_from([(-1,), (1, -1)]))
def test_serialized_as_tritonclient_serializes_and_read_back(values, shape):
    array = np.array(values + [b""], dtype=np.object_).reshape(shape)
    ours = pb_utils.serialize_byte_tensor(array)
    assert ours.item() == client_utils.serialize_byte_tensor(array).item()
    expected = [v if isinstance(v, bytes) else str(v).encode() for v in values + [b""]]
    for encoded in (ours.item(), ours, np.frombuffer(ours.item(), np.uint8)):
        assert pb_utils.deserialize_bytes_tensor(encoded).tolist() == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_read_as_tritonclient_reads_them_or_refused_clearly(encoded):
    try:
        expected = client_utils.deserialize_bytes_tensor(encoded).tolist()
    except Exception:  # noqa: BLE001 - struct.error or ValueError, whichever the client meets
        with pytest.raises(pb_utils.TritonModelException, match="cannot deserialize bytes tensor: "):
            pb_utils.deserialize_bytes_tensor(encoded)
    else:
        assert pb_utils.deserialize_bytes_tensor(encoded).tolist() == expected


def test_fixed_width_bytes_and_empty_tensors():
    assert pb_utils.serialize_byte_tensor(np.array([b"ab", b"c"])).item() == b"\x02\0\0\0ab\x01\0\0\0c"
    assert pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)).shape == (0,)
    assert pb_utils.deserialize_bytes_tensor(b"").shape == (0,)


def test_a_numeric_tensor_is_refused_with_tritons_words():
    with pytest.raises(pb_utils.TritonModelException, match="cannot serialize bytes tensor: invalid datatype"):
        pb_utils.serialize_byte_tensor(np.arange(3, dtype=np.float32))


@pytest.mark.parametrize("data, number", [
    (np.zeros(2, np.bool_), 1), (np.zeros(2, np.uint8), 2), (np.zeros(2, np.int32), 8),
    (np.zeros(2, np.int64), 9), (np.zeros(2, np.float16), 10), (np.zeros(2, np.float32), 11),
    (np.zeros(2, np.float64), 12), (np.array([b"x"], dtype=np.object_), 13), (np.array(["x"]), 13),
])
def test_triton_dtype_is_tritons_enum_number(data, number):
    assert pb_utils.Tensor("t", data).triton_dtype() == number
