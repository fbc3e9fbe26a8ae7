"""Inputs and outputs: names, data types, dims and reshape (IO-*).

Triton checks these in ``ValidateModelInput`` / ``ValidateModelOutput`` on the
normalized config (after backend auto-complete), so the rules read
``ctx.effective``; its input and output lists are the ones written in the file,
so paths and positions match.
"""

from __future__ import annotations

import posixpath

from tritonctl.repo_schema.context import LABEL_FILES
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IN, ONNX, ORT_OK, OUT, TRT, Example, OnnxModel
from tritonctl.repo_schema.normalize import runs_python_runtime
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.schema import data_type_name, model_config_pb2

INT64_MAX = 2**63 - 1
WILDCARD = -1
TRT_PLATFORM = "tensorrt_plan"
# Backends known to build their BackendModel without optional-input support. Custom
# backends (TensorRT-LLM, vLLM, ...) often do support optional inputs, so they are not judged;
# nor is a backend's Python runtime (runtime: "model.py"), which the Python backend runs.
NO_OPTIONAL_INPUT_BACKENDS = {"tensorrt", "pytorch"}
BACKEND_DATA_TYPES = {
    "tensorrt": {"TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16", "TYPE_FP32",
                 "TYPE_BF16"},
    "pytorch": {"TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16",
                "TYPE_FP32", "TYPE_FP64", "TYPE_STRING"},
}

NO_NAME = register("IO01", "input or output without a name", "error", """
    Every entry of `input` and `output` needs a `name`: it is how clients address the
    tensor and how the backend finds it in the model. Triton refuses the model:
    "model input must specify 'name'". Add name: "..." with the tensor's name in the model.
    """, "IO-01",
    example=Example(H + "input [ { data_type: TYPE_FP32 dims: [ 4 ] } ]\n" + OUT))
NO_DATA_TYPE = register("IO02", "input or output without data_type", "error", """
    Each input and output must declare its element type (TYPE_FP32, TYPE_INT64,
    TYPE_STRING, ...). Without it Triton refuses the model: "model input '<name>' must
    specify 'data_type'". Use the type the model file declares for the tensor.
    """, "IO-02",
    example=Example(H + 'input [ { name: "INPUT0" dims: [ 4 ] } ]\n' + OUT))
NO_DIMS = register("IO03", "input or output without dims", "error", """
    Each input and output needs `dims`, the shape of one request's tensor (without the
    batch dimension when max_batch_size > 0). Triton refuses an empty shape: "model input
    '<name>' must specify 'dims'". A scalar cannot be written as dims: [] - use dims: [ 1 ]
    and, for a batching model, add reshape: { shape: [ ] } so the model sees shape [batch].
    """, "IO-03",
    example=Example(H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 } ]\n' + OUT))
BAD_DIM = register("IO04", "dimension is 0 or below -1", "error", """
    A dimension is a positive size, or -1 for a size that varies between requests.
    Triton refuses anything else: "dimension must be integer >= 1, or -1 to indicate a
    variable-size dimension".
    """, "IO-04",
    example=Example(H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 0, 4 ] } ]\n' + OUT))
EMPTY_RESHAPE_NO_BATCH = register("IO05", "empty reshape on a non-batching model", "error", """
    reshape: { shape: [ ] } turns a [1] tensor into a scalar. Without batching
    (max_batch_size: 0) the model would then get a rank-0 tensor, which Triton does not
    support: "cannot have empty reshape for non-batching model as scalar tensors are not
    supported". Keep dims: [ 1 ] without reshape, or enable batching.
    """, "IO-05",
    example=Example(
        'backend: "python"\nmax_batch_size: 0\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]\n'
        + OUT
    ))
BAD_RESHAPE_DIM = register("IO06", "reshape dimension is 0 or below -1", "error", """
    Like dims, every reshape dimension must be positive or -1: "reshape dimensions must
    be integer >= 1, or -1 to indicate a variable-size dimension".
    """, "IO-06",
    example=Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0, 4 ] } } ]\n' + OUT
    ))
RESHAPE_SIZE = register("IO07", "dims and reshape hold different element counts", "error", """
    reshape only reinterprets the request tensor, so it must hold exactly as many
    elements as dims (the one exception: dims [ 1 ] with an empty reshape). A -1 on only
    one side also counts as different. Triton: "has different size for dims and reshape".
    """, "IO-07",
    example=Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4, 4 ] reshape { shape: [ 8 ] } } ]\n' + OUT
    ))
RESHAPE_VARIABLE = register("IO08", "dims and reshape have different variable dimensions", "error", """
    When dims contain -1, reshape must have the same number of -1 dimensions, and the
    fixed dimensions between them must multiply to the same counts: [2,4,-1,6] can become
    [8,-1,1,6]. Triton: "has different number of variable-size dimensions for dims and
    reshape" (or "has different size for dims and reshape").
    """, "IO-08",
    example=Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, -1 ] } } ]\n'
        + OUT
    ))
ELEMENT_OVERFLOW = register("IO09", "tensor has more elements than fit in 64 bits", "error", """
    The product of the dimensions overflows a 64-bit integer, so Triton cannot size the
    tensor: "element count for tensor '<name>' exceeds maximum size of
    9223372036854775807". The dims are almost certainly a typo.
    """, "IO-09",
    example=Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4294967296, 4294967296 ] reshape { shape: [ -1 ] } } ]\n'
        + OUT
    ))
FORMAT_RANK = register("IO10", "image format needs 3 dims", "error", """
    format: FORMAT_NHWC or FORMAT_NCHW describes an image as three dimensions (height,
    width, channels in some order, without the batch). Triton: "model input NHWC/NCHW
    require 3 dims". Fix dims, or remove `format` (FORMAT_NONE).
    """, "IO-10",
    example=Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 224, 224 ] } ]\n' + OUT
    ))
SHAPE_TENSOR_PLATFORM = register("IO11", "shape tensor outside TensorRT", "error", """
    is_shape_tensor marks a TensorRT shape binding; no other platform has them. Triton:
    "shape tensors are only supported for TensorRT platform" (it compares the platform
    string, so TensorRT models must have platform tensorrt_plan). Remove the flag.
    """, "IO-11",
    example=Example(
        H + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n' + OUT
    ))
NON_LINEAR_IO = register("IO12", "non-linear IO format misused", "error", """
    is_non_linear_format_io is only for TensorRT engines with vectorized IO formats, and
    such tensors have exactly 3 dims. Triton: "Non-linear IO format is only supported for
    the TensorRT platform" or "Non-linear IO format input requires 3 dims".
    """, "IO-12",
    example=Example(
        H
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] is_non_linear_format_io: true } ]\n'
        + OUT
    ))
OPTIONAL_UNSUPPORTED = register("IO13", "optional input on a backend without optional inputs", "error", """
    `optional: true` lets clients leave an input out, but only backends built with
    optional-input support accept it (ONNX Runtime and Python do; TensorRT and PyTorch
    do not). The others fail at load:
    "'optional' is set to true for input '<name>' while the backend model doesn't support
    optional input".
    """, "IO-13",
    example=Example(
        'backend: "pytorch"\nmax_batch_size: 8\ninput [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\noutput [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        files=("1/model.pt",),
    ))
OPTIONAL_ORT = register("IO14", "ONNX Runtime optional input with batching or ragged batching", "error", """
    The ONNX Runtime backend cannot batch requests that may lack an input: "optional
    input '<name>' is not supported for models that support batching". It also refuses
    an input that is both optional and allow_ragged_batch. Use max_batch_size: 0, or make
    the input required.
    """, "IO-14",
    example=Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n' + OUT,
        files=("1/",),
        onnx=ORT_OK,
    ))
RAGGED_NON_LINEAR = register("IO15", "ragged batching on a non-linear TensorRT tensor", "error", """
    Ragged batching concatenates requests into one flat tensor, which the TensorRT
    backend cannot do for a vectorized (non-linear) IO format; it refuses the
    combination. Drop allow_ragged_batch or is_non_linear_format_io.
    """, "IO-15",
    example=Example(
        TRT
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] allow_ragged_batch: true is_non_linear_format_io: true } ]\n'
        + OUT,
        files=("1/model.plan",),
    ))
LABEL_FILE = register("IO16", "label file outside the model directory or missing", "error", """
    label_filename is resolved against the model directory (not the version directory)
    and must stay inside it: "label file path '<path>' for output '<name>' in model
    '<model>' is outside model directory". The file must exist and be readable, one label
    per line; otherwise the model fails to load.
    """, "IO-16",
    example=Example(
        H + IN + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]\n'
    ))
MULTIPLE_LABELS = register("IO17", "two label files for one output name", "error", """
    Two outputs share a name and both have label_filename. Triton keeps labels per
    output name and refuses the second: "multiple label files for '<name>'". Give each
    output its own name.
    """, "IO-17",
    example=Example(
        H
        + IN
        + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "a.txt" }, { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "b.txt" } ]\n',
        files=("1/model.py", "a.txt", "b.txt"),
    ))
UNSUPPORTED_TYPE = register("IO18", "data type not supported by the backend", "error", """
    Each backend maps config types onto its framework's types and refuses the rest:
    "unsupported datatype <T> for input '<name>'". TensorRT takes BOOL, UINT8, INT8,
    INT32, INT64, FP16, FP32 and BF16; PyTorch takes BOOL, UINT8, INT8, INT16, INT32,
    INT64, FP16, FP32, FP64 and STRING (as a 1-D list). Cast in the model or pick a
    supported type.
    """, "IO-18",
    example=Example(
        TRT + 'input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]\n' + OUT, files=("1/model.plan",)
    ))
DUPLICATE_INPUT = register("IO50", "two inputs with the same name", "warning", """
    Triton loads a config that lists one input name twice, but then expects both:
    every request fails with "expected 2 inputs but got 1 inputs". Remove or rename the
    second entry.
    """, "NC-01",
    example=Example(H + IN + IN + OUT))
DUPLICATE_OUTPUT = register("IO51", "two outputs with the same name", "warning", """
    Triton loads a config that lists one output name twice and silently uses the first
    entry; the second (with its dims and type) is never applied. Remove or rename it.
    """, "NC-01",
    example=Example(H + IN + OUT + OUT))
INPUT_IS_OUTPUT = register("IO52", "name used for an input and an output", "info", """
    Triton loads a config whose input and output share a name, and inputs and outputs
    are addressed separately, so this works: a model may pass a tensor through
    (TensorRT-LLM's preprocessing returns its REQUEST_OUTPUT_LEN input). It is often a
    copy-paste slip, though, so it is noted: check that both are the model's tensor names.
    """, "NC-01",
    example=Example(H + IN + 'output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'))
REPEATED_BATCH_DIM = register("IO53", "the model file shows the batch dimension doubled", "warning", """
    With max_batch_size > 0 Triton prepends the batch dimension itself: dims: [ 3, 224,
    224 ] means full shape [ -1, 3, 224, 224 ]. Writing the batch dimension again
    (dims: [ -1, 3, 224, 224 ]) asks for one rank more. Where the model has the shape
    [ -1, 3, 224, 224 ], the backend refuses the config (ORT05). Where the model file was
    exported with that extra dimension too ([ -1, -1, 3, 224, 224 ]: two variable leading
    dimensions before fixed ones), Triton loads it without a word, and every request
    must carry an extra dimension of size 1. Export the model with one batch dimension
    and drop the leading -1 from dims. A leading -1 alone is not flagged: variable first
    dimensions (box counts, sequence lengths, image sizes) are legitimate.
    """,
    example=Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 3, 224, 224 ] } ]\n' + OUT,
        files=("1/",),
        onnx=OnnxModel((("INPUT0", "FLOAT", ("batch", "n", 3, 224, 224)),), (("OUTPUT0", "FLOAT", ("batch", 4)),)),
    ))
RAGGED_NO_BATCH = register("IO54", "allow_ragged_batch on a model without batching", "warning", """
    allow_ragged_batch lets the dynamic batcher put requests of different shapes into
    one batch. With max_batch_size: 0 there is no batching, so the flag does nothing.
    Enable batching (max_batch_size > 0 and dynamic_batching) or drop the flag.
    """, "NC-12",
    example=Example(
        'backend: "python"\nmax_batch_size: 0\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
        + OUT
    ))


def dtype_name(value: int) -> str:
    try:
        return data_type_name(value)
    except ValueError:
        return str(value)


def element_count(dims) -> int:
    """Triton's element count: -1 when any dim is -1; raises OverflowError past int64."""
    count = 1
    for dim in dims:
        if dim == WILDCARD:
            return WILDCARD
        count *= dim
        if count > INT64_MAX:
            raise OverflowError
    return count


def _segments(dims) -> list[int]:
    """Products of the fixed dims between the -1 dims."""
    counts, current = [], 1
    for dim in dims:
        if dim == WILDCARD:
            counts.append(current)
            current = 1
        else:
            current *= dim
    counts.append(current)
    return counts


def _check_shape(ctx, io, path: tuple, what: str, max_batch_size: int) -> None:
    """ValidateIOShape: dims and reshape of one input or output."""
    if not io.dims:
        ctx.report(NO_DIMS, f"{what} has no dims", path + ("dims",),
                   hint="write its shape without the batch dimension, e.g. dims: [ 4 ]; "
                        "a scalar is dims: [ 1 ] (plus reshape: { shape: [ ] } when batching)")
        return
    has_reshape = io.HasField("reshape")
    if has_reshape and not io.reshape.shape and max_batch_size == 0:
        ctx.report(EMPTY_RESHAPE_NO_BATCH, f"{what} has an empty reshape but the model does not batch",
                   path + ("reshape",), hint="remove the reshape and keep dims: [ 1 ]")
        return
    bad = False
    for j, dim in enumerate(io.dims):
        if dim < 1 and dim != WILDCARD:
            bad = True
            ctx.report(BAD_DIM, f"{what} has dimension {dim}; dimensions must be >= 1 or -1",
                       path + ("dims", j), hint="use the real size, or -1 for a size that varies")
    if not has_reshape:
        return
    for j, dim in enumerate(io.reshape.shape):
        if dim < 1 and dim != WILDCARD:
            bad = True
            ctx.report(BAD_RESHAPE_DIM, f"{what} has reshape dimension {dim}; it must be >= 1 or -1",
                       path + ("reshape", "shape", j), hint="use the real size, or -1 for a size that varies")
    if bad:
        return
    sizes = []
    for dims, label, sub in ((io.dims, "dims", ("dims",)), (io.reshape.shape, "reshape", ("reshape",))):
        try:
            sizes.append(element_count(dims))
        except OverflowError:
            ctx.report(ELEMENT_OVERFLOW, f"{what}: the element count of its {label} exceeds {INT64_MAX}",
                       path + sub, hint="check the dimensions for a typo")
            return
    dims_size, reshape_size = sizes
    shapes = f"dims {list(io.dims)} vs reshape {list(io.reshape.shape)}"
    # An empty reshape counts 1 element here, so dims [ 1 ] -> reshape [ ] passes as in Triton.
    if dims_size != reshape_size:
        ctx.report(RESHAPE_SIZE, f"{what} has different sizes for dims and reshape ({shapes})",
                   path + ("reshape",), hint="reshape must hold the same number of elements as dims")
        return
    if dims_size == WILDCARD:
        dim_counts, reshape_counts = _segments(io.dims), _segments(io.reshape.shape)
        if len(dim_counts) != len(reshape_counts):
            ctx.report(RESHAPE_VARIABLE, f"{what} has {len(dim_counts) - 1} variable dimension(s) in dims but "
                       f"{len(reshape_counts) - 1} in reshape ({shapes})", path + ("reshape",),
                       hint="use the same number of -1 dimensions in dims and reshape")
        elif dim_counts != reshape_counts:
            ctx.report(RESHAPE_VARIABLE, f"{what} has different sizes for dims and reshape between the "
                       f"variable dimensions ({shapes})", path + ("reshape",),
                       hint="the fixed dimensions between two -1 must multiply to the same count on both sides")


def _check_entry(ctx, io, kind: str, index: int) -> None:
    config = ctx.effective
    path = (kind, index)
    what = f"{kind} '{io.name}'" if io.name else f"{kind} #{index + 1}"
    if not io.name:
        ctx.report(NO_NAME, f"{what} has no name", path + ("name",),
                   hint="add name: \"...\" with the tensor's name in the model")
    # A backend that fills in inputs and outputs at load (DALI, a Python auto_complete_config
    # that was not run) may supply a missing data_type or dims: AC52/AC53 say it is not checked.
    left_to_backend = ctx.io_left_to_backend
    if io.data_type == 0 and not left_to_backend:
        ctx.report(NO_DATA_TYPE, f"{what} has no data_type", path + ("data_type",),
                   hint="add data_type: TYPE_FP32 (or the type the model declares)")
    if io.dims or not left_to_backend:
        _check_shape(ctx, io, path, what, config.max_batch_size)
    if kind == "input" and io.format in (1, 2) and len(io.dims) != 3:
        fmt = model_config_pb2().ModelInput.Format.Name(io.format)
        ctx.report(FORMAT_RANK, f"{what} has format {fmt} but {len(io.dims)} dims; image formats need 3",
                   path + ("format",), hint="write dims as 3 dimensions (without the batch), or drop `format`")
    if io.is_shape_tensor and config.platform != TRT_PLATFORM:
        ctx.report(SHAPE_TENSOR_PLATFORM, f"{what} is marked is_shape_tensor but the platform is "
                   f"'{config.platform or config.backend}', not {TRT_PLATFORM}", path + ("is_shape_tensor",),
                   hint="remove is_shape_tensor (only TensorRT engines have shape tensors)")
    if io.is_non_linear_format_io:
        if config.platform != TRT_PLATFORM:
            ctx.report(NON_LINEAR_IO, f"{what} is marked is_non_linear_format_io but the platform is not "
                       f"{TRT_PLATFORM}", path + ("is_non_linear_format_io",),
                       hint="remove is_non_linear_format_io")
        elif len(io.dims) != 3:
            ctx.report(NON_LINEAR_IO, f"{what} uses a non-linear IO format and needs 3 dims, not {len(io.dims)}",
                       path + ("dims",), hint="write the 3 dims of the tensor (without the batch)")
    allowed = None if runs_python_runtime(config) else BACKEND_DATA_TYPES.get(config.backend)
    if allowed and io.data_type != 0 and dtype_name(io.data_type) not in allowed:
        ctx.report(UNSUPPORTED_TYPE, _unsupported_type_text(ctx, what, dtype_name(io.data_type)),
                   path + ("data_type",), hint=f"use one of {', '.join(sorted(allowed))}")


def _unsupported_type_text(ctx, what: str, type_name: str) -> str:
    backend = ctx.effective.backend
    if backend == "pytorch":  # the PyTorch backend's own words
        return f"unsupported datatype {type_name} for {what} for model '{ctx.name}'"
    return f"{what} has data_type {type_name}, which the {backend} backend does not support"


def _check_input_flags(ctx, io, index: int) -> None:
    config = ctx.effective
    path = ("input", index)
    what = f"input '{io.name}'"
    if io.optional and config.backend in NO_OPTIONAL_INPUT_BACKENDS and not runs_python_runtime(config):
        ctx.report(OPTIONAL_UNSUPPORTED, f"{what} is optional, but the {config.backend} backend does not "
                   "support optional inputs", path + ("optional",), hint="remove optional: true")
    if io.optional and config.backend == "onnxruntime":
        if config.max_batch_size != 0:
            ctx.report(OPTIONAL_ORT, f"{what} is optional, which ONNX Runtime does not support for a batching "
                       f"model (max_batch_size: {config.max_batch_size})", path + ("optional",),
                       hint="make the input required, or set max_batch_size: 0")
        if io.allow_ragged_batch:
            ctx.report(OPTIONAL_ORT, f"{what} is both optional and allow_ragged_batch, which ONNX Runtime refuses",
                       path + ("allow_ragged_batch",), hint="drop one of the two flags")
    if io.allow_ragged_batch and io.is_non_linear_format_io and config.backend == "tensorrt":
        ctx.report(RAGGED_NON_LINEAR, f"{what} allows ragged batching but uses a non-linear IO format",
                   path + ("allow_ragged_batch",), hint="drop allow_ragged_batch or is_non_linear_format_io")
    if io.allow_ragged_batch and config.max_batch_size == 0:
        ctx.report(RAGGED_NO_BATCH, f"{what} allows ragged batching, but the model does not batch "
                   "(max_batch_size: 0)", path + ("allow_ragged_batch",),
                   hint="set max_batch_size > 0 with dynamic_batching, or drop allow_ragged_batch")


def escapes_directory(relative: str) -> bool:
    """Whether a path written relative to a directory is absolute or leaves it."""
    norm = posixpath.normpath(relative.replace("\\", "/"))
    return posixpath.isabs(norm) or norm == ".." or norm.startswith("../")


def _check_label_file(ctx, io, index: int) -> None:
    label = io.label_filename
    path = ("output", index, "label_filename")
    if escapes_directory(label):
        ctx.report(LABEL_FILE, f"label file '{label}' of output '{io.name}' is outside the model directory",
                   path, hint="put the file in the model directory and name it relative to it, e.g. \"labels.txt\"")
        return
    if not ctx.can_check(LABEL_FILES):
        return
    model_dir = ctx.model_dir.resolve()
    target = (model_dir / label).resolve()
    if not target.is_relative_to(model_dir):
        ctx.report(LABEL_FILE, f"label file '{label}' of output '{io.name}' is outside the model directory",
                   path, hint="put the file in the model directory and name it relative to it, e.g. \"labels.txt\"")
    elif not target.is_file():
        ctx.report(LABEL_FILE, f"label file '{label}' of output '{io.name}' does not exist in {ctx.model_dir}",
                   path, hint="label files live in the model directory (next to config.pbtxt), not in a version "
                              "directory")


def _check_names(ctx) -> None:
    config = ctx.effective
    seen_inputs: dict[str, int] = {}
    for i, io in enumerate(config.input):
        if io.name in seen_inputs:
            ctx.report(DUPLICATE_INPUT, f"input '{io.name}' is listed twice (first as input #{seen_inputs[io.name] + 1})",
                       ("input", i, "name"), hint="remove or rename the second entry")
        elif io.name:
            seen_inputs[io.name] = i
    seen_outputs: dict[str, int] = {}
    labelled: set[str] = set()
    for i, io in enumerate(config.output):
        if io.label_filename:
            if io.name in labelled:
                ctx.report(MULTIPLE_LABELS, f"output '{io.name}' has a second label file", ("output", i, "label_filename"),
                           hint="give each output its own name")
            labelled.add(io.name)
        if io.name in seen_outputs:
            ctx.report(DUPLICATE_OUTPUT, f"output '{io.name}' is listed twice (first as output "
                       f"#{seen_outputs[io.name] + 1})", ("output", i, "name"), hint="remove or rename the second entry")
        elif io.name:
            seen_outputs[io.name] = i
        if io.name in seen_inputs:
            ctx.report(INPUT_IS_OUTPUT, f"'{io.name}' is the name of an input and of an output",
                       ("output", i, "name"), hint="fine for a tensor the model passes through; otherwise use the model's own tensor names")


@model_rule
def check_inputs_and_outputs(ctx) -> None:
    config = ctx.effective
    for i, io in enumerate(config.input):
        _check_entry(ctx, io, "input", i)
        _check_input_flags(ctx, io, i)
    for i, io in enumerate(config.output):
        _check_entry(ctx, io, "output", i)
        if io.label_filename:
            _check_label_file(ctx, io, i)
    _check_names(ctx)
