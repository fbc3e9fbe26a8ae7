"""Backend auto-complete at load time (AC-*): ONNX Runtime's batching check, a Python model's
``auto_complete_config`` (run in a child process, see python_autocomplete.py) and what DALI's
pipeline fills in.

The codes live beside ``effective_config`` in repo_schema/autocomplete.py; these rules report
them at the field (or the model.py line) at fault.
"""

from __future__ import annotations

from tritonctl.repo_schema.autocomplete import (
    DALI_AUTOCOMPLETE_NOT_EVALUATED,
    NOT_BATCHABLE,
    PYTHON_AUTOCOMPLETE_NOT_RUN,
    batch_capable,
    model_version_dir,
    python_completion_problem,
)
from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.diagnostics import Diagnostic, Span, code_info
from tritonctl.repo_schema.modelfiles import ModelFileError
from tritonctl.repo_schema.modelfiles.onnx import read_onnx_io
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.rules.layout import anchor


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


@model_rule
def check_python_auto_complete(ctx) -> None:
    completion = ctx.python_completion
    problem = python_completion_problem(ctx.name, completion) if completion is not None else None
    if problem is None:
        return
    code, message, hint = problem
    if code == PYTHON_AUTOCOMPLETE_NOT_RUN:
        ctx.report(code, message, anchor(ctx), hint=hint)
    else:
        _report_at_model_file(ctx, code, message, completion, hint)


def _report_at_model_file(ctx, code: str, message: str, completion, hint: str) -> None:
    """At the model.py line that failed when known, else at the config."""
    line = completion.line
    try:
        text = completion.model_file.read_text(encoding="utf-8", errors="replace").splitlines()[line - 1]
    except (AttributeError, TypeError, OSError, IndexError):
        ctx.report(code, message, anchor(ctx), hint=hint)
        return
    start = len(text) - len(text.lstrip()) + 1
    ctx.diagnostics.append(Diagnostic(code, code_info(code).severity, message, completion.model_file,
                                      Span(line, start, line, max(len(text.rstrip()) + 1, start + 1)), hint,
                                      ctx.name))


@model_rule
def check_dali_auto_complete(ctx) -> None:
    config = ctx.effective
    if config.backend != "dali":
        return
    left = [f"{side} '{entry.name}' ({' and '.join(what)})"
            for side, entries in (("input", config.input), ("output", config.output)) for entry in entries
            if (what := [w for w, missing in (("data_type", not entry.data_type), ("dims", not entry.dims))
                         if missing])]
    if not config.input:
        left.insert(0, "the inputs")
    if not config.output:
        left.insert(0 if config.input else 1, "the outputs")
    if not ctx.written(("max_batch_size",)):
        left.append("max_batch_size")
    if left:
        listed = left[0] if len(left) == 1 else f"{', '.join(left[:-1])} and {left[-1]}"
        ctx.report(DALI_AUTOCOMPLETE_NOT_EVALUATED,
                   f"DALI fills in {listed} from the pipeline at load; tritonctl does not read DALI "
                   "pipelines, so this is not checked", anchor(ctx),
                   hint="list them in config.pbtxt to have them checked")
