"""Triton's own protobuf schemas, loaded without their packages' heavy ``__init__``.

``tritonclient.grpc`` imports grpc, numpy and more on import (~0.3 s) and ``onnx``
imports its C++ extension; the generated ``*_pb2`` modules themselves need only
protobuf. Loading the generated files directly keeps ``tritonctl validate`` fast
while still using the upstream schema, never a copy of it.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType


def _load_generated(package: str, relative: str, module_name: str) -> ModuleType:
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the '{package}' package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    file_spec = importlib.util.spec_from_file_location(module_name, path)
    assert file_spec is not None and file_spec.loader is not None
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[module_name] = module
    file_spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=None)
def model_config_pb2() -> ModuleType:
    """``tritonclient.grpc.model_config_pb2``: the ModelConfig schema."""
    return _load_generated("tritonclient", "grpc/model_config_pb2.py", "tritonclient.grpc.model_config_pb2")


@lru_cache(maxsize=None)
def onnx_pb2() -> ModuleType:
    """``onnx.onnx_ml_pb2``: the ONNX ModelProto schema."""
    return _load_generated("onnx", "onnx_ml_pb2.py", "onnx.onnx_ml_pb2")


def data_type_name(value: int) -> str:
    """``11`` -> ``"TYPE_FP32"``."""
    return model_config_pb2().DataType.Name(value)


def data_type_value(name: str) -> int:
    return model_config_pb2().DataType.Value(name)


def wire_datatype(value: int) -> str:
    """Config data type -> protocol datatype: TYPE_FP32 -> FP32, TYPE_STRING -> BYTES."""
    name = data_type_name(value)[len("TYPE_"):]
    return "BYTES" if name == "STRING" else name
