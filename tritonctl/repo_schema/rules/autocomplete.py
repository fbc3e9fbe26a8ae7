"""Backend auto-complete failures Triton reports at load time (AC-*).

The codes live beside ``effective_config`` in repo_schema/autocomplete.py; this rule
reports the one a config file can be blamed for, at the field at fault.
"""

from __future__ import annotations

from tritonctl.repo_schema.autocomplete import NOT_BATCHABLE, batch_capable, model_version_dir
from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.modelfiles import ModelFileError
from tritonctl.repo_schema.rules import model_rule


@model_rule
def check_onnx_autofill_batching(ctx) -> None:
    config = ctx.effective
    if config.backend != "onnxruntime" or config.max_batch_size <= 0:
        return
    if (config.input or config.batch_input) and config.output:
        return  # nothing to auto-complete; the backend compares the config with the model instead
    if not ctx.can_check(MODEL_FILES):
        return
    version_dir = model_version_dir(ctx.model_dir, None)
    if version_dir is None:
        return
    from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io

    try:
        io = read_onnx_io(version_dir / (config.default_model_filename or "model.onnx"))
    except ModelFileError:
        return  # reported by the model-file rules
    if batch_capable(io):
        return
    fixed = next(t for t in [*io.inputs, *io.outputs] if not t.dims or t.dims[0] != -1)
    shape = "is a scalar" if not fixed.dims else f"has the fixed first dimension {fixed.dims[0]}"
    ctx.report(NOT_BATCHABLE,
               f"max_batch_size is {config.max_batch_size} but '{fixed.name}' {shape} in the model, so the "
               "model cannot batch (Triton: \"model does not support batching while non-zero max_batch_size "
               "is specified\")",
               ("max_batch_size",),
               hint="set max_batch_size: 0, or export the model with a dynamic first (batch) dimension")
