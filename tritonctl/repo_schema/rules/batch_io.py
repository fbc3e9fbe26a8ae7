"""Batch inputs and batch outputs (BIO-*), as Triton's ``ValidateBatchIO`` checks them
on the normalized config (``ctx.effective``).

BIO-02 (unknown kind) cannot reach the rules: the parser already refuses an enum
value outside BatchInput.Kind / BatchOutput.Kind (TXT04).
"""

from __future__ import annotations

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, PT, TRT, Example
from tritonctl.repo_schema.normalize import runs_python_runtime
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.rules.io import dtype_name
from tritonctl.repo_schema.schema import model_config_pb2

SOURCE_COUNT = register("BIO01", "batch input needs exactly one source_input", "error", """
    Every batch input kind describes one real input of the batch (its element counts or
    shapes), named by exactly one `source_input`. Triton: "batch input kind '<KIND>'
    expects 1 source input, got <n>".
    """, "BIO-01",
    example=Example(
        H + IO + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT32 } ]\n'
    ))
BATCH_INPUT_TYPE = register("BIO03", "batch input data type must be TYPE_INT32 or TYPE_FP32", "error", """
    Triton fills batch inputs itself and only knows how to write 32-bit integers or
    floats: "batch input data type must be TYPE_INT32 or TYPE_FP32".
    """, "BIO-03",
    example=Example(
        H
        + IO
        + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT64 source_input: "INPUT0" } ]\n'
    ))
UNKNOWN_SOURCE = register("BIO04", "source_input is not a configured input", "error", """
    A batch input or batch output's `source_input` must name one of the model's `input`
    entries. Triton: "unknown source input name '<name>'".
    """, "BIO-04",
    example=Example(
        H
        + IO
        + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_INT32 source_input: "IMAGE" } ]\n'
    ))
OUTPUT_SOURCE_COUNT = register("BIO05", "batch output needs exactly one source_input", "error", """
    BATCH_SCATTER_WITH_INPUT_SHAPE splits the output along the shapes of one input, named
    by exactly one `source_input`. Triton: "batch output kind
    'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got <n>".
    """, "BIO-05",
    example=Example(
        H + IO + 'batch_output [ { target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE } ]\n'
    ))
BAD_TARGET = register("BIO06", "batch output target is not a configured output, or repeated", "error", """
    Each `target_name` of a batch output must be one of the model's `output` entries
    ("unknown target output name '<name>'") and may appear only once in that batch
    output ("target output name '<name>' can only be specified once").
    """, "BIO-06",
    example=Example(
        H
        + IO
        + 'batch_output [ { target_name: "SCORES" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]\n'
    ))
SHAPE_TENSOR_TARGET = register("BIO07", "batch output on a TensorRT shape tensor", "error", """
    The TensorRT backend cannot scatter a shape binding back to requests, so a batch
    output whose target is an output marked is_shape_tensor is refused.
    """, "BIO-07",
    example=Example(
        TRT
        + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\nbatch_output [ { target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]\n',
        files=("1/model.plan",),
    ))
RAGGED_WITHOUT_BATCH_INPUT = register("BIO50", "ragged input without a batch input describing it", "warning", """
    With allow_ragged_batch the backend receives the requests of a batch concatenated
    into one flat tensor and cannot tell where one request ends unless a batch_input
    (for example BATCH_ACCUMULATED_ELEMENT_COUNT) with this input as source_input gives it
    the offsets. Triton loads the model anyway; the model then sees one long request.
    Only the backends that build one batch tensor are concerned (ONNX Runtime, TensorRT,
    PyTorch, TensorFlow, OpenVINO); Python, DALI, TensorRT-LLM and other backends that
    take the requests one by one see each request's own tensor.
    """, "NC-12",
    example=Example(
        PT
        + 'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
        + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        + "dynamic_batching { }\n",
        files=("1/model.pt",),
    ))
# Backends that concatenate the requests of a batch into one tensor.
CONCATENATING_BACKENDS = frozenset({"onnxruntime", "tensorrt", "pytorch", "tensorflow", "openvino"})


def _check_batch_inputs(ctx, inputs: set[str]) -> None:
    kind_name = model_config_pb2().BatchInput.Kind.Name
    for i, batch in enumerate(ctx.effective.batch_input):
        path = ("batch_input", i)
        what = f"batch input #{i + 1} ({kind_name(batch.kind)})"
        if len(batch.source_input) != 1:
            ctx.report(SOURCE_COUNT, f"{what} has {len(batch.source_input)} source inputs; it needs exactly 1",
                       path + ("source_input",), hint="name exactly one input: source_input: [ \"INPUT0\" ]")
        if batch.data_type not in (8, 11):  # TYPE_INT32, TYPE_FP32
            ctx.report(BATCH_INPUT_TYPE, f"{what} has data_type {dtype_name(batch.data_type)}",
                       path + ("data_type",), hint="use data_type: TYPE_INT32 or TYPE_FP32")
        for j, source in enumerate(batch.source_input):
            if source not in inputs:
                ctx.report(UNKNOWN_SOURCE, f"{what}: source_input '{source}' is not an input of the model",
                           path + ("source_input", j), hint=f"use one of: {', '.join(sorted(inputs)) or '(no inputs)'}")


def _check_batch_outputs(ctx, inputs: set[str]) -> None:
    config = ctx.effective
    outputs = {o.name for o in config.output if o.name}
    shape_tensors = {o.name for o in config.output if o.is_shape_tensor}
    for i, batch in enumerate(config.batch_output):
        path = ("batch_output", i)
        what = f"batch output #{i + 1}"
        if len(batch.source_input) != 1:
            ctx.report(OUTPUT_SOURCE_COUNT, f"{what} has {len(batch.source_input)} source inputs; it needs exactly 1",
                       path + ("source_input",), hint="name exactly one input: source_input: [ \"INPUT0\" ]")
        for j, source in enumerate(batch.source_input):
            if source not in inputs:
                ctx.report(UNKNOWN_SOURCE, f"{what}: source_input '{source}' is not an input of the model",
                           path + ("source_input", j), hint=f"use one of: {', '.join(sorted(inputs)) or '(no inputs)'}")
        seen: set[str] = set()
        for j, target in enumerate(batch.target_name):
            if target not in outputs:
                ctx.report(BAD_TARGET, f"{what}: target_name '{target}' is not an output of the model",
                           path + ("target_name", j), hint=f"use one of: {', '.join(sorted(outputs)) or '(no outputs)'}")
            elif target in seen:
                ctx.report(BAD_TARGET, f"{what}: target_name '{target}' is listed twice", path + ("target_name", j),
                           hint="list each output once")
            elif target in shape_tensors and config.backend == "tensorrt":
                ctx.report(SHAPE_TENSOR_TARGET, f"{what}: target '{target}' is a shape tensor",
                           path + ("target_name", j), hint="batch outputs cannot target TensorRT shape tensors")
            seen.add(target)


def _check_ragged_offsets(ctx) -> None:
    config = ctx.effective
    if config.max_batch_size <= 0 or config.backend not in CONCATENATING_BACKENDS or runs_python_runtime(config):
        return  # IO54 covers ragged inputs of non-batching models
    described = {source for batch in config.batch_input for source in batch.source_input}
    for i, io in enumerate(config.input):
        if io.allow_ragged_batch and io.name and io.name not in described:
            ctx.report(RAGGED_WITHOUT_BATCH_INPUT, f"ragged input '{io.name}' has no batch_input that describes "
                       "where each request's data ends", ("input", i, "allow_ragged_batch"),
                       hint=f"add batch_input [ {{ kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: \"{io.name}_offsets\" "
                            f"data_type: TYPE_FP32 source_input: \"{io.name}\" }} ]")


@model_rule
def check_batch_io(ctx) -> None:
    inputs = {io.name for io in ctx.effective.input if io.name}
    _check_batch_inputs(ctx, inputs)
    _check_batch_outputs(ctx, inputs)
    _check_ragged_offsets(ctx)
