"""Model warmup (WU-*): samples Triton sends to each instance before it is ready.

Warmup on ensembles is the ensemble rules' finding (ENS-02).
"""

from __future__ import annotations

from tritonctl.repo_schema.context import DATA_FILES
from tritonctl.repo_schema.datatypes import BY_NUMBER
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, OUT, Example
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.schema import model_config_pb2

VARIABLE_DIMS = register(
    "WU03", "warmup input with a variable dimension", "error",
    """
    Warmup data is generated before any request arrives, so every dimension must be a
    concrete size: "warmup setting expects all variable-size dimensions are specified
    for input '<n>'". Replace -1 with the size to warm up with.
    """, "WU-03",
    example=Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        + OUT
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } } ]\n'
    ))
NO_DATA_SOURCE = register(
    "WU04", "warmup input without data", "error",
    """
    Each warmup input needs exactly one of zero_data: true, random_data: true or
    input_data_file: "<file in the model's warmup/ directory>"; otherwise Triton fails
    with "warmup setting expects input '<n>' to have input_data_type set".
    """, "WU-04",
    example=Example(
        H
        + IO
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] } } } ]\n'
    ))
DATA_FILE = register(
    "WU05", "warmup data file missing or too small", "error",
    """
    input_data_file is read from <model>/warmup/<file>. A missing file fails the load;
    for non-string types the file must hold at least dims-product x type-size bytes
    ("warmup setting expects N bytes, but the data provided from <f>only has M bytes").
    String data uses Triton's 4-byte-length-prefixed format.
    """, "WU-05",
    example=Example(
        H
        + IO
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "input0.bin" } } } ]\n'
    ))
SAMPLE_MISMATCH = register(
    "WU06", "warmup sample does not match the model inputs", "error",
    """
    Warmup requests go through the normal request checks, and a failure stops the model
    from loading ("failed to run warmup sample '<name>': ..."): the input names must be
    the model's inputs (or sequence controls), every non-optional input must be
    present ("expected N inputs but got M inputs"), and each data_type and shape must
    match the input's config (dims without the batch dimension).
    """, "WU-06",
    example=Example(
        H
        + IO
        + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } } ]\n'
    ))
COUNT_ON_SEQUENCE = register(
    "WU07", "repeated warmup sample on a sequence model", "warning",
    """
    `count` sends the sample that many times. Model configuration docs warn that
    count > 1 can break models with sequence batching, since the repeated requests are
    not a valid sequence. Use count: 1 for sequence models.
    """, "WU-07",
    example=Example(
        H
        + IO
        + 'sequence_batching { }\nmodel_warmup [ { name: "w" batch_size: 1 count: 3 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n'
    ))
BATCH_SIZE_ZERO = register(
    "WU50", "warmup sample with batch_size 0 is skipped", "warning",
    """
    batch_size defaults to 0, and Triton silently skips samples with batch_size 0 (only
    a verbose log line says so), so the model is not warmed up at all. Set batch_size: 1
    (non-batching models need exactly 1).
    """, "NC-08",
    example=Example(
        H
        + IO
        + 'model_warmup [ { name: "w" inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n'
    ))

def _type_name(data_type: int) -> str:
    return model_config_pb2().DataType.Name(data_type)


@model_rule
def check_warmup(ctx) -> None:
    if ctx.is_ensemble or not ctx.config.model_warmup:
        return
    config = ctx.effective
    inputs = {inp.name: inp for inp in config.input}
    allowed = set(inputs) | {c.name for c in config.sequence_batching.control_input} \
        | {s.input_name for s in config.sequence_batching.state}
    know_inputs = bool(inputs) and not ctx.io_left_to_backend
    for i, sample in enumerate(ctx.config.model_warmup):
        base = ("model_warmup", i)
        label = f"warmup sample '{sample.name}'" if sample.name else f"warmup sample {i}"
        if sample.batch_size == 0:
            ctx.report(BATCH_SIZE_ZERO, f"{label} has batch_size 0, so Triton skips it",
                       base + ("batch_size",), part="key" if not ctx.written(base + ("batch_size",)) else "value",
                       hint="add batch_size: 1")
        if sample.count > 1 and config.HasField("sequence_batching"):
            ctx.report(COUNT_ON_SEQUENCE, f"{label} repeats {sample.count} times on a sequence model",
                       base + ("count",), hint="use count: 1")
        for key, data in sample.inputs.items():
            _check_sample_input(ctx, label, base + ("inputs", key), key, data, inputs if know_inputs else None,
                                allowed)
        if know_inputs:
            missing = [name for name, inp in inputs.items() if not inp.optional and name not in sample.inputs]
            if missing:
                where = base + ("inputs", next(iter(sample.inputs))) if sample.inputs else base
                ctx.report(SAMPLE_MISMATCH, f"{label} gives no data for input(s) {', '.join(missing)}", where,
                           part="key",
                           hint=f"add inputs {{ key: \"{missing[0]}\" value {{ ... }} }} for each model input")


def _check_sample_input(ctx, label: str, path: tuple, key: str, data, inputs: dict | None, allowed: set) -> None:
    value = path + ("value",)
    for j, dim in enumerate(data.dims):
        if dim < 0:
            ctx.report(VARIABLE_DIMS, f"{label} input '{key}' has dimension {dim}; warmup needs concrete sizes",
                       value + ("dims", j), hint="replace it with the size to warm up with")
    source = data.WhichOneof("input_data_type")
    if source is None:
        ctx.report(NO_DATA_SOURCE, f"{label} input '{key}' has no data", path, part="key",
                   hint="add zero_data: true, random_data: true or input_data_file: \"<file>\"")
    elif source == "input_data_file":
        _check_data_file(ctx, label, value + ("input_data_file",), key, data)
    if inputs is None:
        return
    if key not in allowed:
        ctx.report(SAMPLE_MISMATCH, f"{label} input '{key}' is not an input of model '{ctx.name}' "
                   f"(inputs: {', '.join(inputs)})", path + ("key",), hint="use the input names from the config")
        return
    expected = inputs.get(key)
    if expected is None:
        return  # a sequence control or state input
    if data.data_type != expected.data_type:
        ctx.report(SAMPLE_MISMATCH, f"{label} input '{key}' has data_type {_type_name(data.data_type)}, but the "
                   f"model input is {_type_name(expected.data_type)}", value + ("data_type",),
                   hint=f"use data_type: {_type_name(expected.data_type)}")
    dims = list(data.dims)
    config_dims = list(expected.dims)
    if any(d < 0 for d in dims):
        return  # WU03 already says what is wrong with these dims
    if len(dims) != len(config_dims) or any(c != -1 and c != d for c, d in zip(config_dims, dims)):
        ctx.report(SAMPLE_MISMATCH, f"{label} input '{key}' has dims {dims}, but the model input has dims "
                   f"{config_dims} (without the batch dimension)", value + ("dims",),
                   hint=f"use dims {[1 if c == -1 else c for c in config_dims]} or another shape matching them")


def _check_data_file(ctx, label: str, path: tuple, key: str, data) -> None:
    filename = data.input_data_file
    if not ctx.can_check(DATA_FILES):
        return
    file = ctx.model_dir / "warmup" / filename
    if not file.is_file():
        ctx.report(DATA_FILE, f"{label} input '{key}' reads warmup/{filename}, which does not exist in "
                   f"model '{ctx.name}'", path, hint=f"create {ctx.name}/warmup/{filename}")
        return
    known = BY_NUMBER.get(data.data_type)
    size = known.size if known else 0
    if not size or any(d < 0 for d in data.dims):  # TYPE_STRING: variable length
        return
    needed = size
    for dim in data.dims:
        needed *= dim
    actual = file.stat().st_size
    if actual < needed:
        ctx.report(DATA_FILE, f"{label} input '{key}' needs {needed} bytes, but warmup/{filename} has only "
                   f"{actual}", path, hint=f"write {needed} bytes of {_type_name(data.data_type)} data "
                   "(little-endian, row-major)")
