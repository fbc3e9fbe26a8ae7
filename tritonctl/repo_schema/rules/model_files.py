"""The config against the model files it runs (BE-ORT, BE-TRT, BE-PT, BE-PY)."""

from __future__ import annotations

import difflib
from pathlib import Path

from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.diagnostics import Diagnostic, Span, code_info, register
from tritonctl.repo_schema.examples import H, IO, ONNX, ORT_FIXED, ORT_OK, OUT, PT, PTIO, Example, OnnxModel
from tritonctl.repo_schema.modelfiles import (LFS_HINT, ModelFileError, ModelIO, OnnxOperators, TensorInfo,
                                              git_lfs_pointer_size, lfs_pointer_problem)
from tritonctl.repo_schema.modelfiles.onnx import onnx_model_path, read_onnx_io
from tritonctl.repo_schema.modelfiles.python import read_python_model
from tritonctl.repo_schema.modelfiles.pytorch import naming_style, tensor_index
from tritonctl.repo_schema.modelfiles.tensorrt import read_plan_io, unavailable_reason
from tritonctl.repo_schema.normalize import runs_python_runtime
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.rules.layout import anchor, default_file, path_problem, required_files, versions_to_load
from tritonctl.repo_schema.schema import data_type_name, model_config_pb2

UNREADABLE = register(
    "MF01", "model file is corrupt or unreadable", "error",
    """
    The model file in a version directory cannot be parsed (for ONNX: the protobuf does
    not decode, or it has no graph). Triton fails the version when the backend opens it.
    Re-export the model; a truncated download is a common cause (a Git LFS pointer file
    in place of the model is reported as MF02).
    """, "PB-10",
    example=Example(ONNX + IO, files=("1/model.onnx",)))
LFS_POINTER = register(
    "MF02", "model file is a Git LFS pointer", "error",
    """
    The file in the version directory is a Git LFS pointer - a few lines naming the real
    file's hash and size - not the model itself: the repository was cloned without Git
    LFS, or the objects were never fetched. Triton fails when the backend opens it (for
    ONNX: "protobuf parsing failed"). Run `git lfs install` and `git lfs pull` in the
    repository (or download the model file) and validate again.
    """, "PB-10")
INPUT_COUNT = register(
    "ORT01", "config and ONNX model disagree on the number of inputs", "error",
    """
    ONNX Runtime needs one config entry for every model input: config inputs (optional
    ones excepted) plus batch inputs, sequence controls and states must add up to the
    model's inputs. Triton fails: "unable to load model '<m>', configuration expects N
    inputs, model provides M".
    """, "BE-ORT-01",
    example=Example(
        ONNX
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        + OUT,
        files=("1/",),
        onnx=ORT_OK,
    ))
UNKNOWN_NAME = register(
    "ORT02", "tensor name not in the ONNX model", "error",
    """
    Config input and output names must be the model's tensor names. Triton fails:
    "unexpected inference input|output '<n>', allowed inputs|outputs are: ...". ONNX
    exports often rename tensors (e.g. '307', 'input.1'); check them with Netron or
    `tritonctl generate`.
    """, "BE-ORT-02",
    example=Example(
        ONNX + 'input [ { name: "input" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + OUT, files=("1/",), onnx=ORT_OK
    ))
DTYPE = register(
    "ORT03", "data_type differs from the ONNX model", "error",
    """
    data_type must be the model's element type (FLOAT is TYPE_FP32, INT64 is
    TYPE_INT64, ...). Triton fails: "configuration expects datatype <cfg> for input
    '<n>', model provides TYPE_<onnx>". Change data_type, or cast inside the model.
    """, "BE-ORT-03",
    example=Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ 4 ] } ]\n' + OUT, files=("1/",), onnx=ORT_OK
    ))
NO_BATCH_AXIS = register(
    "ORT04", "max_batch_size > 0 but the ONNX model has no dynamic batch dimension", "error",
    """
    With max_batch_size > 0 Triton prepends a batch dimension, so every model tensor
    needs rank >= 1 and a variable (-1) first dimension. A model exported with a fixed
    batch (often 1) fails: "for the model to support batching the shape should have at
    least 1 dimension and the first dimension must be -1; but shape expected by the
    model is [..]". Re-export with a dynamic batch axis, or set max_batch_size: 0 and
    give the full shape in dims.
    """, "BE-ORT-04",
    example=Example(ONNX + IO, files=("1/",), onnx=ORT_FIXED))
SHAPE = register(
    "ORT05", "dims differ from the ONNX model's shape", "error",
    """
    Triton compares [-1] + dims (batching) or dims (non-batching), or reshape when set,
    with the model's shape: same rank; for inputs a -1 in the model accepts any value
    but a fixed model dimension must be repeated exactly; outputs must match exactly.
    Triton fails: "the model expects K dimensions (shape ..) but the model configuration
    specifies ...". A common cause is repeating the batch dimension in dims while
    max_batch_size > 0.
    """, "BE-ORT-05",
    example=Example(
        ONNX + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]\n' + OUT, files=("1/",), onnx=ORT_OK
    ))
OLD_OPSET = register(
    "ORT06", "ONNX operator version that onnxruntime does not implement", "error",
    """
    onnxruntime guarantees the default ONNX domain from opset 7 on ("All versions of ONNX
    Runtime support ONNX opsets from ONNX v1.2.1+ (opset version 7 and higher)"); of the
    older operator versions it implements some (Relu-6, Softmax-1, Conv-1, ...) and not
    others (Add-6, Gemm-6, BatchNormalization-6, PRelu-6, ...). A model stamped with an
    opset below 7 that uses one of the latter fails to load in Triton's onnxruntime
    backend: "Could not find an implementation for Add(6) node". Convert the model to a
    newer opset with onnx's version converter, or export it again with a current exporter.
    """, "BE-ORT-06",
    example=Example(ONNX + IO, files=("1/",), onnx=OnnxModel(ORT_OK.inputs, ORT_OK.outputs, op="Relu", opset=5)))
UNKNOWN_DOMAIN = register(
    "ORT07", "ONNX model uses operators onnxruntime does not implement", "error",
    """
    Every node's domain must be one onnxruntime implements: the default ONNX domain,
    ai.onnx.ml, com.microsoft (onnxruntime's contrib operators), or a domain of the
    model's own functions. Other domains (ai.onnx.preview.training, org.pytorch.aten,
    ai.onnx.contrib, a company's custom operators) need their kernels registered:
    Triton's onnxruntime backend fails to load the model ("<domain>:<op>(-1) is not a
    registered function/op") unless model_operations { op_library_filename } names the
    library that implements them.
    """, "BE-ORT-07",
    example=Example(ONNX + IO, files=("1/",),
                    onnx=OnnxModel(ORT_OK.inputs, ORT_OK.outputs, domain="ai.onnx.preview.training")))
# The domains onnxruntime's inference builds register kernels or schemas for ("" is ai.onnx).
ORT_DOMAINS = frozenset({"", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc"})
ORT_GUARANTEED_OPSET = 7
# Operator versions older than opset 7 that onnxruntime has no CPU kernel for (its kernel
# registry, onnxruntime 1.17-1.32, against onnx's operator history); the other old versions run.
ORT_UNIMPLEMENTED_OLD = {
    1: frozenset({"Abs", "Add", "And", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat",
                  "Constant", "Div", "Dropout", "Elu", "Equal", "Exp", "Floor", "GRU", "Gemm", "GlobalLpPool",
                  "Greater", "HardSigmoid", "InstanceNormalization", "LSTM", "LeakyRelu", "Less", "Log", "LpPool",
                  "Max", "Mean", "Min", "Mul", "Neg", "Or", "PRelu", "Pad", "Pow", "RNN", "Reciprocal", "Relu",
                  "Selu", "Sigmoid", "Split", "Sqrt", "Sub", "Sum", "Tanh", "Tile", "Upsample", "Xor"}),
    3: frozenset({"GRU"}),
    6: frozenset({"Add", "BatchNormalization", "Div", "Dropout", "Gemm", "Mul", "PRelu", "Sub"}),
}
TRT_NOT_CHECKED = register(
    "TRT50", "TensorRT plan not checked", "info",
    """
    Checking a config against a TensorRT engine needs the `tensorrt` package and a GPU
    the engine was built for. Without them tritonctl skips the plan checks. Install
    `tritonctl[tensorrt]` on a GPU machine to run them.
    """, "BE-TRT-01")
TRT_NAME = register(
    "TRT01", "tensor name not in the TensorRT engine", "error",
    """
    Config names must be engine IO tensor names, and every engine input needs a config
    entry. Triton fails: "unexpected inference input '<n>', allowed inputs are: ..." or
    "expected configuration for input '<n>'".
    """, "BE-TRT-01")
TRT_DTYPE = register(
    "TRT02", "data_type differs from the TensorRT engine", "error",
    """
    data_type must equal the engine tensor type. Triton fails: "unexpected datatype
    TYPE_X for inference input '<n>', expecting TYPE_Y".
    """, "BE-TRT-02")
TRT_SHAPE_TENSOR = register(
    "TRT03", "is_shape_tensor / is_non_linear_format_io differ from the engine", "error",
    """
    is_shape_tensor and is_non_linear_format_io must match the engine in both
    directions ("is incorrectly specified as a shape tensor", "is a shape tensor but
    the model configuration doesn't mark it").
    """, "BE-TRT-03")
TRT_DIMS = register(
    "TRT04", "dims differ from the TensorRT engine or its profile", "error",
    """
    [-1] + dims (batching) or dims must have the engine tensor's rank and agree where
    neither side is -1; the config shape, with max_batch_size as the batch, must lie
    within optimization profile 0 ("model expected the shape of dimension i to be
    between a and b but received c").
    """, "BE-TRT-04")
TRT_MAX_BATCH = register(
    "TRT05", "max_batch_size above the engine's maximum", "error",
    """
    Triton fails: "configuration specified max-batch N but TensorRT engine only supports
    max-batch M". Lower max_batch_size or rebuild the engine with a larger profile.
    """, "BE-TRT-05")
PT_NO_IO = register(
    "PT01", "PyTorch model config without inputs or outputs", "error",
    """
    The PyTorch backend has no auto-complete: config.pbtxt must list the inputs and the
    outputs. Triton fails: "model configuration must contain at least one input, none
    were specified".
    """, "BE-PT-01",
    example=Example(
        PT + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n', files=("1/model.pt",)
    ))
PT_INDEX_NAME = register(
    "PT02", "PyTorch sequence control or state not named <name>__<index>", "error",
    """
    TorchScript models take positional arguments. Sequence controls and states are
    matched to them by the `<name>__<index>` convention only (e.g. START__2); Triton
    fails: "input '<n>' does not follow naming convention i.e. <name>__<index>".
    """, "BE-PT-02",
    example=Example(
        PT
        + PTIO
        + 'sequence_batching {\n  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n}\n',
        files=("1/model.pt",),
    ))
PT_STRING_RANK = register(
    "PT04", "PyTorch TYPE_STRING tensor with more than one dimension", "error",
    """
    The PyTorch backend passes strings as a List[str], so a TYPE_STRING tensor may have
    one dimension in total, the batch dimension included (reshape counts when set).
    Triton fails: "Triton only supports 1 dimensional List of String as input". With
    max_batch_size > 0 use dims: [1] plus reshape: { shape: [] }.
    """, "BE-PT-04",
    example=Example(
        PT
        + 'input [ { name: "TEXT__0" data_type: TYPE_STRING dims: [ 2 ] } ]\n'
        + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        files=("1/model.pt",),
    ))
PT_MIXED_NAMES = register(
    "PT50", "PyTorch inputs mix <name>__<index> and plain names", "warning",
    """
    When some input names follow <name>__<index> and others do not, the backend falls
    back to the config order as the forward() argument order, which silently breaks when
    the list is reordered. Use one naming style.
    """, "BE-PT-02",
    example=Example(
        PT
        + 'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "mask" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        files=("1/model.pt",),
    ))
PY_LOAD = register(
    "PY01", "model.py cannot be loaded", "error",
    """
    The Python backend imports model.py and instantiates its TritonPythonModel class.
    A syntax error ("SyntaxError: invalid syntax (model.py, line N)") or a missing class
    ("module '1.model' has no attribute 'TritonPythonModel'") fails the model.
    """, "BE-PY-01",
    example=Example(H + IO, files=(("1/model.py", "def broken(:\n"),)))
PY_NO_EXECUTE = register(
    "PY50", "TritonPythonModel has no execute method", "warning",
    """
    Triton calls TritonPythonModel.execute(requests) for every batch; without it every
    request fails. Define execute, or inherit it from a base class.
    """, "BE-PY-01",
    example=Example(
        H + IO,
        files=(("1/model.py", "class TritonPythonModel:\n    def initialize(self, args):\n        pass\n"),),
    ))
CONTROL_KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY",
                 "CONTROL_SEQUENCE_CORRID")


def _fmt(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _shape_of(entry) -> tuple[int, ...]:
    return tuple(entry.reshape.shape if entry.HasField("reshape") else entry.dims)


def _shape_path(entry, side: str, index: int) -> tuple:
    return (side, index, "reshape") if entry.HasField("reshape") else (side, index, "dims")


def _dims_ok(config_full: tuple, model: tuple, exact: bool) -> bool:
    return len(config_full) == len(model) and all(
        m == c for m, c in zip(model, config_full) if exact or m != -1)


def _model_files(ctx, default: str) -> list[tuple[int, Path]]:
    """(version, file) of the loaded versions whose model file is there; Git LFS pointers
    are left out (MF02 reports them), and so are names that are paths (PB11)."""
    filename = ctx.effective.default_model_filename or default
    if path_problem(filename):
        return []
    return [(v, d / filename) for v, d in versions_to_load(ctx).items()
            if (d / filename).exists() and git_lfs_pointer_size(_real_file(d / filename)) is None]


def _real_file(path: Path) -> Path:
    """The file a model path names: model.onnx may be a directory holding model.onnx, and a
    SavedModel directory holds saved_model.pb."""
    if not path.is_dir():
        return path
    return path / "saved_model.pb" if path.suffix == ".savedmodel" else path / path.name


@model_rule
def check_lfs_pointers(ctx) -> None:
    if ctx.is_ensemble or ctx.config_path is None:
        return
    if not default_file(ctx.effective) and not ctx.written(("default_model_filename",)):
        return
    if not ctx.can_check(MODEL_FILES):
        return
    for version_dir in versions_to_load(ctx).values():
        for filename, path in required_files(ctx):
            file = _real_file(version_dir / filename)
            problem = lfs_pointer_problem(file) if file.is_file() else None
            if problem:
                where = file.parent.relative_to(ctx.model_dir).as_posix()
                ctx.report(LFS_POINTER, f"{where}/{problem}", path, hint=LFS_HINT)


def _report_unreadable(ctx, exc: Exception, file: Path) -> None:
    ctx.report(UNREADABLE, f"{file.parent.name}/{file.name}: {exc}", anchor(ctx),
               hint="re-export the model file (a truncated copy is a common cause)")


def _check_onnx_tensor(ctx, side: str, index: int, entry, tensor: TensorInfo, batching: bool,
                       batch_outputs: frozenset[str] = frozenset()) -> None:
    model_file = "the ONNX model"
    if tensor.data_type and entry.data_type and data_type_name(entry.data_type) != tensor.data_type:
        ctx.report(DTYPE, f"{side} '{entry.name}': config.pbtxt says {data_type_name(entry.data_type)} but "
                   f"{model_file} declares {tensor.source_type}", (side, index, "data_type"),
                   hint=f"change data_type to {tensor.data_type}, or cast in the model")
    if side == "input" and entry.allow_ragged_batch:
        # ONNX Runtime hands a ragged input over as one 1-D tensor of the whole batch's elements.
        if tensor.ranked and tuple(tensor.dims) != (-1,):
            ctx.report(SHAPE, f"input '{entry.name}' allows ragged batches, which ONNX Runtime passes as one 1-D "
                       f"tensor, but {model_file}'s shape is {_fmt(tensor.dims)}: configuration expects model "
                       "provides input with shape [-1]", _shape_path(entry, side, index),
                       hint="export the input with the single dynamic shape [-1]; batch_input tensors tell the "
                            "model where each request's elements are")
        return
    if side == "output" and entry.name in batch_outputs:
        return  # a batch output's shape comes from its source input, not from dims (Triton skips it too)
    if not tensor.ranked or (batching and (not tensor.dims or tensor.dims[0] != -1)):
        return  # no shape to compare, or reported as ORT04
    shape = _shape_of(entry)
    if not tensor.dims and not batching:
        if any(d != 1 for d in shape):
            ctx.report(SHAPE, f"{side} '{entry.name}' is a scalar in {model_file}, but dims are {_fmt(shape)}",
                       _shape_path(entry, side, index), hint="use dims: [ 1 ] for a scalar")
        return
    full = ((-1,) + shape) if batching else shape
    if _dims_ok(full, tensor.dims, exact=side == "output"):
        if batching and doubled_batch(shape, tensor.dims):
            from tritonctl.repo_schema.rules.io import REPEATED_BATCH_DIM

            ctx.report(REPEATED_BATCH_DIM, f"{side} '{entry.name}': {model_file} has the shape "
                       f"{_fmt(tensor.dims)}, the batch dimension twice, and dims {_fmt(shape)} repeat it after "
                       "the one max_batch_size adds", _shape_path(entry, side, index) + (0,),
                       hint=f"export the model with one batch dimension ({_fmt(tensor.dims[1:])}) and use dims: "
                            f"{_fmt(shape[1:])}")
        return
    suggestion = tensor.dims[1:] if batching else tensor.dims
    message = (f"{side} '{entry.name}': config shape {_fmt(full)}"
               f"{' (batch dimension from max_batch_size, then dims)' if batching else ''} does not match "
               f"{model_file}'s shape {_fmt(tensor.dims)}")
    if batching and len(shape) == len(tensor.dims) and shape and shape[0] == -1:
        hint = f"dims must leave out the batch dimension that max_batch_size adds: use dims: {_fmt(suggestion)}"
    else:
        hint = f"use dims: {_fmt(suggestion)}" + (" (outputs must match exactly, -1 included)"
                                                   if side == "output" else "")
    ctx.report(SHAPE, message, _shape_path(entry, side, index), hint=hint)


def doubled_batch(dims: tuple, model_dims: tuple) -> bool:
    """Whether config ``dims`` (after the batch dimension) start with a -1 that repeats the
    batch: the model's shape is [-1, -1, fixed...] and dims are [-1, fixed...] (rank >= 3).
    A leading -1 followed by other variable dimensions is a legitimate variable length."""
    return (len(dims) >= 3 and dims[0] == -1 and all(d > 0 for d in dims[1:])
            and len(model_dims) == len(dims) + 1 and model_dims[:2] == (-1, -1))


def _covered_input_names(config) -> set[str]:
    names = {i.name for i in config.input} | {b.target_name for b in config.batch_input}
    seq = config.sequence_batching
    names |= {c.name for c in seq.control_input} | {s.input_name for s in seq.state}
    return names


def _expected_input_count(config) -> int:
    kinds = model_config_pb2().ModelSequenceBatching.Control.Kind
    control_kinds = {kinds.Name(c.kind) for ci in config.sequence_batching.control_input for c in ci.control}
    return (sum(1 for i in config.input if not i.optional) + len(config.batch_input)
            + len(control_kinds & set(CONTROL_KINDS)) + len(config.sequence_batching.state))


def check_onnx_io(ctx, io: ModelIO) -> None:
    """Compare the written inputs and outputs with the model (ONNX Runtime's ValidateInputs/Outputs)."""
    written = ctx.config
    if not ((written.input or written.batch_input) and written.output):
        return  # auto-complete fills the missing side from the model; AC01 covers its failure
    config = ctx.effective
    batching = config.max_batch_size > 0
    if batching:
        fixed = [t for t in io.inputs + io.outputs if t.ranked and (not t.dims or t.dims[0] != -1)]
        if fixed:
            shown = ", ".join(f"'{t.name}' {_fmt(t.dims)}" for t in fixed[:3])
            ctx.report(NO_BATCH_AXIS, f"max_batch_size is {config.max_batch_size}, but the ONNX model has no "
                       f"dynamic batch dimension: {shown}", ("max_batch_size",),
                       hint=f"re-export with a dynamic first axis (dynamic_axes={{'{fixed[0].name}': {{0: 'batch'}}}}), "
                            f"or set max_batch_size: 0 and dims: {_fmt(fixed[0].dims)}")
    allowed_inputs = [t.name for t in io.inputs] + io.overridable
    for side, entries, tensors, allowed in (("input", config.input, io.inputs, allowed_inputs),
                                            ("output", config.output, io.outputs, [t.name for t in io.outputs])):
        for index, entry in enumerate(entries):
            tensor = next((t for t in tensors if t.name == entry.name), None)
            if tensor is None:
                if entry.name in allowed:
                    continue  # an overridable initializer
                close = difflib.get_close_matches(entry.name, allowed, n=1, cutoff=0.5)
                ctx.report(UNKNOWN_NAME, f"{side} '{entry.name}' is not in the ONNX model; its {side}s are: "
                           f"{', '.join(allowed) or 'none'}", (side, index, "name"),
                           hint=f"did you mean '{close[0]}'?" if close else f"use one of the model's {side} names")
                continue
            _check_onnx_tensor(ctx, side, index, entry, tensor, batching,
                               frozenset(n for b in config.batch_output for n in b.target_name))
    expected = _expected_input_count(config)
    if expected != len(io.inputs):
        covered = _covered_input_names(config)
        missing = [t.name for t in io.inputs if t.name not in covered]
        detail = f"; no config entry for {', '.join(repr(n) for n in missing)}" if missing else ""
        ctx.report(INPUT_COUNT, f"configuration expects {expected} inputs, the ONNX model provides "
                   f"{len(io.inputs)}{detail}", ("input",), part="key",
                   hint="list every model input under input (or as a batch input, sequence control or state)")


@model_rule
def check_onnx_model(ctx) -> None:
    if ctx.effective.backend != "onnxruntime" or not ctx.can_check(MODEL_FILES):
        return

    for _, file in _model_files(ctx, "model.onnx")[-1:]:
        if not onnx_model_path(file).is_file():
            continue  # PB10: a model.onnx directory without model.onnx inside
        try:
            io = read_onnx_io(file)
        except ModelFileError as exc:
            _report_unreadable(ctx, exc, file)
            continue
        check_onnx_io(ctx, io)
        if io.operators is not None:
            check_onnx_operators(ctx, io.operators, f"{file.parent.name}/{file.name}")


def _operator_version(op: str, opset: int) -> int:
    """The version of an ai.onnx operator a model stamped with ``opset`` runs (0: unknown operator)."""
    from onnx import defs

    try:
        return defs.get_schema(op, opset, "").since_version
    except defs.SchemaError:
        return 0


def check_onnx_operators(ctx, operators: OnnxOperators, where: str) -> None:
    """The opsets and operator domains an onnxruntime build can load (ORT06, ORT07)."""
    opset = operators.opsets.get("")
    if opset is not None and opset < ORT_GUARANTEED_OPSET:
        old = [f"{op}({version})" for op in operators.used.get("", ())
               for version in [_operator_version(op, opset)] if op in ORT_UNIMPLEMENTED_OLD.get(version, ())]
        if old:
            ctx.report(OLD_OPSET, f"{where} is stamped with ONNX opset {opset}, and onnxruntime has no "
                       f"implementation of {', '.join(old)}: the model fails to load", anchor(ctx),
                       hint="convert it to opset 7 or newer: onnx.version_converter.convert_version("
                            "onnx.load(path), 13), then onnx.save(...); or export the model again")
    accelerators = {a.name for a in ctx.effective.optimization.execution_accelerators.gpu_execution_accelerator}
    known = ORT_DOMAINS | operators.function_domains | ({"trt.plugins"} if "tensorrt" in accelerators else set())
    unknown = {domain: ops for domain, ops in operators.used.items() if domain not in known}
    if unknown and not ctx.effective.model_operations.op_library_filename:
        shown = ", ".join(f"{', '.join(ops[:3])} of '{domain}'" for domain, ops in sorted(unknown.items()))
        ctx.report(UNKNOWN_DOMAIN, f"{where} uses operators onnxruntime does not implement: {shown}",
                   anchor(ctx), hint="name the library that implements them in model_operations "
                                     "{ op_library_filename: [...] }, or export the model without them")


@model_rule
def check_tensorrt_plan(ctx) -> None:
    if ctx.effective.backend != "tensorrt" or not ctx.can_check(MODEL_FILES):
        return
    files = _model_files(ctx, "model.plan")
    if not files:
        return

    missing = unavailable_reason()
    if missing:
        ctx.report(TRT_NOT_CHECKED, f"TensorRT plan not checked: {missing}", anchor(ctx))
        return
    from tritonctl.repo_schema.rules.tensorrt_plan import check_plan_io

    _, file = files[-1]
    try:
        io = read_plan_io(file)
    except ModelFileError as exc:
        _report_unreadable(ctx, exc, file)
        return
    check_plan_io(ctx, io)


@model_rule
def check_pytorch_config(ctx) -> None:
    config = ctx.effective
    if config.backend != "pytorch" or runs_python_runtime(config):
        return  # the Python runtime passes the inputs in config order: no naming convention
    for side in ("input", "output"):
        if not getattr(config, side):
            ctx.report(PT_NO_IO, f"model configuration must contain at least one {side}, none were specified. "
                       f"(PyTorch model '{ctx.name}': the PyTorch backend has no auto-complete)", anchor(ctx),
                       hint=f"list every model {side} in config.pbtxt")
    seq = config.sequence_batching
    named = [(("sequence_batching", "control_input", i, "name"), c.name, "control")
             for i, c in enumerate(seq.control_input)]
    for i, state in enumerate(seq.state):
        named += [(("sequence_batching", "state", i, "input_name"), state.input_name, "state"),
                  (("sequence_batching", "state", i, "output_name"), state.output_name, "state")]
    for path, name, what in named:
        if name and tensor_index(name) is None:
            ctx.report(PT_INDEX_NAME, _unindexed_text(ctx.name, name, what), path,
                       hint=f"rename it to '{name}__<index>', where <index> is its position among forward()'s "
                       "arguments")
    if naming_style([i.name for i in config.input]) == "mixed":
        ctx.report(PT_MIXED_NAMES, "input names mix <name>__<index> and plain names; the config order then "
                   "decides the forward() argument order", ("input",), part="key",
                   hint="name every input <name>__<index>, or every input after its forward() argument")
    string_type = model_config_pb2().DataType.Value("TYPE_STRING")
    batch = 1 if config.max_batch_size > 0 else 0
    for side in ("input", "output"):
        for index, entry in enumerate(getattr(config, side)):
            shape = _shape_of(entry)
            if entry.data_type == string_type and batch + len(shape) > 1:
                fix = "dims: [ 1 ] and reshape: { shape: [ ] }" if batch else "dims: [ -1 ]"
                ctx.report(PT_STRING_RANK, f"{side} '{entry.name}' is TYPE_STRING with full shape "
                           f"{_fmt(((-1,) if batch else ()) + shape)}; the PyTorch backend passes strings as a "
                           "1-dimensional list", _shape_path(entry, side, index), hint=f"use {fix}")


def _unindexed_text(model: str, name: str, what: str) -> str:
    """The PyTorch backend's words for a sequence control or state without <name>__<index>."""
    if what == "control":
        return f"input '{name}' does not follow <name>__<index> naming convention."
    return (f"PyTorch model '{model}' is using sequence batching with state but state '{name}' does not follow "
            "the <name>__<index> naming convention.")


def _python_diagnostic(ctx, code: str, message: str, file: Path, line: int, col: int, hint: str) -> None:
    ctx.diagnostics.append(Diagnostic(code, code_info(code).severity, message, file,
                                      Span(line, col, line, col + 1), hint, ctx.name))


@model_rule
def check_python_model(ctx) -> None:
    if ctx.effective.backend != "python" or ctx.config_path is None or not ctx.can_check(MODEL_FILES):
        return

    for _, file in _model_files(ctx, "model.py"):
        if not file.is_file():
            continue
        try:
            info = read_python_model(file)
        except OSError as exc:
            _report_unreadable(ctx, exc, file)
            continue
        if info.syntax_error:
            err = info.syntax_error
            _python_diagnostic(ctx, PY_LOAD, f"{file.parent.name}/model.py does not parse: {err.message}", file,
                               err.line, err.col, "fix the syntax error; Triton reports it only when loading")
            continue
        if not info.has_model_class:
            hint = "define class TritonPythonModel with initialize/execute methods"
            if ctx.effective.platform == "pytorch":
                # python_backend's examples/pytorch_platform_handler: the Python backend itself does
                # not read platform; the PyTorch backend's Python runtime serves a torch.nn.Module.
                hint = ('to serve a torch.nn.Module from model.py, write backend: "pytorch" and runtime: '
                        '"model.py" (the PyTorch backend\'s Python runtime); backend "python" ignores platform')
            _python_diagnostic(ctx, PY_LOAD, f"{file.parent.name}/model.py defines no class TritonPythonModel",
                               file, 1, 1, hint)
            continue
        if not info.has_execute and not info.has_bases:
            _python_diagnostic(ctx, PY_NO_EXECUTE, f"{file.parent.name}/model.py: TritonPythonModel has no "
                               "execute method", file, info.class_line, 1,
                               "add def execute(self, requests) returning one response per request")
