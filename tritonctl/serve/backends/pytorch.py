"""PyTorch backend: a TorchScript ``model.pt`` per instance, run the way Triton's PyTorch (libtorch)
backend runs it: inputs reach forward() by its argument names, by ``<name>__<index>`` or in config
order; outputs by ``<name>__<index>`` or in config order; TYPE_STRING tensors as ``List[str]``; the
``parameters`` it reads (DISABLE_OPTIMIZED_EXECUTION, INFERENCE_MODE, ENABLE_JIT_EXECUTOR, ...);
KIND_CPU, KIND_GPU (the instance's CUDA device and a stream of its own) and KIND_MODEL instances.

torch is an extra: without it the model fails to load with the install command, and every other
model of the repository serves."""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonctl.optional import MissingDependency, require
from tritonctl.repo_schema.datatypes import DATATYPES
from tritonctl.repo_schema.modelfiles.pytorch import tensor_index as indexed
from tritonctl.repo_schema.rules.io import BACKEND_DATA_TYPES
from tritonctl.repo_schema.schema import data_type_name
from tritonctl.serve.backends.params import parse_bool, parse_int
from tritonctl.serve.core.backend_api import Backend, BackendLoadError, InstanceSpec, ModelExecutionError
from tritonctl.serve.core.errors import ServeError, Status

log = logging.getLogger("tritonctl.serve")

SUPPORTED_TYPES = BACKEND_DATA_TYPES["pytorch"]
TORCH_TO_TRITON = {t.torch: t.config for t in DATATYPES if t.torch}
BOOL_PARAMETERS = ("DISABLE_OPTIMIZED_EXECUTION", "INFERENCE_MODE", "ENABLE_CACHE_CLEANING", "ENABLE_WEIGHT_SHARING",
                   "ENABLE_TENSOR_FUSER", "ENABLE_JIT_PROFILING", "ENABLE_JIT_EXECUTOR", "DISABLE_CUDNN")
# Request buffers are read-only views; the model gets them without a copy, as Triton's from_blob does.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

_thread_counts_lock = threading.Lock()
_thread_counts_set: dict[str, int] = {}  # process-wide, first model wins (as Triton's call_once)
_shared_lock = threading.Lock()
_shared_modules: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # ENABLE_WEIGHT_SHARING


def import_torch(model: str):
    """torch, or BackendLoadError naming the extra that installs it. Where the server is the first
    to import torch, torch's OpenMP threads wait passively (OMP_WAIT_POLICY, unless set): spinning
    after each run, they take the CPU the front end and the other instances need."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return require("torch", f"model '{model}' (PyTorch backend)")
    except MissingDependency as exc:
        raise BackendLoadError(f"unable to load model '{model}': {exc}") from None
    except Exception as exc:  # a broken install: its shared libraries fail to load
        raise BackendLoadError(f"unable to load model '{model}': torch failed to import ({exc})") from None


@dataclass(frozen=True)
class Settings:
    """What the model's ``parameters`` set, as Triton's PyTorch backend reads them (a flag the config
    leaves out changes nothing)."""

    optimized_execution: bool = True
    inference_mode: bool = True
    cache_cleaning: bool = False
    weight_sharing: bool = False
    tensor_fuser: bool | None = None
    jit_profiling: bool | None = None
    jit_executor: bool | None = None
    disable_cudnn: bool | None = None
    intra_op_threads: int = 0
    inter_op_threads: int = 0


def read_settings(config) -> Settings:
    params = {key: p.string_value for key, p in config.parameters.items()}
    flags = {key: parse_bool(params[key], key) for key in BOOL_PARAMETERS if key in params}
    counts = {}
    for key in ("INTRA_OP_THREAD_COUNT", "INTER_OP_THREAD_COUNT"):
        if key in params:
            try:
                counts[key] = parse_int(params[key], key)
            except BackendLoadError as exc:
                raise BackendLoadError(f"Failed to parse '{key}' parameter for model '{config.name}': {exc}.") \
                    from None
    return Settings(optimized_execution=not flags.get("DISABLE_OPTIMIZED_EXECUTION", False),
                    inference_mode=flags.get("INFERENCE_MODE", True),
                    cache_cleaning=flags.get("ENABLE_CACHE_CLEANING", False),
                    weight_sharing=flags.get("ENABLE_WEIGHT_SHARING", False),
                    tensor_fuser=flags.get("ENABLE_TENSOR_FUSER"), jit_profiling=flags.get("ENABLE_JIT_PROFILING"),
                    jit_executor=flags.get("ENABLE_JIT_EXECUTOR"), disable_cudnn=flags.get("DISABLE_CUDNN"),
                    intra_op_threads=counts.get("INTRA_OP_THREAD_COUNT", 0),
                    inter_op_threads=counts.get("INTER_OP_THREAD_COUNT", 0))


def _set_thread_counts(torch, settings: Settings, model: str) -> None:
    """torch's thread pools are the process's: the first model that sets a count sets it, as in Triton."""
    with _thread_counts_lock:
        for key, count, setter in (("intra", settings.intra_op_threads, torch.set_num_threads),
                                   ("inter", settings.inter_op_threads, torch.set_num_interop_threads)):
            if count <= 0 or key in _thread_counts_set:
                continue
            try:
                setter(count)
            except RuntimeError as exc:  # inter-op threads are fixed once torch ran parallel work
                log.warning("model '%s': %s-op thread count %d not applied: %s", model, key, count, exc)
            _thread_counts_set[key] = count


def _rank(tensor, batching: bool) -> int:
    dims = tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims
    return len(dims) + (1 if batching else 0)


class PyTorchBackend(Backend):
    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        super().__init__(config, version_dir, instance)
        torch = import_torch(config.name)
        self.torch = torch
        self.settings = read_settings(config)
        _set_thread_counts(torch, self.settings, config.name)
        self.device = self._device(torch, instance)
        path = version_dir / (config.default_model_filename or "model.pt")
        if not path.is_file():
            raise BackendLoadError(f"unable to find '{path}' for model instance '{config.name}'")
        self.module = self._load(torch, path)
        self.stream = torch.cuda.Stream(self.device) if self.device is not None and self.device.type == "cuda" \
            else None
        self._map_inputs()
        self._map_outputs()

    # ---- load --------------------------------------------------------------------------------
    def _device(self, torch, instance: InstanceSpec):
        if instance.kind == "KIND_MODEL":
            return None  # the model places its own tensors
        if instance.kind != "KIND_GPU":
            return torch.device("cpu")
        if not torch.cuda.is_available():
            raise BackendLoadError(
                f"instance group '{instance.name}' of model '{self.config.name}' has kind KIND_GPU but no CUDA "
                f"device is usable here (torch {torch.__version__}: torch.cuda.is_available() is False); use "
                "KIND_CPU, or run on a machine with a GPU and a CUDA build of torch")
        device_id = max(instance.device_id, 0)
        if device_id >= torch.cuda.device_count():
            raise BackendLoadError(f"instance group '{instance.name}' of model '{self.config.name}' asks for GPU "
                                   f"{device_id}, but torch sees {torch.cuda.device_count()} GPU(s)")
        return torch.device("cuda", device_id)

    def _load(self, torch, path: Path):
        key = (id(self.config), str(path), str(self.device))
        if self.settings.weight_sharing:
            with _shared_lock:
                shared = _shared_modules.get(key)
            if shared is not None:
                log.info("Reusing TorchScript model for instance '%s'", self.instance.name)
                return shared
        try:
            with torch.inference_mode(self.settings.inference_mode):
                module = torch.jit.load(str(path), map_location=self.device)
        except Exception as exc:
            raise BackendLoadError(f"failed to load model '{self.config.name}': {exc}") from None
        module.eval()
        if self.settings.weight_sharing:
            with _shared_lock:
                _shared_modules[key] = module
        return module

    def _map_inputs(self) -> None:
        """Where each config input goes in forward(): Triton's rules, in its order and texts."""
        from tritonctl.serve.core.sequence_state import read_controls

        config, name = self.config, self.config.name
        arguments = list(self.module._c._get_method("forward").schema.arguments)
        if arguments and arguments[0].type.kind() == "ClassType":
            arguments = arguments[1:]
        self.dict_input = len(arguments) == 1 and arguments[0].type.kind() == "DictType"
        allowed: list[str] = []
        controls = [c.name for c in read_controls(config)] if config.HasField("sequence_batching") else []
        if not self.dict_input and arguments:
            if any(a.type.kind() == "DictType" for a in arguments[1:]):
                raise BackendLoadError("Multiple inputs of kind DictType were detected. Only a single input of "
                                       "type Dict(str, Tensor) is supported.")
            for argument in arguments:
                if argument.type.kind() not in ("TensorType", "ListType"):
                    raise BackendLoadError(
                        f"An input of type '{argument.type}' was detected in the model. Only a single input of "
                        "type Dict(str, Tensor) or input(s) of type Tensor are supported.")
                allowed.append(argument.name)
            expected = len(config.input) + len(config.batch_input) + len(controls) \
                + len(config.sequence_batching.state)
            if len(arguments) != expected:
                raise BackendLoadError(f"unable to load model '{name}', configuration expects {expected} inputs, "
                                       f"model provides {len(arguments)}")
        if not config.input:
            raise BackendLoadError("model configuration must contain at least one input, none were specified.")
        names = [i.name for i in config.input]
        targets = [t for b in config.batch_input for t in b.target_name]
        if all(n in allowed for n in names):
            convention = "argument"
        elif all(indexed(n) is not None for n in names):
            convention = "index"
        else:
            convention = "order"
            log.warning("inputs of model '%s' are neither forward() arguments nor <name>__<index>; they go to "
                        "forward() in configuration order", name)
        self.positions: dict[str, int] = {}
        for i, tensor_name in enumerate(names + targets):
            if convention == "argument":
                if tensor_name in allowed:
                    self.positions[tensor_name] = allowed.index(tensor_name)
            elif convention == "index":
                self.positions[tensor_name] = indexed(tensor_name) if indexed(tensor_name) is not None else i
            else:
                self.positions[tensor_name] = i
        for control in controls:
            index = indexed(control)
            if index is None:
                raise BackendLoadError(f"input '{control}' does not follow <name>__<index> naming convention.")
            self.positions[control] = index
        self.string_inputs = set()
        batching = config.max_batch_size > 0
        for tensor in config.input:
            type_name = data_type_name(tensor.data_type)
            if type_name not in SUPPORTED_TYPES:
                raise BackendLoadError(f"unsupported datatype {type_name} for input '{tensor.name}' for model "
                                       f"'{name}'")
            if type_name == "TYPE_STRING":
                if _rank(tensor, batching) > 1:
                    raise BackendLoadError(f"Triton only supports 1 dimensional List of String as input for "
                                           f"'{tensor.name}' for model '{name}'")
                self.string_inputs.add(tensor.name)

    def _map_outputs(self) -> None:
        config, name = self.config, self.config.name
        if not config.output:
            raise BackendLoadError("model configuration must contain at least one output, none were specified.")
        by_index = all(indexed(o.name) is not None for o in config.output)
        if not by_index:
            log.warning("outputs of model '%s' do not follow <name>__<index>; they are taken in configuration "
                        "order", name)
        self.output_index: dict[str, int] = {}
        self.output_types: dict[str, str] = {}
        batching = config.max_batch_size > 0
        for i, tensor in enumerate(config.output):
            type_name = data_type_name(tensor.data_type)
            if type_name not in SUPPORTED_TYPES:
                raise BackendLoadError(f"unsupported datatype {type_name} for output '{tensor.name}' for model "
                                       f"'{name}'")
            if type_name == "TYPE_STRING" and _rank(tensor, batching) > 1:
                raise BackendLoadError(f"Triton only supports 1 dimensional List of String as output for "
                                       f"'{tensor.name}' for model '{name}'")
            self.output_index[tensor.name] = indexed(tensor.name) if by_index else i
            self.output_types[tensor.name] = type_name
        for state in config.sequence_batching.state:
            for tensor_name in (state.input_name, state.output_name):
                if indexed(tensor_name) is None:
                    raise BackendLoadError(f"state '{tensor_name}' of model '{name}' does not follow "
                                           "<name>__<index> naming convention.")
            self.positions[state.input_name] = indexed(state.input_name)
            self.output_index[state.output_name] = indexed(state.output_name)
            self.output_types[state.output_name] = data_type_name(state.data_type)

    def text_inputs(self) -> frozenset[str]:
        return frozenset(self.string_inputs)

    # ---- execute -----------------------------------------------------------------------------
    def _tensor(self, name: str, array: np.ndarray):
        if name in self.string_inputs:
            return [item.decode("utf-8") if isinstance(item, (bytes, bytearray)) else str(item)
                    for item in array.reshape(-1)]
        tensor = self.torch.from_numpy(np.ascontiguousarray(array))
        if self.device is not None and self.device.type != "cpu":
            tensor = tensor.to(self.device, non_blocking=True)
        return tensor

    def _arguments(self, inputs: dict[str, np.ndarray]) -> list:
        if self.dict_input:
            return [{name: self._tensor(name, array) for name, array in inputs.items()}]
        arguments: list = [None] * len(inputs)
        for name, array in inputs.items():
            position = self.positions.get(name)
            if position is None or position >= len(arguments) or arguments[position] is not None:
                raise ModelExecutionError(f"input '{name}' of model '{self.config.name}' has no place among "
                                          "forward()'s arguments")
            arguments[position] = self._tensor(name, array)
        return arguments

    def _apply_jit_settings(self) -> None:
        torch, settings = self.torch, self.settings
        torch._C._set_graph_executor_optimize(settings.optimized_execution)
        if settings.jit_profiling is not None:
            torch._C._jit_set_profiling_mode(settings.jit_profiling)
        if settings.jit_executor is not None:
            torch._C._jit_set_profiling_executor(settings.jit_executor)
        if settings.tensor_fuser is not None:
            torch._C._jit_set_texpr_fuser_enabled(settings.tensor_fuser)
        if settings.disable_cudnn is not None:
            torch.backends.cudnn.enabled = not settings.disable_cudnn

    def execute(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        torch = self.torch
        self._apply_jit_settings()
        with torch.inference_mode(self.settings.inference_mode), torch.no_grad():
            if self.stream is None:
                return self._run(inputs, outputs)
            with torch.cuda.stream(self.stream):  # inputs, forward() and the copies back on this stream
                produced = self._run(inputs, outputs)
            if self.settings.cache_cleaning:
                torch.cuda.empty_cache()
            return produced

    def _run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        try:
            results = self._forward(inputs)
        except ServeError:
            raise
        except Exception as exc:
            raise ModelExecutionError(f"PyTorch execute failure: {exc}") from None
        return {name: self._output(name, results) for name in outputs}

    def _forward(self, inputs: dict[str, np.ndarray]) -> list:
        result = self.module(*self._arguments(inputs))
        if isinstance(result, tuple):
            for index, item in enumerate(result):
                if isinstance(item, list) and not all(isinstance(e, str) for e in item):
                    raise ValueError(f"output at index {index} must be of type Tensor or List[str], received "
                                     f"List[{_element_type(item)}]")
            return list(result)
        if isinstance(result, self.torch.Tensor):
            return [result]
        if isinstance(result, list) and all(isinstance(e, str) for e in result):
            return [result]
        if isinstance(result, list):
            raise ValueError(f"output must be of type Tensor or List[str], received List[{_element_type(result)}]")
        raise ValueError("output must be of type Tensor, List[str] or Tuple containing one of these two types. It "
                         "should not be a List / Dictionary of Tensors or a Scalar")

    def _output(self, name: str, results: list) -> np.ndarray:
        index = self.output_index[name]
        if index >= len(results):
            raise ServeError(Status.INVALID_ARG, f"The output {name} in the model configuration refers to an output "
                                                 f"index which doesn't exist. This model has {len(results)} outputs")
        value = results[index]
        if isinstance(value, list):
            out = np.empty(len(value), dtype=object)
            out[:] = [item.encode("utf-8") for item in value]
            return out
        if not isinstance(value, self.torch.Tensor):
            raise ServeError(Status.INVALID_ARG, f"output '{name}' must be of type Tensor or List[str].")
        provided = TORCH_TO_TRITON.get(str(value.dtype).removeprefix("torch."), str(value.dtype))
        expected = self.output_types[name]
        if provided != expected:
            raise ServeError(Status.INVALID_ARG, f"configuration expects datatype {expected} for output '{name}', "
                                                 f"model provides {provided}")
        if value.dim() == 0:
            raise ServeError(Status.INVALID_ARG, f"output '{name}' is a scalar which is not supported.")
        return value.detach().to("cpu").contiguous().numpy()  # synchronous: waits for the instance's stream

    def close(self) -> None:
        self.module = None
        if self.stream is not None:
            self.torch.cuda.empty_cache()
        self.stream = None


def _element_type(items: list) -> str:
    return type(items[0]).__name__ if items else "Any"
