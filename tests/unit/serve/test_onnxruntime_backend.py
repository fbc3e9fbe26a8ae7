"""The onnxruntime backend's load checks of the config against a real onnxruntime session: the
data types, in the config's names (Triton's texts)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from google.protobuf import text_format
from onnx import TensorProto, helper

from helpers.build_models import model_at_lowest_ir
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend
from tritonctl.serve.core.backend_api import BackendLoadError, InstanceSpec


def identity_model(path: Path, element_type: int) -> None:
    x = helper.make_tensor_value_info("x", element_type, [-1, 4])
    y = helper.make_tensor_value_info("y", element_type, [-1, 4])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model_at_lowest_ir(graph), str(path))


def load(version_dir: Path, input_type: str, output_type: str) -> OnnxRuntimeBackend:
    text = (f'name: "m" backend: "onnxruntime" max_batch_size: 8 '
            f'input [ {{ name: "x" data_type: {input_type} dims: [ 4 ] }} ] '
            f'output [ {{ name: "y" data_type: {output_type} dims: [ 4 ] }} ]')
    config = text_format.Parse(text, model_config_pb2().ModelConfig())
    return OnnxRuntimeBackend(config, version_dir, InstanceSpec("m_0", "KIND_CPU"))


@pytest.mark.parametrize("element_type, config_type", [(TensorProto.FLOAT, "TYPE_FP32"),
                                                       (TensorProto.INT64, "TYPE_INT64"),
                                                       (TensorProto.STRING, "TYPE_STRING"),
                                                       (TensorProto.FLOAT16, "TYPE_FP16")])
def test_config_types_that_match_the_model_load(tmp_path, element_type, config_type):
    identity_model(tmp_path / "1" / "model.onnx", element_type)
    load(tmp_path / "1", config_type, config_type).close()


@pytest.mark.parametrize("input_type, output_type, side", [("TYPE_INT32", "TYPE_FP32", "input"),
                                                           ("TYPE_FP32", "TYPE_FP64", "output")])
def test_a_type_the_model_does_not_have_is_refused_in_the_configs_names(tmp_path, input_type, output_type, side):
    identity_model(tmp_path / "1" / "model.onnx", TensorProto.FLOAT)
    wrong = input_type if side == "input" else output_type
    name = "x" if side == "input" else "y"
    with pytest.raises(BackendLoadError, match=f"configuration expects datatype {wrong} for {side} '{name}', "
                                               "model provides TYPE_FP32"):
        load(tmp_path / "1", input_type, output_type)


def test_a_model_newer_than_onnxruntime_reads_fails_to_load_saying_how_out(tmp_path):
    import onnxruntime as ort

    from helpers.build_models import onnxruntime_max_ir_version

    identity_model(tmp_path / "1" / "model.onnx", TensorProto.FLOAT)
    model = onnx.load(str(tmp_path / "1" / "model.onnx"))
    model.ir_version = 99
    onnx.save(model, str(tmp_path / "1" / "model.onnx"))
    with pytest.raises(BackendLoadError) as refused:
        load(tmp_path / "1", "TYPE_FP32", "TYPE_FP32")
    limit = onnxruntime_max_ir_version()
    assert str(refused.value) == (
        f"onnxruntime could not load 'model.onnx' for model 'm': the model has ONNX IR version 99 and onnxruntime "
        f"{ort.__version__} reads IR versions up to {limit} (a newer onnx wrote it): upgrade onnxruntime (pip install "
        f"-U onnxruntime), or save the model with ir_version {limit} or lower (onnx.helper.find_min_ir_version_for "
        "gives the lowest its operator sets allow)")
