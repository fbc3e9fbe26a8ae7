"""The one datatype table agrees with the sources it names: model_config.proto, onnx,
onnxruntime, numpy and torch."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from helpers.build_models import model_at_lowest_ir
from tritonctl.repo_schema.datatypes import BY_CONFIG, BY_NUMBER, BY_ONNX, BY_ORT, DATATYPES
from tritonctl.repo_schema.schema import model_config_pb2


def test_every_config_datatype_has_one_row():
    enum = model_config_pb2().DataType
    names = {name for name in enum.keys() if name != "TYPE_INVALID"}
    assert {t.config for t in DATATYPES} == names
    for table in (BY_CONFIG, BY_NUMBER, BY_ONNX, BY_ORT):
        assert len(table) == len(DATATYPES)
    for t in DATATYPES:
        assert enum.Value(t.config) == t.number


@pytest.mark.parametrize("datatype", DATATYPES, ids=lambda t: t.config)
def test_row_matches_onnx_numpy_and_torch(datatype):
    assert onnx.TensorProto.DataType.Name(datatype.onnx) == datatype.onnx_name
    if datatype.size:
        assert np.dtype(datatype.numpy).itemsize == datatype.size
    else:
        assert np.dtype(datatype.numpy) == np.dtype(object)
    if datatype.torch:
        torch = pytest.importorskip("torch")
        assert getattr(torch, datatype.torch).itemsize == datatype.size


@pytest.mark.parametrize("datatype", DATATYPES, ids=lambda t: t.config)
def test_ort_name_is_what_onnxruntime_reports(datatype):
    value = helper.make_tensor_value_info("x", datatype.onnx, [2])
    out = helper.make_tensor_value_info("y", datatype.onnx, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [value], [out])
    model = model_at_lowest_ir(graph)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == datatype.ort
    assert BY_ORT[session.get_outputs()[0].type] is datatype
