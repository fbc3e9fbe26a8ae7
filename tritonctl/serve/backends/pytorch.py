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
import re
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonctl.optional import MissingDependency, require
from tritonctl.repo_schema.modelfiles.pytorch import tensor_index as indexed
from tritonctl.repo_schema.rules.io import BACKEND_DATA_TYPES
from tritonctl.repo_schema.schema import data_type_name
from tritonctl.serve.backends.params import parse_bool
from tritonctl.serve.core.backend_api import Backend, BackendLoadError, InstanceSpec, ModelExecutionError
from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.sequence_state import CORRID

log = logging.getLogger("tritonctl.serve")

SUPPORTED_TYPES = BACKEND_DATA_TYPES["pytorch"]
TENSOR_TYPES = SUPPORTED_TYPES - {"TYPE_STRING"}
# The torch dtypes the backend maps to Triton's; any other reads as TYPE_<invalid>.
TORCH_TO_TRITON = {"bool": "TYPE_BOOL", "uint8": "TYPE_UINT8", "int8": "TYPE_INT8", "int16": "TYPE_INT16",
                   "int32": "TYPE_INT32", "int64": "TYPE_INT64", "float16": "TYPE_FP16", "float32": "TYPE_FP32",
                   "float64": "TYPE_FP64"}
INVALID_TYPE = "TYPE_<invalid>"
LEADING_INT = re.compile(r"[ \t\n\r\f\v]*[+-]?\d+")
INT32_RANGE = range(-(2**31), 2**31)
BOOL_PARAMETERS = ("DISABLE_OPTIMIZED_EXECUTION", "INFERENCE_MODE", "ENABLE_CACHE_CLEANING", "ENABLE_WEIGHT_SHARING",
                   "ENABLE_TENSOR_FUSER", "ENABLE_JIT_PROFILING", "ENABLE_JIT_EXECUTOR", "DISABLE_CUDNN")
# Request buffers are read-only views; the model gets them without a copy, as Triton's from_blob does.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

_thread_counts_lock = threading.Lock()
_thread_counts_set: dict[str, int] = {}  # process-wide, first model wins (as Triton's call_once)
_shared_lock = threading.Lock()
_shared_modules: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # ENABLE_WEIGHT_SHARING
_states_lock = threading.Lock()
_states: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (id(config), version dir) -> ModelState


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


def parse_count(value: str) -> int:
    """An integer parameter as Triton reads it (std::stoi): its leading digits, the rest ignored."""
    match = LEADING_INT.match(value)
    if match is None or int(match.group()) not in INT32_RANGE:
        raise BackendLoadError(f"failed to convert '{value}' to integral number")
    return int(match.group())


def read_settings(config) -> Settings:
    params = {key: p.string_value for key, p in config.parameters.items()}
    flags = {key: parse_bool(params[key], key) for key in BOOL_PARAMETERS if key in params}
    counts = {key: parse_count(params[key]) for key in ("INTRA_OP_THREAD_COUNT", "INTER_OP_THREAD_COUNT")
              if key in params}
    return Settings(optimized_execution=not flags.get("DISABLE_OPTIMIZED_EXECUTION", False),
                    inference_mode=flags.get("INFERENCE_MODE", True),
                    cache_cleaning=flags.get("ENABLE_CACHE_CLEANING", False),
                    weight_sharing=flags.get("ENABLE_WEIGHT_SHARING", False),
                    tensor_fuser=flags.get("ENABLE_TENSOR_FUSER"), jit_profiling=flags.get("ENABLE_JIT_PROFILING"),
                    jit_executor=flags.get("ENABLE_JIT_EXECUTOR"), disable_cudnn=flags.get("DISABLE_CUDNN"),
                    intra_op_threads=counts.get("INTRA_OP_THREAD_COUNT", 0),
                    inter_op_threads=counts.get("INTER_OP_THREAD_COUNT", 0))


def _state(flag: bool) -> str:
    return "enabled" if flag else "disabled"


def _log_settings(settings: Settings, config) -> None:
    """What the model's parameters set, in the lines Triton's PyTorch backend logs."""
    sharing = settings.weight_sharing if "ENABLE_WEIGHT_SHARING" in config.parameters else None
    lines = [f"Optimized execution is {_state(settings.optimized_execution)}",
             f"Cache Cleaning is {_state(settings.cache_cleaning)}",
             f"Inference Mode is {_state(settings.inference_mode)}",
             f"cuDNN is {_state(not settings.disable_cudnn)}"]
    for label, flag in (("Tensor fuser", settings.tensor_fuser), ("Weight sharing", sharing),
                        ("Jit profiling", settings.jit_profiling), ("Jit executor", settings.jit_executor)):
        if flag is not None:
            lines.append(f"{label} is {_state(flag)}")
    for label, count in (("Intra", settings.intra_op_threads), ("Inter", settings.inter_op_threads)):
        if count > 0:
            lines.append(f"{label} op thread count is set to {count}")
    for line in lines:
        log.info("%s for model instance '%s'", line, config.name)


class ModelState:
    """What Triton's PyTorch backend keeps per model version (its ModelState): the settings its
    parameters make, read and logged once however many instances the version has. It holds the
    config, so the config's id names no other while the state lives."""

    def __init__(self, config, settings: Settings):
        self.config = config
        self.settings = settings


def model_state(config, version_dir: Path) -> ModelState:
    """The version's ModelState, made (its parameters read and logged) by its first instance."""
    key = (id(config), str(version_dir))
    with _states_lock:
        state = _states.get(key)
        if state is None:
            state = ModelState(config, read_settings(config))
            if config.parameters:
                _log_settings(state.settings, config)
            _states[key] = state
    return state


def _declared_return(module):
    """forward()'s declared result type (a TorchScript type), None where it cannot be read."""
    try:
        return module._c._get_method("forward").schema.returns[0].type
    except (AttributeError, IndexError, RuntimeError):
        return None


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


def _control_index(control) -> int:
    """A sequence control's forward() position, from its <name>__<index> name."""
    index = indexed(control.name)
    if index is None:
        raise BackendLoadError(f"input '{control.name}' does not follow <name>__<index> naming convention.")
    if control.kind == CORRID and control.config_type not in TENSOR_TYPES:
        raise BackendLoadError(f"input '{control.name}' type '{control.config_type}' is not supported by PyTorch.")
    return index


def _convention(names: list[str], arguments: list[str]) -> str:
    """How config inputs find their forward() argument: 'argument' (its name), 'index'
    (<name>__<index>) or 'order' (the config's)."""
    if arguments and all(n in arguments for n in names):
        return "argument"
    return "index" if all(indexed(n) is not None for n in names) else "order"


def _first_unindexed(names: list[str]) -> str:
    return next(n for n in names if indexed(n) is None)


def _check_state_type(state, side: str, config) -> str:
    """The config type of an implicit state, or BackendLoadError where the backend refuses it."""
    model, batching = config.name, config.max_batch_size > 0
    type_name = data_type_name(state.data_type)
    state_name = state.input_name if side == "input state" else state.output_name
    if type_name not in SUPPORTED_TYPES:
        raise BackendLoadError(f"unsupported datatype {type_name} for {side} '{state_name}' for model '{model}'")
    rank = (0 if side == "input state" else len(state.dims)) + (1 if batching else 0)
    if type_name == "TYPE_STRING" and rank > 1:
        direction = "input" if side == "input state" else "output"
        raise BackendLoadError(f"Triton only supports 1 dimensional List of String as {direction} for "
                               f"'{state_name}' for model '{model}'")
    return type_name


class PyTorchBackend(Backend):
    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        super().__init__(config, version_dir, instance)
        torch = import_torch(config.name)
        self.torch = torch
        self.state = model_state(config, version_dir)
        self.settings = self.state.settings
        _set_thread_counts(torch, self.settings, config.name)
        self.device = self._device(torch, instance)
        path = version_dir / (config.default_model_filename or "model.pt")
        if not path.is_file():
            raise BackendLoadError(f"unable to find '{path}' for model instance '{config.name}'")
        self.module = self._load(torch, path)
        self.stream = torch.cuda.Stream(self.device) if self.device is not None and self.device.type == "cuda" \
            else None
        self.return_type = _declared_return(self.module)
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
                log.info("Reusing TorchScript model for instance '%s'", self.config.name)  # Triton's words
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
        controls = read_controls(config) if config.HasField("sequence_batching") else []
        self.positions: dict[str, int] = {}
        for control in controls:
            self.positions[control.name] = _control_index(control)
        allowed = self._forward_arguments()
        expected = len(config.input) + len(config.batch_input) + len(controls) + len(config.sequence_batching.state)
        if not self.dict_input and allowed is not None and len(allowed) != expected:
            raise BackendLoadError(f"unable to load model '{name}', configuration expects {expected} inputs, "
                                   f"model provides {len(allowed)}")
        if not config.input:
            raise BackendLoadError("model configuration must contain at least one input, none were specified.")
        names = [i.name for i in config.input]
        convention = _convention(names, allowed or [])
        if convention == "order":
            log.warning("input '%s' or previous input(s) are neither an input argument to the model '%s' nor do "
                        "they follow the <name>__<index> naming convention. Falling back to enforcing strict "
                        "ordering from model configuration.", _first_unindexed(names), name)
        self._check_state_names(convention, "input_name")
        targets = [t for b in config.batch_input for t in b.target_name]
        for position, tensor_name in enumerate(names + targets):
            if self.dict_input or convention == "order":
                self.positions[tensor_name] = position
            elif convention == "index":
                self.positions[tensor_name] = indexed(tensor_name) or 0
            elif tensor_name in allowed:
                self.positions[tensor_name] = allowed.index(tensor_name)
        self.string_inputs = {t.name for t in config.input if self._checked_type(t, "input") == "TYPE_STRING"}
        for state in config.sequence_batching.state:
            self.positions[state.input_name] = indexed(state.input_name)
            _check_state_type(state, "input state", config)

    def _forward_arguments(self) -> list[str] | None:
        """forward()'s argument names (None when it takes none), or BackendLoadError for the argument
        types Triton refuses. Sets ``dict_input`` for a single Dict(str, Tensor) argument."""
        arguments = list(self.module._c._get_method("forward").schema.arguments)
        if arguments and arguments[0].type.kind() == "ClassType":
            arguments = arguments[1:]
        self.dict_input = len(arguments) == 1 and arguments[0].type.kind() == "DictType"
        if self.dict_input or not arguments:
            return None
        if any(a.type.kind() == "DictType" for a in arguments[1:]):
            raise BackendLoadError("Multiple inputs of kind DictType were detected. Only a single input of "
                                   "type Dict(str, Tensor) is supported.")
        for argument in arguments:
            if argument.type.kind() not in ("TensorType", "ListType"):
                raise BackendLoadError(
                    f"An input of type '{argument.type}' was detected in the model. Only a single input of "
                    "type Dict(str, Tensor) or input(s) of type Tensor are supported.")
        return [a.name for a in arguments]

    def _checked_type(self, tensor, side: str) -> str:
        """The config type of an input or output, or BackendLoadError where the backend refuses it."""
        name, type_name = self.config.name, data_type_name(tensor.data_type)
        if type_name not in SUPPORTED_TYPES:
            raise BackendLoadError(f"unsupported datatype {type_name} for {side} '{tensor.name}' for model '{name}'")
        if type_name == "TYPE_STRING" and _rank(tensor, self.config.max_batch_size > 0) > 1:
            raise BackendLoadError(f"Triton only supports 1 dimensional List of String as {side} for "
                                   f"'{tensor.name}' for model '{name}'")
        return type_name

    def _check_state_names(self, convention: str, side: str) -> None:
        """A model with implicit state takes every input and output by <name>__<index>."""
        states = self.config.sequence_batching.state
        name = self.config.name
        if states and convention != "index":
            raise BackendLoadError(f"PyTorch model '{name}' is using sequence batching with state but not all inputs "
                                   "and outputs follow the <name>__<index> naming convention. ")
        for state in states:
            state_name = getattr(state, side)
            if indexed(state_name) is None:
                raise BackendLoadError(f"PyTorch model '{name}' is using sequence batching with state but state "
                                       f"'{state_name}' does not follow the <name>__<index> naming convention. ")

    def _map_outputs(self) -> None:
        config, name = self.config, self.config.name
        if not config.output:
            raise BackendLoadError("model configuration must contain at least one output, none were specified.")
        names = [o.name for o in config.output]
        by_index = all(indexed(n) is not None for n in names)
        if not by_index:
            log.warning("output '%s' or previous output(s) of the model '%s' do not follow the <name>__<index> "
                        "naming convention. Falling back to enforcing strict ordering from model configuration.",
                        _first_unindexed(names), name)
        self._check_state_names("index" if by_index else "order", "output_name")
        self.output_index: dict[str, int] = {}
        self.output_types: dict[str, str] = {}
        for position, tensor in enumerate(config.output):
            self.output_types[tensor.name] = self._checked_type(tensor, "output")
            self.output_index[tensor.name] = indexed(tensor.name) if by_index else position
        for state in config.sequence_batching.state:
            self.output_index[state.output_name] = indexed(state.output_name)
            self.output_types[state.output_name] = _check_state_type(state, "state", config)

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
        # OpenMP's and MKL's thread counts are per thread, and torch gives a thread the process's
        # intra-op count the first time that thread asks for it: without asking, an instance thread
        # ran MKL on OpenMP's default team whatever INTRA_OP_THREAD_COUNT said (with 1 thread on 2
        # cores, batch 4: 155 against 54 us per forward()).
        torch.get_num_threads()
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
        """forward() on ``inputs``; every output the config names is checked, as Triton checks them,
        whether asked for or not, and ``outputs`` come back."""
        try:
            results = self._forward(inputs)
        except ServeError:
            raise
        except Exception as exc:
            raise ModelExecutionError(f"PyTorch execute failure: {exc}") from None
        self._check_output_indices(len(results))
        checked = {name: self._checked_output(name, results[self.output_index[name]])
                   for name in sorted(self.output_index)}
        return {name: self._array(checked[name]) for name in outputs}

    def _forward(self, inputs: dict[str, np.ndarray]) -> list:
        result = self.module(*self._arguments(inputs))
        if isinstance(result, tuple):
            for index, item in enumerate(result):
                self._check_tuple_item(index, item)
            return list(result)
        if isinstance(result, self.torch.Tensor):
            return [result]
        if isinstance(result, list):
            element = self._list_element_type(result, self.return_type)
            if element != "str":
                raise ValueError(f"output must be of type Tensor or List[str], received List[{element}]")
            return [result]
        raise ValueError("output must be of type Tensor, List[str] or Tuple containing one of these two types. It "
                         "should not be a List / Dictionary of Tensors or a Scalar")

    def _check_tuple_item(self, index: int, item) -> None:
        if isinstance(item, list):
            declared = _tuple_element(self.return_type, index)
            element = self._list_element_type(item, declared)
            if element != "str":
                raise ValueError(f"output at index {index} must be of type Tensor or List[str], received "
                                 f"List[{element}]")
        elif not isinstance(item, self.torch.Tensor):
            raise ValueError(f"Expected Tensor but got {_tag_kind(item)}")

    def _list_element_type(self, items: list, declared) -> str:
        """A list's element type as TorchScript declares it (List[Tensor] even when empty)."""
        if declared is not None and declared.kind() == "ListType":
            return str(declared.getElementType())
        if not items:
            return "Any"
        return "Tensor" if isinstance(items[0], self.torch.Tensor) else type(items[0]).__name__

    def _check_output_indices(self, count: int) -> None:
        for name in sorted(self.output_index):
            if self.output_index[name] >= count:
                raise ServeError(Status.INVALID_ARG, f"The output {name} in the model configuration refers to an "
                                                     f"output index which doesn't exist. This model has {count} "
                                                     "outputs")

    def _checked_output(self, name: str, value):
        if isinstance(value, list):
            return value
        provided = TORCH_TO_TRITON.get(str(value.dtype).removeprefix("torch."), INVALID_TYPE)
        expected = self.output_types[name]
        if provided != expected:
            raise ServeError(Status.INVALID_ARG, f"configuration expects datatype {expected} for output '{name}', "
                                                 f"model provides {provided}")
        if value.dim() == 0:
            raise ServeError(Status.INVALID_ARG, f"output '{name}' is a scalar which is not supported.")
        return value

    @staticmethod
    def _array(value) -> np.ndarray:
        if isinstance(value, list):
            out = np.empty(len(value), dtype=object)
            out[:] = [item.encode("utf-8") for item in value]
            return out
        return value.detach().to("cpu").contiguous().numpy()  # synchronous: waits for the instance's stream

    def close(self) -> None:
        self.module = None
        if self.stream is not None:
            self.torch.cuda.empty_cache()
        self.stream = None


def _tuple_element(declared, index: int):
    """The declared type of element ``index`` of forward()'s tuple result, where known."""
    if declared is None or declared.kind() != "TupleType":
        return None
    elements = declared.elements()
    return elements[index] if index < len(elements) else None


# What c10's IValue calls a value that is not a tensor ("Expected Tensor but got Int").
TAG_KINDS = ((type(None), "None"), (bool, "Bool"), (int, "Int"), (float, "Double"), (complex, "ComplexDouble"),
             (str, "String"), (tuple, "Tuple"), (dict, "GenericDict"))


def _tag_kind(value) -> str:
    return next((kind for python_type, kind in TAG_KINDS if isinstance(value, python_type)), "Object")
