"""Ragged batching (serving_protocol.md B.5; Triton's ragged_batching.md).

An input with ``allow_ragged_batch: true`` does not have to match in shape for requests to
share a batch. As Triton's ONNX Runtime backend does, a batch hands such an input to the model
as one 1-D tensor, the concatenation of every request's elements; the model finds the items
again from the ``batch_input`` tensors the server generates for the batch (element counts,
their running sums, item shapes, ...). A ``batch_output`` of kind
BATCH_SCATTER_WITH_INPUT_SHAPE is cut back into one tensor per request, shaped after that
request's source input.

The values follow Triton's backend input collector (``BatchInputShape``,
``ProcessBatchInput``) and output responder (``ProcessBatchOutput``) exactly; this module
holds only the arithmetic, so it is tested without a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tritonctl.repo_schema.datatypes import BY_CONFIG
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.core.errors import internal, invalid_arg

ELEMENT_COUNT = "BATCH_ELEMENT_COUNT"
ACCUMULATED = "BATCH_ACCUMULATED_ELEMENT_COUNT"
ACCUMULATED_WITH_ZERO = "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"
MAX_ELEMENT_COUNT_AS_SHAPE = "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"
ITEM_SHAPE = "BATCH_ITEM_SHAPE"
ITEM_SHAPE_FLATTEN = "BATCH_ITEM_SHAPE_FLATTEN"
BATCH_INPUT_DTYPES = {name: np.dtype(BY_CONFIG[name].numpy) for name in ("TYPE_INT32", "TYPE_FP32")}

Shape = tuple[int, ...]


def element_count(shape: Shape) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def batch_input_value(kind: str, shapes: list[Shape], dtype: np.dtype) -> np.ndarray:
    """The batch input tensor of ``kind`` for requests whose source input has ``shapes`` (each
    a request's full shape, batch dimension first), in batch order.

    - ELEMENT_COUNT: ``[n]``, each request's element count, e.g. [3, 5, 2].
    - ACCUMULATED: ``[n]``, their running sum (where each request ends), e.g. [3, 8, 10].
    - ACCUMULATED_WITH_ZERO: ``[n + 1]``, the same after a leading 0 (where each starts), [0, 3, 8, 10].
    - MAX_ELEMENT_COUNT_AS_SHAPE: ``[max count]``; only the shape carries information (Triton
      leaves the data uninitialized, here it is zeros).
    - ITEM_SHAPE: ``[batch items, rank - 1]``, the shape of every batch item (a request of
      batch size 2 gives two rows), without the batch dimension.
    - ITEM_SHAPE_FLATTEN: the same values as one 1-D tensor.
    """
    counts = [element_count(shape) for shape in shapes]
    if kind == ELEMENT_COUNT:
        return np.array(counts, dtype=dtype)
    if kind == ACCUMULATED:
        return np.cumsum(counts, dtype=np.int64).astype(dtype)
    if kind == ACCUMULATED_WITH_ZERO:
        return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(dtype)
    if kind == MAX_ELEMENT_COUNT_AS_SHAPE:
        return np.zeros(max(counts, default=0), dtype=dtype)
    if kind in (ITEM_SHAPE, ITEM_SHAPE_FLATTEN):
        ranks = {len(shape) for shape in shapes}
        if len(ranks) > 1:
            raise invalid_arg(f"{kind} needs source inputs of one rank, the batch has ranks {sorted(ranks)}")
        rank = ranks.pop() if ranks else 1
        rows = [list(shape[1:]) for shape in shapes for _ in range(int(shape[0]))]
        items = np.array(rows, dtype=dtype).reshape(len(rows), rank - 1)
        return items.reshape(-1) if kind == ITEM_SHAPE_FLATTEN else items
    raise invalid_arg(f"unknown batch input kind '{kind}'")


def scatter_shapes(template: Shape, shapes: list[Shape], output: str, source: str) -> list[Shape]:
    """Each request's output shape for BATCH_SCATTER_WITH_INPUT_SHAPE: ``template`` (the
    output's [-1 for the batch] + dims or reshape) with every -1 taken from the same
    dimension of that request's source input."""
    result = []
    for shape in shapes:
        dims = []
        for index, dim in enumerate(template):
            if dim != -1:
                dims.append(int(dim))
            elif index < len(shape):
                dims.append(int(shape[index]))
            else:
                raise invalid_arg(f"batch output '{output}' has a variable dimension {index}, but source input "
                                  f"'{source}' of the request has only {len(shape)} dimensions {list(shape)}")
        result.append(tuple(dims))
    return result


def scatter(data: np.ndarray, shapes: list[Shape], output: str, model: str) -> list[np.ndarray]:
    """Cut the model's ``data`` into consecutive pieces of ``shapes`` (one per request)."""
    flat = data.reshape(-1)
    needed = sum(element_count(shape) for shape in shapes)
    if flat.size < needed:
        raise internal(f"model '{model}' produced {flat.size} elements for batch output '{output}', but the "
                       f"requests' shapes {[list(s) for s in shapes]} need {needed}")
    pieces, offset = [], 0
    for shape in shapes:
        count = element_count(shape)
        pieces.append(flat[offset:offset + count].reshape(shape))
        offset += count
    return pieces


@dataclass(frozen=True)
class BatchInputSpec:
    kind: str
    target: str
    source: str
    dtype: np.dtype


@dataclass(frozen=True)
class ScatterSpec:
    source: str
    template: Shape


class RaggedLayout:
    """A model's ragged inputs, batch inputs and batch outputs, read from its config."""

    def __init__(self, config):
        self.model = config.name
        self.inputs = frozenset(t.name for t in config.input if t.allow_ragged_batch)
        pb = model_config_pb2()
        self.batch_inputs: list[BatchInputSpec] = []
        for batch_input in config.batch_input:
            kind = pb.BatchInput.Kind.Name(batch_input.kind)
            dtype = BATCH_INPUT_DTYPES.get(pb.DataType.Name(batch_input.data_type))
            if dtype is None or len(batch_input.source_input) != 1:
                continue  # refused at load by validation (BIO-01, BIO-03)
            for target in batch_input.target_name:
                self.batch_inputs.append(BatchInputSpec(kind, target, batch_input.source_input[0], dtype))
        outputs = {t.name: t for t in config.output}
        batching = config.max_batch_size > 0
        self.scatter_outputs: dict[str, ScatterSpec] = {}
        for batch_output in config.batch_output:
            if len(batch_output.source_input) != 1:
                continue  # BIO-05
            for target in batch_output.target_name:
                tensor = outputs.get(target)
                if tensor is None:
                    continue  # BIO-06
                dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
                self.scatter_outputs[target] = ScatterSpec(batch_output.source_input[0],
                                                           tuple(([-1] if batching else []) + dims))

    @staticmethod
    def model_input(arrays: list[np.ndarray]) -> np.ndarray:
        """A ragged input as the model gets it: every request's elements, one after another."""
        flat = [a.reshape(-1) for a in arrays]
        return flat[0] if len(flat) == 1 else np.concatenate(flat)

    def batch_input_tensors(self, batch: list) -> dict[str, np.ndarray]:
        """Every configured batch input for ``batch`` (InferRequest objects), by target name."""
        return {spec.target: batch_input_value(spec.kind, self._source_shapes(batch, spec.source), spec.dtype)
                for spec in self.batch_inputs}

    def scatter(self, name: str, data: np.ndarray, batch: list) -> list[np.ndarray]:
        spec = self.scatter_outputs[name]
        shapes = scatter_shapes(spec.template, self._source_shapes(batch, spec.source), name, spec.source)
        return scatter(data, shapes, name, self.model)

    def _source_shapes(self, batch: list, source: str) -> list[Shape]:
        shapes = []
        for request in batch:
            tensor = request.inputs.get(source)
            if tensor is None:
                raise invalid_arg(f"[request id: {request.id or '<id_unknown>'}] model '{self.model}' derives a "
                                  f"batch input or output from input '{source}', which the request does not carry")
            shapes.append(tuple(tensor.data.shape))
        return shapes
