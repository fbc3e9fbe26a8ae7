"""PyTorch sources -> a TorchScript ``model.pt`` for Triton's PyTorch backend (``--format
torchscript``): a TorchScript source as it is, a ``module:function`` or ``.pt2`` traced with
``torch.jit.trace`` at batch 2; the tensors it takes and returns, found by running it; the accuracy
check runs the saved file, loaded back, against the source.

An ONNX source cannot become TorchScript: no maintained converter does it, so build says which
sources can."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.convert import accuracy
from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import DEFAULT_MAX_BATCH_SIZE, BuildOptions
from tritonctl.convert.prepare import specs_for
from tritonctl.convert.torch_export import (TorchSource, call_model, example_tensors, flat_outputs, require_torch,
                                            to_numpy)
from tritonctl.repo_schema.modelfiles import ModelIO, TensorInfo
from tritonctl.repo_schema.modelfiles.pytorch import tensor_index
from tritonctl.repo_schema.rules.io import BACKEND_DATA_TYPES

ONNX_SOURCE = ("--format torchscript needs a PyTorch source: a module:function returning a torch.nn.Module, a "
               "TorchScript archive (.pt) or a torch.export program (.pt2); an ONNX model cannot be turned into "
               "TorchScript (no maintained converter does it). Build this ONNX model with --format onnx (or plan)")
TRACE_BATCH = 2


@dataclass
class TorchScriptBuild:
    path: Path
    io: ModelIO
    max_batch: int
    exporter: str
    frozen: list[str] = field(default_factory=list)  # what torch.jit.trace warned it froze


def _input_infos(source: TorchSource, batching: bool) -> list[TensorInfo]:
    types = accuracy.TRITON_DTYPES
    return [TensorInfo(s.name, types.get(s.dtype, ""), ((-1,) if batching else ()) + s.dims, s.dtype)
            for s in source.inputs]


def _arrays(source: TorchSource, batch: int | None, options: BuildOptions, seed: int, grow: int = 0) -> dict:
    """Random inputs at ``batch`` (None: the inputs have no batch axis); ``grow`` adds to every
    dynamic dim, so two runs tell which output dims follow the inputs."""
    io = ModelIO(inputs=_input_infos(source, batch is not None))
    specs = specs_for(io, batch or 0, options.shapes)
    if grow:
        dynamic = {t.name: t.dims[1 if batch is not None else 0:] for t in io.inputs}
        specs = [accuracy.TensorSpec(s.name, s.dtype, s.shape[:1 if batch is not None else 0] + tuple(
            d + grow if declared == -1 else d for d, declared in zip(s.shape[1 if batch is not None else 0:],
                                                                      dynamic[s.name])))
                 for s in specs]
    return accuracy.random_inputs(specs, seed)


def servable_outputs(result) -> bool:
    """Triton's PyTorch backend returns a tensor, or a tuple of tensors, each with a dimension."""
    torch = require_torch()
    values = result if isinstance(result, tuple) else (result,)
    return all(isinstance(v, torch.Tensor) and v.dim() > 0 for v in values)


def served(tensor):
    """A rank-0 output as the [1]-shaped tensor model.pt returns in its place."""
    return tensor.reshape(1) if tensor.dim() == 0 else tensor


def _flat_module(torch, model):
    """``model`` returning its outputs flattened into a tuple of tensors, rank 0 as shape [1]."""

    class FlatOutputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            values = [served(v) for v in flat_outputs(self.model(*args))]
            return values[0] if len(values) == 1 else tuple(values)

    return FlatOutputs()


def _script(torch, source: TorchSource, arrays: dict):
    flatten = not servable_outputs(call_model(source, arrays))
    if source.kind == "torchscript" and not flatten:
        return source.model, "TorchScript source, saved as it is", []
    model = _flat_module(torch, source.callable()) if flatten else source.callable()
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always", torch.jit.TracerWarning)
            traced = torch.jit.trace(model, example_tensors(source, arrays), check_trace=False)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BuildError(f"torch.jit.trace failed: {first}. Script the model yourself (torch.jit.script) and "
                         "build from the saved .pt") from None
    frozen = sorted({str(w.message).split(".")[0] for w in caught if issubclass(w.category, torch.jit.TracerWarning)})
    exporter = f"torch.jit.trace at batch {TRACE_BATCH}"
    if flatten:
        exporter += ", outputs returned as a flat tuple of tensors (rank 0 as shape [1])"
    return traced, exporter, frozen


def _reference(source: TorchSource, arrays: dict) -> tuple[list, list[str]]:
    """The source's outputs as model.pt returns them, as numpy arrays, and their dtypes
    (torch's names: bfloat16 has no numpy dtype)."""
    tensors = [served(t) for t in flat_outputs(call_model(source, arrays))]
    return [to_numpy(t) for t in tensors], [str(t.dtype).removeprefix("torch.") for t in tensors]


def _output_dims(first: list, second: list, batch: int | None) -> list[tuple[int, ...]]:
    dims = []
    for a, b in zip(first, second):
        if a.ndim != b.ndim:
            raise BuildError("the model's outputs change rank with the input shapes; tritonctl cannot describe them")
        shape = tuple(-1 if x != y else x for x, y in zip(a.shape, b.shape))
        dims.append(shape)
    return dims


def _check_input_names(source: TorchSource) -> None:
    """<name>__<index> names must give forward()'s positions, which the backend goes by."""
    names = [s.name for s in source.inputs]
    indices = [tensor_index(n) for n in names]
    if all(i is not None for i in indices) and indices != list(range(len(names))):
        raise BuildError(f"inputs {names} are named <name>__<index>, which Triton's PyTorch backend reads as "
                         "forward() positions, but they are not 0, 1, ... in forward() order; rename them")


def build_torchscript(options: BuildOptions, source: TorchSource, work: Path) -> TorchScriptBuild:
    torch = require_torch()
    _check_input_names(source)
    batch = TRACE_BATCH if source.batch_dynamic else None
    arrays = _arrays(source, batch, options, options.seed)
    module, exporter, frozen = _script(torch, source, arrays)
    path = work / "model.pt"
    try:
        torch.jit.save(module, str(path))
    except Exception as exc:
        raise BuildError(f"torch.jit.save failed: {exc}") from None
    first, dtypes = _reference(source, arrays)
    second, _ = _reference(source, _arrays(source, batch + 1 if batch else None, options, options.seed + 1, grow=1))
    names = options.output_names or [f"output__{i}" for i in range(len(first))]
    if len(names) != len(first):
        raise BuildError(f"the model returns {len(first)} output(s), but {len(names)} --output name(s) were given")
    dims = _output_dims(first, second, batch)
    types = accuracy.TRITON_DTYPES
    can_batch = batch is not None and all(d and d[0] == -1 for d in dims)
    if options.max_batch_size and not can_batch:
        raise BuildError(f"--max-batch-size {options.max_batch_size} needs a model that batches, but its outputs "
                         "do not follow the input's first dimension; use --max-batch-size 0")
    max_batch = (DEFAULT_MAX_BATCH_SIZE if options.max_batch_size is None else options.max_batch_size) \
        if can_batch else 0
    batching = max_batch > 0
    if batch is not None and not batching:  # dims are the full shapes, the batch axis included
        inputs = [TensorInfo(s.name, types.get(s.dtype, ""), (-1,) + s.dims, s.dtype) for s in source.inputs]
    else:
        inputs = _input_infos(source, batching)
    outputs = [TensorInfo(n, types.get(t, ""), d, t) for n, t, d in zip(names, dtypes, dims)]
    _require_backend_types(inputs, outputs)
    return TorchScriptBuild(path, ModelIO(inputs=inputs, outputs=outputs), max_batch, exporter, frozen)


def _require_backend_types(inputs: list[TensorInfo], outputs: list[TensorInfo]) -> None:
    allowed = BACKEND_DATA_TYPES["pytorch"]
    for role, tensors in (("input", inputs), ("output", outputs)):
        for tensor in tensors:
            if tensor.data_type not in allowed:
                raise BuildError(f"{role} '{tensor.name}' is {tensor.source_type}, which Triton's PyTorch backend "
                                 f"cannot pass (it takes {', '.join(sorted(t.removeprefix('TYPE_') for t in allowed))})"
                                 f"; convert the model and its inputs to a type it takes (model.float() or "
                                 "model.half()), or build --format onnx")


def _traced_model_failed(built: TorchScriptBuild, arrays: dict, exc: Exception) -> BuildError:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    reason = lines[-1] if lines else type(exc).__name__
    shapes = ", ".join(f"{name} {list(array.shape)}" for name, array in arrays.items())
    if not built.exporter.startswith("torch.jit.trace"):
        return BuildError(f"the saved model.pt fails on the accuracy check's inputs ({shapes}): {reason}")
    return BuildError(f"model.pt, traced at batch {TRACE_BATCH}, fails on inputs of other shapes ({shapes}): {reason}. "
                      "torch.jit.trace keeps the sizes the model computes from its inputs as constants (a reshape "
                      "or view to a computed shape); script the model (torch.jit.script) and build from the saved "
                      ".pt, or build --format onnx; nothing was written")


def check_torchscript(options: BuildOptions, source: TorchSource, built: TorchScriptBuild) -> accuracy.AccuracyReport:
    """The saved file, loaded back as the server loads it, against the source."""
    torch = require_torch()
    atol, rtol = options.tolerances
    loaded = torch.jit.load(str(built.path), map_location="cpu").eval()

    def result(arrays: dict) -> list:
        try:
            with torch.inference_mode():
                out = loaded(*example_tensors(source, arrays))
        except Exception as exc:
            raise _traced_model_failed(built, arrays, exc) from None
        return [to_numpy(t) for t in (out if isinstance(out, tuple) else (out,))]

    batch_axis = source.batch_dynamic
    sizes = sorted({1, min(built.max_batch, 8)}) if built.max_batch else [TRACE_BATCH if batch_axis else None]
    batches = [_arrays(source, b, options, options.seed + i) for i, b in enumerate(sizes)]
    described = accuracy.describe_random([b for b in sizes if b is not None])
    names = [t.name for t in built.io.outputs]
    return accuracy.check_accuracy(names, lambda arrays: _reference(source, arrays)[0], result, batches, atol, rtol,
                                   described)
