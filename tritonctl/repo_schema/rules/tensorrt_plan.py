"""The config against a deserialized TensorRT engine (BE-TRT-01..05).

Called by model_files.check_tensorrt_plan once the engine could be read; the codes
are registered there.
"""

from __future__ import annotations

import difflib

from tritonctl.repo_schema.modelfiles.tensorrt import PlanIO
from tritonctl.repo_schema.rules.model_files import (TRT_DIMS, TRT_DTYPE, TRT_MAX_BATCH, TRT_NAME,
                                                     TRT_SHAPE_TENSOR)
from tritonctl.repo_schema.schema import data_type_name


def _fmt(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _check_tensor(ctx, io: PlanIO, side: str, index: int, entry, tensor, batching: bool) -> None:
    if tensor.data_type and data_type_name(entry.data_type) != tensor.data_type:
        ctx.report(TRT_DTYPE, f"{side} '{entry.name}': config.pbtxt says {data_type_name(entry.data_type)} but "
                   f"the engine expects {tensor.data_type}", (side, index, "data_type"),
                   hint=f"change data_type to {tensor.data_type}")
    is_shape = entry.name in io.shape_tensors
    if entry.is_shape_tensor != is_shape:
        ctx.report(TRT_SHAPE_TENSOR, f"{side} '{entry.name}' is {'' if is_shape else 'not '}a shape tensor in the "
                   f"engine but the config {'does not mark it' if is_shape else 'marks it as one'}",
                   (side, index, "is_shape_tensor"), hint=f"set is_shape_tensor: {str(is_shape).lower()}")
    non_linear = entry.name in io.non_linear
    if entry.is_non_linear_format_io != non_linear:
        ctx.report(TRT_SHAPE_TENSOR, f"{side} '{entry.name}' uses a {'non-' if non_linear else ''}linear IO "
                   "format in the engine, which is_non_linear_format_io does not say",
                   (side, index, "is_non_linear_format_io"),
                   hint=f"set is_non_linear_format_io: {str(non_linear).lower()}")
    if is_shape:
        return
    shape = tuple(entry.reshape.shape if entry.HasField("reshape") else entry.dims)
    full = ((-1,) + shape) if batching else shape
    path = (side, index, "reshape") if entry.HasField("reshape") else (side, index, "dims")
    if len(full) != len(tensor.dims) or any(c != m for c, m in zip(full, tensor.dims) if c != -1 and m != -1):
        suggestion = tensor.dims[1:] if batching else tensor.dims
        ctx.report(TRT_DIMS, f"{side} '{entry.name}': config shape {_fmt(full)} does not match the engine shape "
                   f"{_fmt(tensor.dims)}", path, hint=f"use dims: {_fmt(suggestion)}")
        return
    ranges = io.profile_ranges.get(entry.name)
    if side != "input" or not ranges:
        return
    probe = ((ctx.effective.max_batch_size,) + shape) if batching else shape
    for i, (value, (low, high)) in enumerate(zip(probe, ranges)):
        if value != -1 and not low <= value <= high:
            ctx.report(TRT_DIMS, f"input '{entry.name}': dimension {i} is {value}, but optimization profile 0 "
                       f"allows {low} to {high}", ("max_batch_size",) if batching and i == 0 else path,
                       hint="use values inside the profile, or rebuild the engine with a wider profile")
            return


def check_plan_io(ctx, io: PlanIO) -> None:
    config = ctx.effective
    batching = config.max_batch_size > 0
    if batching and io.max_batch and config.max_batch_size > io.max_batch:
        ctx.report(TRT_MAX_BATCH, f"max_batch_size is {config.max_batch_size} but the engine supports at most "
                   f"{io.max_batch}", ("max_batch_size",), hint=f"set max_batch_size: {io.max_batch} or less")
    for side, entries, tensors in (("input", config.input, io.inputs), ("output", config.output, io.outputs)):
        names = [t.name for t in tensors]
        for index, entry in enumerate(entries):
            tensor = next((t for t in tensors if t.name == entry.name), None)
            if tensor is None:
                close = difflib.get_close_matches(entry.name, names, n=1, cutoff=0.5)
                ctx.report(TRT_NAME, f"{side} '{entry.name}' is not in the engine; its {side}s are: "
                           f"{', '.join(names) or 'none'}", (side, index, "name"),
                           hint=f"did you mean '{close[0]}'?" if close else f"use one of the engine's {side} names")
                continue
            _check_tensor(ctx, io, side, index, entry, tensor, batching)
    configured = {i.name for i in config.input}
    for tensor in io.inputs:
        if tensor.name not in configured:
            ctx.report(TRT_NAME, f"engine input '{tensor.name}' has no config entry", ("input",), part="key",
                       hint=f"add an input named '{tensor.name}' ({tensor.data_type or tensor.source_type})")
