"""Introspection of model files: the tensors a model file declares."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TensorInfo:
    name: str
    data_type: str  # Triton config data type name, e.g. "TYPE_FP32"; "" when Triton has no equivalent
    dims: tuple[int, ...]  # full shape as the model declares it; -1 for a symbolic or unknown dim
    source_type: str = ""  # the type as the model file names it, for messages (e.g. "FLOAT")
    ranked: bool = True  # False when the model declares no shape at all


@dataclass
class ModelIO:
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    # Initializers that can be fed as inputs (ONNX IR >= 4 keeps them out of graph.input).
    overridable: list[str] = field(default_factory=list)

    def input(self, name: str) -> TensorInfo | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> TensorInfo | None:
        return next((t for t in self.outputs if t.name == name), None)


class ModelFileError(Exception):
    """The model file cannot be read (corrupt, truncated, not this format)."""
