"""Implicit state of sequence models (ST-*): ``sequence_batching.state`` and its
``initial_state``, checked as Triton's sequence scheduler does when it is created
(after auto-complete, so on ``ctx.effective``).
"""

from __future__ import annotations

from tritonctl.repo_schema.context import DATA_FILES
from tritonctl.repo_schema.datatypes import BY_CONFIG
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, ONNX, STATE, Example
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.rules.io import dtype_name, element_count

KIND_GPU = 1

SEVERAL_INITIAL = register("ST01", "state with more than one initial_state", "error", """
    A state starts from at most one initial value. Triton: "initial_state field for
    state input '<name>' must contain exactly one or zero element".
    """, "ST-01",
    example=Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }, { name: "b" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ))
INITIAL_TYPE = register("ST02", "initial_state data type differs from the state's", "error", """
    The initial value must have the state's data_type: "The data type used for
    'initial_state' field of state '<name>' does not match the state data type."
    """, "ST-02",
    example=Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "zeros" data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ))
INITIAL_NAME = register("ST03", "initial_state without a name", "error", """
    Triton requires a name for each initial state: "Field 'name' must be set when using
    initial_state for state input '<name>'."
    """, "ST-03",
    example=Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ))
STATE_REPEATED = register("ST04", "state input name given twice", "error", """
    Two states with initial values use the same input_name: "State input name '<name>'
    specified more than once."
    """, "ST-04",
    example=Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [\n    { input_name: "S" output_name: "S_OUT" data_type: TYPE_FP32 dims: [ 4 ] initial_state [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ] },\n    { input_name: "S" output_name: "S_OUT2" data_type: TYPE_FP32 dims: [ 4 ] initial_state [ { name: "b" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } ] }\n  ]\n}\n',
        files=("1/model.onnx",),
    ))
INITIAL_DIMS = register("ST05", "initial_state dims do not fit the state", "error", """
    initial_state.dims must have the state's rank, contain no -1, and equal every state
    dimension that is not -1. Triton: "Number of dimensions in 'initial_state' doesn't
    match the size of 'state' dimensions", "'initial_state' field for state input name
    '<name>' contains variable dimensions", "'initial_state' dim for input name '<name>'
    doesn't match 'state' dim description".
    """, "ST-05",
    example=Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [ 8 ] zero_data: true } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ))
INITIAL_DATA = register("ST06", "initial_state without usable data", "error", """
    An initial state needs zero_data: true or data_file. data_file is read from
    <model>/initial_state/<file> and, except for TYPE_STRING, must hold at least
    elements x type size bytes. Triton: "initial_state setting expects state'<name>' to
    have state_data set", a file read error, or "initial_state setting expects N bytes,
    but the data provided from <file>only has M bytes".
    """, "ST-06",
    example=Example(
        ONNX
        + IO
        + 'sequence_batching {\n  state [ {\n    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 4 ]\n    initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [ 4 ] } ]\n  } ]\n}\n',
        files=("1/model.onnx",),
    ))
GROWABLE_MEMORY = register("ST07", "use_growable_memory without its requirements", "error", """
    Growable state memory is CUDA virtual memory shared by the state's input and output:
    it needs use_same_buffer_for_input_output: true and KIND_GPU instances. Otherwise the
    state cannot be set up and every sequence fails when it starts.
    """, "ST-07",
    example=Example(ONNX + IO + STATE % " use_growable_memory: true", files=("1/model.onnx",)))
STATE_OUTPUT_NOT_LISTED = register("ST50", "state output is not listed under output", "info", """
    Clients can read a state only when its output_name is also listed under `output`
    (the docs recommend this for debugging stateful models); requests for it fail
    otherwise. Most stateful models keep their state internal, which is fine, so this is
    a note. Add an `output` entry with the state's name, type and dims to read it.
    """, "NC-13",
    example=Example(ONNX + IO + STATE % "", files=("1/model.onnx",)))
# Known backends that do not carry implicit state; custom backends may (Triton's own
# implicit_state QA backend does), so they are not judged.
NO_STATE_BACKENDS = {"python", "tensorflow", "openvino", "dali", "fil", "identity", "repeat", "square"}
STATE_BACKEND = register("ST51", "implicit state on a backend without state support", "warning", """
    Implicit state is carried by the backend: only the ONNX Runtime, TensorRT and
    PyTorch backends write the output state back. Triton loads the model on other
    backends (Python included), but the state is never updated between requests. Keep
    the state inside the model, or use one of those backends.
    """, "ST-08",
    example=Example(H + IO + STATE % ""))


def _check_initial_state(ctx, state, path: tuple, seen: set[str]) -> None:
    initial = state.initial_state[0]
    ipath = path + ("initial_state", 0)
    name = state.input_name
    if initial.data_type != state.data_type:
        ctx.report(INITIAL_TYPE, f"initial_state of state '{name}' has data_type {dtype_name(initial.data_type)}, "
                   f"the state has {dtype_name(state.data_type)}", ipath + ("data_type",),
                   hint=f"use data_type: {dtype_name(state.data_type)}")
    if not initial.name:
        ctx.report(INITIAL_NAME, f"initial_state of state '{name}' has no name", ipath + ("name",),
                   hint="add name: \"...\"")
    if name in seen:
        ctx.report(STATE_REPEATED, f"state input name '{name}' has an initial_state twice", path + ("input_name",),
                   hint="give each state its own input_name")
    seen.add(name)
    if len(initial.dims) != len(state.dims):
        ctx.report(INITIAL_DIMS, f"initial_state of state '{name}' has {len(initial.dims)} dims, the state has "
                   f"{len(state.dims)}", ipath + ("dims",), hint=f"use the state's rank: dims like {list(state.dims)}")
        return
    for j, (dim, state_dim) in enumerate(zip(initial.dims, state.dims)):
        if dim == -1:
            ctx.report(INITIAL_DIMS, f"initial_state of state '{name}' has a variable dimension", ipath + ("dims", j),
                       hint="initial values have a fixed shape: write the size")
            return
        if state_dim != -1 and dim != state_dim:
            ctx.report(INITIAL_DIMS, f"initial_state dim {dim} of state '{name}' differs from the state dim "
                       f"{state_dim}", ipath + ("dims", j), hint=f"use {state_dim}")
            return
    _check_initial_data(ctx, initial, ipath, name)


def _check_initial_data(ctx, initial, ipath: tuple, name: str) -> None:
    if initial.WhichOneof("state_data") is None:
        ctx.report(INITIAL_DATA, f"initial_state of state '{name}' has neither zero_data nor data_file", ipath,
                   part="key", hint="add zero_data: true, or data_file: \"<file in initial_state/>\"")
        return
    if initial.WhichOneof("state_data") != "data_file":
        return
    if not ctx.can_check(DATA_FILES):
        return
    data_file = ctx.model_dir / "initial_state" / initial.data_file
    dpath = ipath + ("data_file",)
    if not data_file.is_file():
        ctx.report(INITIAL_DATA, f"initial_state data file '{initial.data_file}' of state '{name}' does not exist "
                   f"in {ctx.model_dir / 'initial_state'}", dpath,
                   hint="data files live in the model's initial_state/ directory")
        return
    type_name = dtype_name(initial.data_type)
    known = BY_CONFIG.get(type_name)
    if known is None or not known.size:  # TYPE_STRING: variable length
        return
    try:
        needed = max(element_count(initial.dims), 0) * known.size
    except OverflowError:
        return  # the state's dims are impossible; IO-style overflow is not this rule's concern
    size = data_file.stat().st_size
    if size < needed:
        ctx.report(INITIAL_DATA, f"initial_state data file '{initial.data_file}' has {size} bytes; "
                   f"{list(initial.dims)} x {type_name} needs {needed}", dpath,
                   hint="write the raw little-endian values of the whole initial tensor")


def _check_growable(ctx, state, path: tuple) -> None:
    if not state.use_growable_memory:
        return
    if not state.use_same_buffer_for_input_output:
        ctx.report(GROWABLE_MEMORY, f"state '{state.input_name}' uses growable memory without "
                   "use_same_buffer_for_input_output", path + ("use_growable_memory",),
                   hint="add use_same_buffer_for_input_output: true")
    kinds = [group.kind for group in ctx.config.instance_group]
    if any(kind not in (0, KIND_GPU) for kind in kinds):  # KIND_AUTO may still become KIND_GPU
        ctx.report(GROWABLE_MEMORY, f"state '{state.input_name}' uses growable memory, which needs KIND_GPU "
                   "instances", path + ("use_growable_memory",),
                   hint="use instance_group [ { kind: KIND_GPU } ], or drop use_growable_memory")


@model_rule
def check_implicit_state(ctx) -> None:
    seq = ctx.effective.sequence_batching
    if not seq.state:
        return
    backend = ctx.effective.backend
    if backend in NO_STATE_BACKENDS:
        ctx.report(STATE_BACKEND, f"implicit state is configured, but the {backend or 'selected'} backend does not "
                   "update state", ("sequence_batching", "state"), part="key",
                   hint="use ONNX Runtime, TensorRT or PyTorch, or keep the state inside the model")
    outputs = {io.name for io in ctx.effective.output}
    seen: set[str] = set()
    for i, state in enumerate(seq.state):
        path = ("sequence_batching", "state", i)
        if len(state.initial_state) > 1:
            ctx.report(SEVERAL_INITIAL, f"state '{state.input_name}' has {len(state.initial_state)} initial_state "
                       "entries; at most one is allowed", path + ("initial_state", 1), part="key",
                       hint="keep one initial_state")
        elif state.initial_state:
            _check_initial_state(ctx, state, path, seen)
        _check_growable(ctx, state, path)
        if state.output_name and state.output_name not in outputs:
            ctx.report(STATE_OUTPUT_NOT_LISTED, f"state output '{state.output_name}' is not listed under output, so "
                       "clients cannot request it", path + ("output_name",),
                       hint=f"add output [ {{ name: \"{state.output_name}\" data_type: {dtype_name(state.data_type)} "
                            f"dims: {list(state.dims)} }} ]")
