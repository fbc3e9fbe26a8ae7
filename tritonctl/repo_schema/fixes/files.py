"""Fixes that take the answer from the model file (PB03, PB08, PB09, IO02, IO03, ORT02, ORT03, ORT05).

A model file is trusted only when it reads as what its name says: an ONNX file must
decode, a .py file must define TritonPythonModel.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from types import SimpleNamespace

from tritonctl.repo_schema.fixes.base import (
    Edit, Fix, FixContext, fixer, insert_after_field, insert_line_after, insert_top_level, quote,
)
from tritonctl.repo_schema.fixes.base import remove_node
from tritonctl.repo_schema.modelfiles import ModelFileError, ModelIO
from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io
from tritonctl.repo_schema.normalize import DEFAULT_FILENAME, core_normalize, detect_backend
from tritonctl.repo_schema.repository import version_dirs
from tritonctl.repo_schema.rules.layout import versions_to_load
from tritonctl.repo_schema.rules.model_files import _covered_input_names
from tritonctl.repo_schema.schema import data_type_name


def file_backend(path: Path) -> str | None:
    """The backend that runs ``path``, when its contents show it: onnxruntime or python."""
    if not path.is_file():
        return None
    if path.suffix == ".onnx":
        from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io

        try:
            read_onnx_io(path)
        except ModelFileError:
            return None
        return "onnxruntime"
    if path.suffix == ".py":
        from tritonctl.repo_schema.modelfiles.python import read_python_model

        try:
            info = read_python_model(path)
        except OSError:
            return None
        return "python" if info.has_model_class and info.syntax_error is None else None
    return None


def detected_backend(ctx: FixContext) -> str | None:
    """The backend Triton detects from a standard model file name, if any."""
    found = detect_backend(ctx.model_dir)
    return found[1] if found else None


def model_file_backend(ctx: FixContext, backend: str) -> str | None:
    """What the model file ``backend`` would load (default_model_filename or its default name) holds."""
    first = ctx.version_dir()
    name = (ctx.config.default_model_filename if ctx.config is not None else "") or DEFAULT_FILENAME.get(backend)
    return file_backend(first / name) if first is not None and name else None


def _effective(ctx: FixContext):
    return core_normalize(ctx.config, ctx.model_dir)


def onnx_io(ctx: FixContext) -> ModelIO | None:
    """The tensors of the ONNX file Triton would load (the newest version the policy selects)."""
    if ctx.config is None:
        return None
    effective = _effective(ctx)
    if effective.backend != "onnxruntime":
        return None
    versions = versions_to_load(SimpleNamespace(versions=version_dirs(ctx.model_dir), effective=effective))
    files = [d / effective.default_model_filename for d in versions.values()]
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    try:
        return read_onnx_io(files[-1])
    except ModelFileError:
        return None


def _backend_lines(backend: str, filename: str | None) -> str:
    lines = [f"backend: {quote(backend)}"]
    if filename:
        lines.append(f"default_model_filename: {quote(filename)}")
    return "\n".join(lines)


@fixer("PB08", """
    Adds `backend` and `default_model_filename` when the first version directory holds
    exactly one model file whose contents show its backend (an ONNX model, or a model.py
    defining TritonPythonModel) under a name Triton does not detect, e.g. 1/resnet50.onnx.
    """)
def fix_no_backend(ctx: FixContext) -> Fix | None:
    config = ctx.config
    first = ctx.version_dir()
    if config is None or first is None or config.platform or config.backend or config.default_model_filename:
        return None
    try:
        files = sorted(p for p in first.iterdir() if p.is_file())
    except OSError:
        return None
    found = [(backend, p.name) for p in files if (backend := file_backend(p)) is not None]
    if len(found) != 1:
        return None
    backend, name = found[0]
    return Fix((insert_top_level(ctx, _backend_lines(backend, name)),),
               f"added backend: \"{backend}\" for {first.name}/{name}")


@fixer("PB09", """
    Adds `backend` when default_model_filename names a file whose contents show its
    backend (an ONNX model, or a model.py defining TritonPythonModel).
    """)
def fix_filename_without_backend(ctx: FixContext) -> Fix | None:
    config = ctx.config
    first = ctx.version_dir()
    entry = ctx.entry(("default_model_filename",))
    if config is None or first is None or entry is None or config.platform or config.backend:
        return None
    backend = file_backend(first / config.default_model_filename)
    node = ctx.node_at(entry[0])
    if backend is None or node is None:
        return None
    return Fix((insert_line_after(ctx.text, node, f"backend: {quote(backend)}"),),
               f"added backend: \"{backend}\" for {config.default_model_filename}")


def _onnx_entry(ctx: FixContext, *tail) -> tuple[str, int, object, ModelIO] | None:
    """(side, index, entry, the model file's tensors) for the input/output field the diagnostic
    points at, when the model file can be read."""
    for path in ctx.paths_at():
        if len(path) == 2 + len(tail) and path[0] in ("input", "output") and path[2:] == tail:
            io = onnx_io(ctx)
            return None if io is None else (path[0], path[1], getattr(ctx.config, path[0])[path[1]], io)
    return None


def _doubled_batch(ctx: FixContext, side: str, index: int, entry, io: ModelIO) -> Fix | None:
    """dims that repeat the batch dimension the model file has once: drop the leading -1."""
    tensor = (io.input if side == "input" else io.output)(entry.name)
    dims = list(entry.dims)
    if tensor is None or not tensor.ranked or entry.HasField("reshape") or ctx.config.max_batch_size <= 0 \
            or len(dims) < 2 or dims[0] != -1 or len(tensor.dims) != len(dims) or tensor.dims[0] != -1:
        return None
    first = ctx.entry((side, index, "dims", 0))
    node = ctx.node_at(first[0]) if first else None
    if node is None or not node.in_list:
        return None
    return Fix((remove_node(ctx.text, node),),
               f"dropped the batch dimension from the dims of {side} '{entry.name}'; max_batch_size adds it")


@fixer("ORT05", """
    Takes dims from the ONNX model file: drops a batch dimension written twice, and where
    the config and the model have the same rank, writes the model's size wherever the two
    differ (an input keeps a fixed size where the model has -1). A different rank or a
    reshape is left to you.
    """)
def fix_onnx_dims(ctx: FixContext) -> Fix | None:
    found = _onnx_entry(ctx, "dims")
    if found is None:
        return None
    side, index, entry, io = found
    doubled = _doubled_batch(ctx, side, index, entry, io)
    if doubled is not None:
        return doubled
    tensor = (io.input if side == "input" else io.output)(entry.name)
    ragged = side == "input" and entry.allow_ragged_batch
    if tensor is None or not tensor.ranked or entry.HasField("reshape") or ragged:
        return None
    batching = ctx.config.max_batch_size > 0
    model_dims = list(tensor.dims[1:] if batching else tensor.dims)
    if (batching and (not tensor.dims or tensor.dims[0] != -1)) or len(model_dims) != len(entry.dims):
        return None
    edits = []
    for k, (want, have) in enumerate(zip(model_dims, entry.dims)):
        if want != have and (side == "output" or want != -1):
            span = ctx.entry((side, index, "dims", k))
            edits.append(Edit(span[2], span[3], str(want)))
    if not edits:
        return None
    return Fix(tuple(edits), f"wrote the dims of {side} '{entry.name}' as the model declares them: {model_dims}")


@fixer("ORT03", "Sets data_type to the element type the ONNX model file declares for the tensor.")
def fix_onnx_data_type(ctx: FixContext) -> Fix | None:
    found = _onnx_entry(ctx, "data_type")
    if found is None:
        return None
    side, index, entry, io = found
    tensor = (io.input if side == "input" else io.output)(entry.name)
    if tensor is None or not tensor.data_type or data_type_name(entry.data_type) == tensor.data_type:
        return None
    span = ctx.entry((side, index, "data_type"))
    return Fix((Edit(span[2], span[3], tensor.data_type),),
               f"set the data_type of {side} '{entry.name}' to {tensor.data_type}, as in the model")


@fixer("ORT02", """
    Renames an input or output to the ONNX model's tensor name when exactly one fits:
    the only model tensor that no config entry uses (when it is the only unknown name
    and the data types agree), or the only close spelling among the unused ones.
    """)
def fix_onnx_name(ctx: FixContext) -> Fix | None:
    found = _onnx_entry(ctx, "name")
    if found is None:
        return None
    side, index, entry, io = found
    config = ctx.config
    tensors = io.inputs if side == "input" else io.outputs
    known = {t.name for t in tensors} | (set(io.overridable) if side == "input" else set())
    used = _covered_input_names(config) if side == "input" else {o.name for o in config.output}
    unused = [t for t in tensors if t.name not in used]
    unknown = [e for e in getattr(config, side) if e.name not in known]
    candidate = None
    if len(unused) == 1 and len(unknown) == 1 and (
            not entry.data_type or not unused[0].data_type or data_type_name(entry.data_type) == unused[0].data_type):
        candidate = unused[0].name
    else:
        close = difflib.get_close_matches(entry.name, [t.name for t in unused], n=2, cutoff=0.75)
        candidate = close[0] if len(close) == 1 else None
    if candidate is None:
        return None
    span = ctx.entry((side, index, "name"))
    return Fix((Edit(span[2], span[3], quote(candidate)),), f"renamed {side} '{entry.name}' to '{candidate}', "
                                                           "the model's tensor")


def _missing_field(ctx: FixContext) -> tuple[str, int, object, object] | None:
    """(side, index, entry, tensor) for an input/output the diagnostic says lacks a field."""
    for path in ctx.paths_at(part="key"):
        if len(path) == 2 and path[0] in ("input", "output"):
            io = onnx_io(ctx)
            entry = getattr(ctx.config, path[0])[path[1]]
            tensor = None if io is None or not entry.name else (
                io.input if path[0] == "input" else io.output)(entry.name)
            return (path[0], path[1], entry, tensor) if tensor is not None else None
    return None


def _entry_node(ctx: FixContext, side: str, index: int, after: tuple[str, ...]):
    entry = ctx.entry((side, index))
    block = ctx.node_at(entry[0]) if entry else None
    if block is None or block.kind != "block":
        return None
    for name in after:
        node = block.child(name)
        if node is not None:
            return node
    return None


@fixer("IO02", "Adds the data_type the ONNX model file declares for the input or output.")
def fix_missing_data_type(ctx: FixContext) -> Fix | None:
    found = _missing_field(ctx)
    if found is None:
        return None
    side, index, entry, tensor = found
    node = _entry_node(ctx, side, index, ("name",))
    if entry.data_type or not tensor.data_type or node is None:
        return None
    return Fix((insert_after_field(ctx.text, node, f"data_type: {tensor.data_type}"),),
               f"added data_type: {tensor.data_type} to {side} '{entry.name}', as in the model")


@fixer("IO03", """
    Adds the dims the ONNX model file declares for the input or output (without the
    batch dimension when max_batch_size > 0). A scalar, or a model without a variable
    batch dimension on a batching config, is left to you.
    """)
def fix_missing_dims(ctx: FixContext) -> Fix | None:
    found = _missing_field(ctx)
    if found is None:
        return None
    side, index, entry, tensor = found
    node = _entry_node(ctx, side, index, ("data_type", "name"))
    if entry.dims or not tensor.ranked or node is None or entry.HasField("reshape"):
        return None
    dims = list(tensor.dims)
    if ctx.config.max_batch_size > 0:
        if not dims or dims[0] != -1:
            return None
        dims = dims[1:]
    if not dims:
        return None
    text = "dims: [ " + ", ".join(str(d) for d in dims) + " ]"
    return Fix((insert_after_field(ctx.text, node, text),), f"added {text} to {side} '{entry.name}', as in the model")


@fixer("PB03", """
    Fixes the one of platform and backend that disagrees with the model file: with
    backend "onnxruntime" and an ONNX model the platform becomes "onnxruntime_onnx"; with
    platform "onnxruntime_onnx" and an ONNX model the backend becomes "onnxruntime".
    """)
def fix_platform_backend_pair(ctx: FixContext) -> Fix | None:
    config = ctx.config
    if config is None or not config.platform or not config.backend:
        return None
    first = ctx.version_dir()
    name = config.default_model_filename or DEFAULT_FILENAME.get("onnxruntime")
    if first is None or file_backend(first / name) != "onnxruntime":
        return None
    platform, backend = ctx.entry(("platform",)), ctx.entry(("backend",))
    if config.backend == "onnxruntime" and platform is not None:
        return Fix((Edit(platform[2], platform[3], quote("onnxruntime_onnx")),),
                   'wrote platform: "onnxruntime_onnx" for the ONNX model')
    if config.platform == "onnxruntime_onnx" and backend is not None:
        return Fix((Edit(backend[2], backend[3], quote("onnxruntime")),),
                   'wrote backend: "onnxruntime" for the ONNX model')
    return None
