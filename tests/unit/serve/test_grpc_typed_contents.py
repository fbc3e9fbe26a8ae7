"""Tensors sent in a ModelInferRequest's typed contents (InferTensorContents), made into raw bytes
as Triton's gRPC front end makes them: any mix of fields and datatype is either bytes or one of
Triton's two refusals, and the narrow integer types keep each value's low bytes."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2

from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.grpc.codec import CONTENTS_FIELDS, typed_contents

INT32 = st.integers(-2**31, 2**31 - 1)
UINT32 = st.integers(0, 2**32 - 1)
VALUES = {"bool_contents": st.booleans(), "int_contents": INT32, "int64_contents": st.integers(-2**63, 2**63 - 1),
          "uint_contents": UINT32, "uint64_contents": st.integers(0, 2**64 - 1),
          "fp32_contents": st.floats(width=32, allow_nan=False), "fp64_contents": st.floats(allow_nan=False),
          "bytes_contents": st.binary(max_size=8)}
DATATYPES = ["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FP16", "BF16",
             "FP32", "FP64", "BYTES", "", "FOO"]


@st.composite
def tensors(draw):
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="IN", datatype=draw(st.sampled_from(DATATYPES)))
    for field in draw(st.lists(st.sampled_from(list(CONTENTS_FIELDS)), max_size=3, unique=True)):
        getattr(tensor.contents, field).extend(draw(st.lists(VALUES[field], min_size=1, max_size=6)))
    return tensor


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(tensors())
def test_any_contents_are_bytes_or_one_of_tritons_refusals(tensor):
    set_fields = [f for f in CONTENTS_FIELDS if getattr(tensor.contents, f)]
    try:
        data = typed_contents(tensor, "m")
    except ServeError as exc:
        prefix = "unexpected explicit tensor data for input tensor 'IN' for model 'm'"
        assert exc.message == f"{prefix}, binary data was already supplied." or (
            exc.message.startswith(f"{prefix} of type '") and "', expected datatype '" in exc.message)
        return
    assert len(set_fields) <= 1
    if not set_fields:
        assert data == b""
    elif tensor.datatype == "BYTES":
        assert data == b"".join(struct.pack("<I", len(v)) + v for v in tensor.contents.bytes_contents)
    else:
        values = getattr(tensor.contents, set_fields[0])
        assert np.frombuffer(data, np.dtype(tensor.datatype.lower().replace("fp", "float"))).size == len(values)


@settings(deadline=None)
@given(st.sampled_from([("INT8", "int_contents", "<i"), ("INT16", "int_contents", "<i"),
                        ("UINT8", "uint_contents", "<I"), ("UINT16", "uint_contents", "<I")]),
       st.lists(UINT32, min_size=1, max_size=8))
def test_narrow_integers_keep_each_values_low_bytes(kind, raw_values):
    datatype, field, layout = kind
    values = [v - 2**32 if layout == "<i" and v >= 2**31 else v for v in raw_values]
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name="IN", datatype=datatype)
    getattr(tensor.contents, field).extend(values)
    size = 1 if datatype.endswith("8") else 2
    assert typed_contents(tensor, "m") == b"".join(struct.pack(layout, v)[:size] for v in values)
