"""PyTorch sources -> ONNX: load a ``module:function``, TorchScript or ``torch.export``
``.pt2`` model, run it for reference outputs, export it with a dynamic batch axis.

torch is imported inside the functions, so the rest of tritonctl never pays for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import io
import logging
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonctl.convert.errors import BuildError
from tritonctl.convert.spec import InputSpec
from tritonctl.optional import PROVIDERS, require



def require_torch():
    """torch, or MissingDependency naming the torch extra."""
    return require("torch", "building from a PyTorch source")


@dataclass
class TorchSource:
    kind: str  # "module", "torchscript" or "exported"
    model: Any  # nn.Module, ScriptModule or ExportedProgram
    inputs: list[InputSpec]
    digest: str  # sha256 over the code and the weights
    batch_dynamic: bool = True  # False when a .pt2 was exported with a fixed first dimension
    notes: list[str] = field(default_factory=list)

    def callable(self):
        return self.model.module() if self.kind == "exported" else self.model


def load_function(target: str):
    """``pkg.module:function`` or ``path/to/file.py:function`` -> (function, module file)."""
    module_name, _, function_name = target.rpartition(":")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            spec = importlib.util.spec_from_file_location(f"tritonctl_build_{path.stem}", path)
            if spec is None or not path.is_file():
                raise BuildError(f"{module_name} does not exist")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except BuildError:
        raise
    except Exception as exc:
        raise BuildError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise BuildError(f"{module_name} has no function '{function_name}'")
    return function, Path(getattr(module, "__file__", "") or "")


def _state_digest(torch, module, code: bytes) -> str:
    digest = hashlib.sha256(code)
    for key, tensor in sorted(module.state_dict().items()):
        digest.update(key.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def load_torch_source(kind: str, source: str, inputs: list[InputSpec]) -> TorchSource:
    torch = require_torch()
    if kind == "module":
        function, module_file = load_function(source)
        try:
            model = function()
        except Exception as exc:
            raise BuildError(f"{source}() raised {type(exc).__name__}: {exc}") from None
        if not isinstance(model, torch.nn.Module):
            raise BuildError(f"{source}() returned {type(model).__name__}, not a torch.nn.Module")
        code = module_file.read_bytes() if module_file.is_file() else b""
        _need_inputs(inputs, source)
        return TorchSource("module", model.eval(), inputs, _state_digest(torch, model, code + source.encode()))
    path = Path(source)
    data = path.read_bytes()
    if kind == "exported":
        try:
            program = torch.export.load(str(path))
        except Exception as exc:
            raise BuildError(f"cannot load {path.name} with torch.export.load: {exc}") from None
        specs, batch_dynamic = _exported_inputs(torch, program)
        if inputs:
            if len(inputs) != len(specs):
                raise BuildError(f"{path.name} takes {len(specs)} input(s), but {len(inputs)} --input were given")
            specs = [InputSpec(given.name, spec.dtype, spec.dims) for given, spec in zip(inputs, specs)]
        return TorchSource("exported", program, specs, hashlib.sha256(data).hexdigest(), batch_dynamic)
    try:
        model = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise BuildError(f"cannot load {path.name} as TorchScript (torch.jit.load): {exc}") from None
    _need_inputs(inputs, path.name)
    return TorchSource("torchscript", model.eval(), inputs, hashlib.sha256(data).hexdigest())


def _need_inputs(inputs: list[InputSpec], what: str) -> None:
    if not inputs:
        raise BuildError(f"{what} does not record its input shapes; describe each input with --input "
                         "NAME:DTYPE:DIMS, e.g. --input image:fp32:3x224x224 (dims without the batch dimension)")


def _exported_inputs(torch, program) -> tuple[list[InputSpec], bool]:
    """The program's inputs; dims leave out a dynamic batch axis, or are the full shapes
    when any input has a fixed first dimension (the model then takes one fixed batch)."""
    user_inputs = set(program.graph_signature.user_inputs)
    shapes = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        if value is None or not hasattr(value, "shape"):
            raise BuildError(f"input '{node.name}' of the exported program is not a tensor")
        dims = tuple(-1 if isinstance(d, torch.SymInt) else int(d) for d in value.shape)
        shapes.append((node.name, str(value.dtype).removeprefix("torch."), dims))
    batch_dynamic = all(dims and dims[0] == -1 for _, _, dims in shapes)
    return [InputSpec(name, dtype, dims[1:] if batch_dynamic else dims) for name, dtype, dims in shapes], batch_dynamic


def example_tensors(source: TorchSource, arrays: dict) -> tuple:
    """The model's arguments: BF16 inputs arrive as float32 arrays (numpy has no bfloat16)."""
    torch = require_torch()
    tensors = []
    for spec in source.inputs:
        tensor = torch.from_numpy(arrays[spec.name])
        tensors.append(tensor.to(torch.bfloat16) if spec.dtype == "bfloat16" else tensor)
    return tuple(tensors)


def output_leaves(result) -> list[tuple[str, Any]]:
    """(name, value) for every value a model returns, in the order torch.export flattens them:
    dict keys and NamedTuple fields name their values (joined with '_' when nested), the rest
    are ''."""
    if isinstance(result, dict):
        items = [(str(key), value) for key, value in result.items()]
    elif isinstance(result, tuple) and hasattr(result, "_fields"):
        items = list(zip(result._fields, result))
    elif isinstance(result, (tuple, list)):
        items = [("", value) for value in result]
    else:
        return [("", result)]
    leaves = []
    for key, value in items:
        leaves.extend(("_".join(part for part in (key, name) if part), leaf) for name, leaf in output_leaves(value))
    return leaves


def flat_outputs(result) -> list:
    """The tensors a model returns, flattened in torch.export's order; BuildError for anything else."""
    torch = require_torch()
    values = [leaf for _, leaf in output_leaves(result)]
    others = sorted({type(v).__name__ for v in values if not isinstance(v, torch.Tensor)})
    if others:
        raise BuildError(f"the model returns {', '.join(others)} among its outputs; a Triton model returns "
                         "tensors: make forward() return a tensor, or a tuple, list, dict or NamedTuple of tensors")
    return values


def default_output_names(source: TorchSource, arrays: dict) -> list[str]:
    """Dict keys or NamedTuple fields when they name every output (each once), else ''s."""
    names = [name for name, _ in output_leaves(call_model(source, arrays))]
    return names if all(names) and len(set(names)) == len(names) else [""] * len(names)


def call_model(source: TorchSource, arrays: dict):
    """What the model returns for ``arrays``; BuildError naming the inputs when it raises."""
    torch = require_torch()
    args = example_tensors(source, arrays)
    try:
        with torch.no_grad():
            return source.callable()(*args)
    except Exception as exc:
        shapes = ", ".join(f"{spec.name} {list(arrays[spec.name].shape)} {spec.dtype}" for spec in source.inputs)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise BuildError(f"the model fails when called with the example inputs ({shapes}): "
                         f"{type(exc).__name__}: {reason}. Check that --input lists forward()'s tensor arguments "
                         "in order, with the dtype it expects and the dims after the batch dimension") from None


def to_numpy(tensor):
    """A tensor as a numpy array; BF16 as float32 (numpy has no bfloat16)."""
    torch = require_torch()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).detach().cpu().numpy()


def run_torch(source: TorchSource, arrays: dict) -> list:
    """Reference outputs of the PyTorch model, as numpy arrays in output order."""
    return [to_numpy(t) for t in flat_outputs(call_model(source, arrays))]


@contextlib.contextmanager
def _quiet_exporter():
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "onnxscript", "onnx_ir", "torch.export",
                                                    "torch._export", "torch.fx", "torch._dynamo")]
    levels = [log.level for log in loggers]
    printed = io.StringIO()  # the exporter prints graphs while it retries a failed export
    with warnings.catch_warnings(), contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        warnings.simplefilter("ignore")
        for log in loggers:
            log.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for log, level in zip(loggers, levels):
                log.setLevel(level)


def export_onnx(source: TorchSource, arrays: dict, output_names: list[str], path: Path, opset: int) -> str:
    """Write ``path``; returns which exporter ran. Axis 0 of every input is dynamic,
    as is every dim given as -1 in --input; TorchScript goes through the TorchScript
    exporter, the rest through torch.export (the default exporter in PyTorch 2.9+)."""
    torch = require_torch()
    names = [spec.name for spec in source.inputs]
    args = example_tensors(source, arrays)
    try:
        with _quiet_exporter():
            if source.kind == "torchscript":
                axes = {spec.name: {0: "batch", **{i + 1: f"{spec.name}_{i + 1}" for i, d in enumerate(spec.dims)
                                                   if d == -1}} for spec in source.inputs}
                axes.update({name: {0: "batch"} for name in output_names})
                torch.onnx.export(source.model, args, str(path), input_names=names, output_names=output_names,
                                  dynamic_axes=axes, opset_version=opset, dynamo=False)
                return f"torch.onnx.export (TorchScript), opset {opset}"
            if source.kind == "exported":
                torch.onnx.export(source.model, (), str(path), input_names=names, output_names=output_names,
                                  opset_version=opset, dynamo=True, external_data=False, verbose=False)
                return f"torch.onnx.export (ExportedProgram), opset {opset}"
            dynamic = torch.export.Dim.DYNAMIC
            shapes = tuple({0: dynamic, **{i + 1: dynamic for i, d in enumerate(spec.dims) if d == -1}}
                           for spec in source.inputs)
            torch.onnx.export(source.model, args, str(path), input_names=names, output_names=output_names,
                              dynamic_shapes=shapes, opset_version=opset, dynamo=True, external_data=False,
                              verbose=False)
            return f"torch.onnx.export (torch.export, dynamic shapes), opset {opset}"
    except BuildError:
        raise
    except Exception as exc:
        if "onnxscript" in str(exc):
            raise BuildError(f"torch.onnx.export needs onnxscript: {PROVIDERS['onnxscript'].install}") from None
        raise BuildError(_export_failure(exc)) from None


def _export_failure(exc: Exception) -> str:
    """What torch.onnx.export said, as one line: the underlying error, where in the model it
    arose, and for data-dependent control flow, what to do about it."""
    cause = exc.__cause__ or exc
    text = str(cause).strip()
    reason = f"{type(cause).__name__}: {text.splitlines()[0]}" if text else type(cause).__name__
    where = re.search(r'The following call raised this error:\s*File "([^"]+)", line (\d+), in \w+\s*\n\s*(.+)',
                      str(exc))
    at = f" at {Path(where[1]).name}:{where[2]} ({where[3].strip()})" if where else ""
    if "data-dependent" in str(exc) or "DataDependent" in type(cause).__name__:
        return (f"torch.onnx.export cannot capture the model{at}: it branches on the value of a tensor "
                "(data-dependent control flow), which torch.export cannot trace. Compute both branches with "
                "torch.where (or use torch.cond) there, or script the model with torch.jit.script, save it as .pt "
                "and build from that file")
    return (f"torch.onnx.export failed{at}: {reason}. Make forward() exportable with torch.export (see "
            "https://pytorch.org/docs/stable/generated/exportdb/index.html), or script the model with "
            "torch.jit.script, save it as .pt and build from that file")
