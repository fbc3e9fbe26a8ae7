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
from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend, providers
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


GPU_INSTANCE = InstanceSpec("m_0", "KIND_GPU", device_id=1)
WITH_TRT = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


def gpu_config(text: str = ""):
    return text_format.Parse('name: "m" backend: "onnxruntime" max_batch_size: 8 ' + text,
                             model_config_pb2().ModelConfig())


def test_gpu_instances_get_tensorrt_then_cuda_then_cpu_with_tritons_option_names():
    config = gpu_config('''
        parameters { key: "cudnn_conv_algo_search" value { string_value: "1" } }
        parameters { key: "arena_extend_strategy" value { string_value: "1" } }
        parameters { key: "gpu_mem_limit" value { string_value: "4294967296" } }
        optimization { execution_accelerators { gpu_execution_accelerator [
          { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" }
                             parameters { key: "max_workspace_size_bytes" value: "1073741824" }
                             parameters { key: "trt_engine_cache_enable" value: "true" }
                             parameters { key: "trt_engine_cache_path" value: "/tmp/trt" } },
          { name: "cuda" parameters { key: "use_ep_level_unified_stream" value: "true" } } ] } }''')
    assert providers(config, GPU_INSTANCE, WITH_TRT) == [
        ("TensorrtExecutionProvider", {"trt_fp16_enable": "1", "trt_max_workspace_size": "1073741824",
                                       "trt_engine_cache_enable": "true", "trt_engine_cache_path": "/tmp/trt",
                                       "device_id": "1"}),
        ("CUDAExecutionProvider", {"use_ep_level_unified_stream": "true", "cudnn_conv_algo_search": "HEURISTIC",
                                   "arena_extend_strategy": "kSameAsRequested", "gpu_mem_limit": "4294967296",
                                   "device_id": "1"}),
        "CPUExecutionProvider"]
    assert providers(gpu_config(), GPU_INSTANCE, WITH_TRT) == [("CUDAExecutionProvider", {"device_id": "1"}),
                                                               "CPUExecutionProvider"]
    assert providers(config, InstanceSpec("m_0", "KIND_CPU"), WITH_TRT) == ["CPUExecutionProvider"]


@pytest.mark.parametrize("text, available, message", [
    ('optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" '
     'parameters { key: "precision_mode" value: "FP8" } } ] } }', WITH_TRT,
     "unsupported precision mode 'FP8' is requested"),
    ('optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }',
     ["CUDAExecutionProvider", "CPUExecutionProvider"],
     "unknown Execution Accelerator 'tensorrt' is requested: this onnxruntime has no TensorrtExecutionProvider"),
    ('optimization { execution_accelerators { gpu_execution_accelerator [ { name: "openvino" } ] } }', WITH_TRT,
     "unknown Execution Accelerator 'openvino' is requested"),
    ('parameters { key: "cudnn_conv_algo_search" value { string_value: "3" } }', WITH_TRT,
     "unsupported cudnn_conv_algo_search value '3' is requested"),
    ("", ["CPUExecutionProvider"], "has kind KIND_GPU but no CUDA device is usable here"),
])
def test_gpu_provider_setups_triton_refuses_fail_to_load_in_its_words(text, available, message):
    with pytest.raises(BackendLoadError) as refused:
        providers(gpu_config(text), GPU_INSTANCE, available)
    assert message in str(refused.value)
