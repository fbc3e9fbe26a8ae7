"""Triton's tensor datatypes, once: every datatype table in tritonctl derives from ``DATATYPES``.

One row per ``DataType`` of model_config.proto: its config name (``TYPE_FP32``) and enum number,
the protocol (wire) name (``FP32``), the numpy dtype name, the bytes per element, and the names
ONNX, onnxruntime and torch give it. numpy has no bfloat16: BF16 data is kept as its raw 2-byte
words (``uint16``). TYPE_STRING / BYTES is variable length (size 0, numpy ``object``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataType:
    config: str  # model_config.proto name: TYPE_FP32
    number: int  # model_config.proto enum number
    wire: str  # KServe v2 / Triton protocol name: FP32
    numpy: str  # numpy dtype name (BF16: raw uint16 words; BYTES: object)
    size: int  # bytes per element; 0 = variable length (BYTES)
    onnx: int  # onnx TensorProto.DataType number
    onnx_name: str  # onnx TensorProto.DataType name: FLOAT
    torch: str  # attribute of the torch module: float32

    @property
    def ort(self) -> str:
        """The type name onnxruntime reports for a tensor input or output: ``tensor(float)``."""
        return f"tensor({_ORT_ELEMENT.get(self.onnx_name, self.onnx_name.lower())})"


_ORT_ELEMENT = {"FLOAT": "float", "DOUBLE": "double", "STRING": "string"}

DATATYPES: tuple[DataType, ...] = (
    DataType("TYPE_BOOL", 1, "BOOL", "bool", 1, 9, "BOOL", "bool"),
    DataType("TYPE_UINT8", 2, "UINT8", "uint8", 1, 2, "UINT8", "uint8"),
    DataType("TYPE_UINT16", 3, "UINT16", "uint16", 2, 4, "UINT16", "uint16"),
    DataType("TYPE_UINT32", 4, "UINT32", "uint32", 4, 12, "UINT32", "uint32"),
    DataType("TYPE_UINT64", 5, "UINT64", "uint64", 8, 13, "UINT64", "uint64"),
    DataType("TYPE_INT8", 6, "INT8", "int8", 1, 3, "INT8", "int8"),
    DataType("TYPE_INT16", 7, "INT16", "int16", 2, 5, "INT16", "int16"),
    DataType("TYPE_INT32", 8, "INT32", "int32", 4, 6, "INT32", "int32"),
    DataType("TYPE_INT64", 9, "INT64", "int64", 8, 7, "INT64", "int64"),
    DataType("TYPE_FP16", 10, "FP16", "float16", 2, 10, "FLOAT16", "float16"),
    DataType("TYPE_FP32", 11, "FP32", "float32", 4, 1, "FLOAT", "float32"),
    DataType("TYPE_FP64", 12, "FP64", "float64", 8, 11, "DOUBLE", "float64"),
    DataType("TYPE_STRING", 13, "BYTES", "object", 0, 8, "STRING", ""),
    DataType("TYPE_BF16", 14, "BF16", "uint16", 2, 16, "BFLOAT16", "bfloat16"),
)

BY_CONFIG: dict[str, DataType] = {t.config: t for t in DATATYPES}
BY_NUMBER: dict[int, DataType] = {t.number: t for t in DATATYPES}
BY_ONNX: dict[int, DataType] = {t.onnx: t for t in DATATYPES}
BY_ORT: dict[str, DataType] = {t.ort: t for t in DATATYPES}
