"""What ``import triton_python_backend_utils as pb_utils`` gives a Python-backend model.

The Python backend installs this module under that name while it loads a model's ``model.py``.
It holds the part of Triton's module that models use in ``initialize`` / ``execute`` /
``finalize``: tensors, requests, responses, errors and the config helpers.
"""

from __future__ import annotations

import enum
import json
import logging
import numbers
import struct
import types
import weakref
from typing import Any

import numpy as np

# The config API and the error types are shared with `validate` (which runs auto_complete_config).
from tritonctl.repo_schema.datatypes import BY_CONFIG, DATATYPES
from tritonctl.serve.stub import dlpack
from tritonctl.serve.stub.wire import serialize_bytes
from tritonctl.repo_schema.pb_config import (  # noqa: F401 - part of the module's API
    ModelConfig,
    TritonError,
    TritonModelException,
    get_input_config_by_name,
    get_output_config_by_name,
    using_decoupled_model_transaction_policy,
)

# Config data type -> numpy type, as Triton's module has them (no BF16: numpy has no bfloat16).
TRITON_STRING_TO_NUMPY: dict[str, Any] = {t.config: np.dtype(t.numpy).type for t in DATATYPES if t.config != "TYPE_BF16"}
# InferenceRequest.flags() bits of a sequence's first and last request.
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
# InferenceResponseSender.send() flag: the request's last response.
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
# PreferredMemory types (BLS outputs always arrive in CPU memory here).
TRITONSERVER_MEMORY_CPU = 0
TRITONSERVER_MEMORY_GPU = 2
# DataType enum numbers of model_config.proto (TYPE_BOOL = 1 ... TYPE_STRING = 13).
_NUMPY_BY_ENUM = {BY_CONFIG[name].number: numpy_type for name, numpy_type in TRITON_STRING_TO_NUMPY.items()}


class PreferredMemory:
    """Where a BLS request would like its outputs (``TRITONSERVER_MEMORY_CPU`` / ``_GPU`` and a
    device id); outputs are numpy arrays in CPU memory here, whatever is preferred."""

    def __init__(self, preferred_memory_type: int = TRITONSERVER_MEMORY_CPU, preferred_device_id: int = 0):
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


def _typed(value, types, call: str, argument: str):
    """``value`` when it is one of ``types``; else TypeError, as Triton's pybind11 bindings raise
    for an argument of the wrong type (semantic refusals raise TritonModelException)."""
    if isinstance(value, types):
        return value
    types = types if isinstance(types, tuple) else (types,)
    if int in types and isinstance(value, numbers.Integral):  # numpy integers too, as pybind11 takes them
        return value
    names = " or ".join(t.__name__ for t in types)
    raise TypeError(f"{call}: incompatible function arguments: '{argument}' must be {names}, "
                    f"got {type(value).__name__}")


def _listed(values, types, call: str, argument: str, none_refused: str | None = None) -> list:
    """``values`` (a list or tuple) of ``types``; a None element refused with ``none_refused``
    (TritonModelException) where Triton checks for it, else TypeError like any other element. The
    other elements' types come first, as pybind11 converts the whole list before Triton looks."""
    _typed(values, (list, tuple), call, argument)
    for value in values:
        if value is not None or none_refused is None:
            _typed(value, types, call, f"{argument}[]")
    if none_refused is not None and any(value is None for value in values):
        raise TritonModelException(none_refused)
    return list(values)


class LogLevel(enum.Enum):
    """Triton's ``Logger.LogLevel`` (also ``Logger.INFO`` ...), as the logging levels they map to."""

    INFO = logging.INFO
    WARNING = logging.WARNING
    ERROR = logging.ERROR
    VERBOSE = logging.DEBUG


class Logger:
    """``pb_utils.Logger.log_info(msg)`` ... : model messages in the server's log, at the level
    the server's log settings let through (VERBOSE = debug)."""

    LogLevel = LogLevel
    INFO, WARNING, ERROR, VERBOSE = LogLevel.INFO, LogLevel.WARNING, LogLevel.ERROR, LogLevel.VERBOSE
    _log = logging.getLogger("tritonctl.serve.python_model")

    @classmethod
    def log(cls, message: str, level: LogLevel = LogLevel.INFO) -> None:
        _typed(message, str, "log()", "message")
        _typed(level, LogLevel, "log()", "level")
        cls._log.log(level.value, "%s", message, stacklevel=2)

    @classmethod
    def log_info(cls, message: str) -> None:
        cls._log.info("%s", _typed(message, str, "log_info()", "message"), stacklevel=2)

    @classmethod
    def log_warn(cls, message: str) -> None:
        cls._log.warning("%s", _typed(message, str, "log_warn()", "message"), stacklevel=2)

    @classmethod
    def log_error(cls, message: str) -> None:
        cls._log.error("%s", _typed(message, str, "log_error()", "message"), stacklevel=2)

    @classmethod
    def log_verbose(cls, message: str) -> None:
        cls._log.debug("%s", _typed(message, str, "log_verbose()", "message"), stacklevel=2)


EMPTY_TENSOR_NAME = "Tensor name cannot be an empty string."
# Triton's texts (pb_tensor.cc), spaces and all (a line continuation inside a C++ string literal).
NOT_DLPACK = ("Provided tensor is not supported. Tensor must be a DLPack capsule         or have `__dlpack__` and "
              "`__dlpack_device__` attributes")
ON_GPU = "Tensor is stored in GPU and cannot be converted to NumPy."
BF16_NOT_NUMPY = "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead."
NO_STRINGS = "DLPack does not have support for string tensors."
NOT_CONTIGUOUS = ("DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are "
                  "supported.")


class _Capsule:
    """A bare DLPack capsule as numpy's ``from_dlpack`` takes it: an object with ``__dlpack__``."""

    def __init__(self, capsule, device: tuple[int, int]):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, stream=None, **_options):
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


class _TensorMemory:
    """A tensor's memory as numpy takes it (``__array_interface__``): the array numpy makes of it
    keeps this object, and so the tensor, alive."""

    def __init__(self, tensor: "Tensor"):
        self.tensor = tensor
        self.data = _dlpack_words(tensor._data)
        self.__array_interface__ = self.data.__array_interface__


def _dlpack_words(data: np.ndarray) -> np.ndarray:
    """What numpy can share through DLPack: BF16 words as uint16 (the capsule is retyped after)."""
    return data.view(np.uint16) if data.dtype == dlpack.BF16_WORDS else data


def _bfloat16_capsule(data: np.ndarray, capsule):
    return dlpack.retype_bfloat16(capsule, to_words=False) if data.dtype == dlpack.BF16_WORDS else capsule


def model_data(datatype: str, data: np.ndarray) -> np.ndarray:
    """A tensor's data (as the server holds it) as a Python model's tensor holds it: BF16's words
    typed as such, so that they are not taken for numbers."""
    return data.view(dlpack.BF16_WORDS) if datatype == "BF16" else data


def server_data(data: np.ndarray) -> tuple[str | None, np.ndarray]:
    """A Python model's tensor data as the server holds it, and its datatype where the array's dtype
    does not say it (BF16)."""
    return ("BF16", data.view(np.uint16)) if data.dtype == dlpack.BF16_WORDS else (None, data)


class _GpuMemory:
    """A tensor's GPU memory: where it is (``view``), and what keeps it alive: the capsule it was
    read from and, when the model gave one, the framework's tensor, which shares it again."""

    def __init__(self, view: dlpack.DLView, capsule, source=None):
        self.view, self.capsule, self.source = view, capsule, source

    def export(self, stream):
        if self.source is not None:
            return self.source.__dlpack__(stream=stream)
        return self.capsule  # a bare capsule can be consumed once, as the model's own capsule could


class Tensor:
    """A named tensor: a numpy array (CPU memory), or GPU memory shared through DLPack
    (``from_dlpack`` of a CUDA tensor), copied to host memory only when it leaves the model."""

    def __init__(self, name: str, data):
        _typed(name, str, "Tensor()", "name")
        if not isinstance(data, np.ndarray):  # Triton's binding takes a numpy.ndarray only
            raise TypeError("Tensor(): incompatible function arguments: the tensor's data must be a numpy array, "
                            f"got {type(data).__name__}")
        if not name:
            raise TritonModelException(EMPTY_TENSOR_NAME)
        array = data
        if array.dtype.kind in "SU":
            array = array.astype(object)
        self._name = name
        self._data = array
        self._gpu: _GpuMemory | None = None

    @classmethod
    def _in_gpu_memory(cls, name: str, memory: _GpuMemory) -> "Tensor":
        tensor = cls.__new__(cls)
        tensor._name, tensor._data, tensor._gpu = name, None, memory
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        if self._gpu is not None:
            raise TritonModelException(ON_GPU)
        if self._data.dtype == dlpack.BF16_WORDS:
            raise TritonModelException(BF16_NOT_NUMPY)
        return self._data

    def shape(self) -> list[int]:
        return list(self._gpu.view.shape if self._gpu is not None else self._data.shape)

    def is_cpu(self) -> bool:
        return self._gpu is None

    def triton_dtype(self) -> int | None:
        """The tensor's data type as Triton's enum number (TYPE_FP32 -> 11, TYPE_STRING -> 13)."""
        dtype = self._gpu.view.dtype if self._gpu is not None else self._data.dtype
        return BY_CONFIG["TYPE_BF16"].number if dtype == dlpack.BF16_WORDS else numpy_to_triton_type(dtype)

    def _host_numpy(self, needed_by: str) -> np.ndarray:
        """The tensor's data in host memory, where it leaves the model (``needed_by`` says where)."""
        if self._gpu is None:
            return self._data
        try:
            return dlpack.copy_to_host(self._gpu.view, f"{needed_by} '{self._name}' in GPU memory")
        except dlpack.DLPackError as exc:
            raise TritonModelException(str(exc)) from None

    # ---- DLPack: Triton's interoperability with torch, cupy, jax ... -------------------------------
    def to_dlpack(self):
        """A DLPack capsule sharing this tensor's memory, for ``torch.utils.dlpack.from_dlpack``. As
        in Triton, the capsule holds a reference to this tensor until it is consumed or dropped."""
        if self._gpu is not None:
            return self._gpu.export(None)
        self.__dlpack__()  # the checks, and a writeable copy of read-only data
        return _bfloat16_capsule(self._data, np.asarray(_TensorMemory(self)).__dlpack__())

    def __dlpack__(self, stream=None, **_options):
        if self._gpu is not None:
            return self._gpu.export(stream)
        if self._data.dtype == object:
            raise TritonModelException(NO_STRINGS)
        if not self._data.flags.writeable:  # DLPack cannot say read-only: share a copy from now on
            self._data = self._data.copy()
        try:
            return _bfloat16_capsule(self._data, _dlpack_words(self._data).__dlpack__())
        except (BufferError, TypeError) as exc:
            raise TritonModelException(f"tensor '{self._name}' cannot be shared through DLPack: {exc}") from None

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._gpu.view.device if self._gpu is not None else (dlpack.CPU, 0)

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor) -> "Tensor":
        """A tensor sharing the memory of ``dlpack_tensor``: a DLPack capsule, or an object with
        ``__dlpack__`` and ``__dlpack_device__`` (a torch tensor, say), in CPU or CUDA memory, in C
        order, as in Triton."""
        _typed(name, str, "from_dlpack()", "name")
        if not name:
            raise TritonModelException(EMPTY_TENSOR_NAME)
        try:
            if hasattr(dlpack_tensor, "__dlpack__") and hasattr(dlpack_tensor, "__dlpack_device__"):
                device = _served_device(tuple(dlpack_tensor.__dlpack_device__()))
                # on a GPU, the producer's work ordered before what reads the capsule
                capsule = dlpack_tensor.__dlpack__(stream=dlpack.LEGACY_DEFAULT_STREAM if device == dlpack.CUDA
                                                   else None)
                source = dlpack_tensor
            elif type(dlpack_tensor).__name__ == "PyCapsule":
                capsule, source = dlpack_tensor, None
            else:
                raise TritonModelException(NOT_DLPACK)
            view = dlpack.read_capsule(capsule)
            if _served_device(view.device) == dlpack.CUDA:
                return _gpu_tensor(name, view, capsule, source)
            if view.dtype == dlpack.BF16_WORDS:  # numpy reads the words as uint16: typed BF16 again below
                dlpack.retype_bfloat16(capsule, to_words=True)
            array = np.from_dlpack(_Capsule(capsule, view.device))
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:  # DLPackError, the producer's refusals
            raise TritonModelException(f"pb_utils.Tensor.from_dlpack('{name}'): {exc}") from None
        if not array.flags.c_contiguous:
            raise TritonModelException(NOT_CONTIGUOUS)
        return Tensor(name, array.view(dlpack.BF16_WORDS) if view.dtype == dlpack.BF16_WORDS else array)

    def __repr__(self) -> str:
        if self._gpu is not None:
            return f"Tensor({self._name!r}, shape={self.shape()}, device=cuda:{self._gpu.view.device[1]})"
        return f"Tensor({self._name!r}, shape={self.shape()}, dtype={self._data.dtype})"


def _served_device(device: tuple[int, int]) -> int:
    """The DLPack device type, when Triton's Python backend takes tensors there."""
    if device[0] not in (dlpack.CPU, dlpack.CUDA, dlpack.CUDA_HOST):
        raise TritonModelException(f"DLDevice type {device[0]} is not support by Python backend.")
    return device[0]


def _gpu_tensor(name: str, view: dlpack.DLView, capsule, source) -> Tensor:
    """A tensor in CUDA memory, ``view`` of ``capsule`` (which ``source`` made, when not None), once
    the work queued on its device is done, as Triton's from_dlpack returns (whatever stream the
    framework wrote it on)."""
    if not view.c_contiguous:
        raise TritonModelException(NOT_CONTIGUOUS)
    dlpack.synchronize(view.device[1], "a Python model's tensor in GPU memory")
    return Tensor._in_gpu_memory(name, _GpuMemory(view, capsule, source))


class InferenceTrace:
    """What ``InferenceRequest.trace()`` gives, as Triton's: no OpenTelemetry context here (the
    server's traces are Triton's own mode, see --trace-config)."""

    def get_context(self, mode: str = "opentelemetry") -> str | None:
        return None


class InferenceRequest:
    """A request: one of the batch ``execute`` receives, or a BLS request a model builds to run
    another model (``exec`` / ``async_exec``). Built by a model, it takes Triton's keywords:
    ``InferenceRequest(model_name=, inputs=[Tensor...], requested_output_names=[...])`` and
    optionally ``request_id``, ``correlation_id`` (int or str), ``model_version`` (-1 = latest),
    ``flags`` (sequence start / end), ``timeout`` (queue timeout in microseconds),
    ``preferred_memory`` and ``parameters`` (a dict of str, int and bool values)."""

    def __init__(self, request_id: str = "", correlation_id: int | str = 0, *, inputs: list[Tensor],
                 requested_output_names: list[str], model_name: str, model_version: int = -1, flags: int = 0,
                 timeout: int = 0, preferred_memory: PreferredMemory | None = None, trace=None,
                 parameters: dict | str | None = None):
        call = "InferenceRequest()"
        if not _typed(model_name, str, call, "model_name"):
            raise TritonModelException("InferenceRequest needs model_name, the name of the model to run")
        self._requested = _listed(requested_output_names, str, call, "requested_output_names")
        self._model_name = model_name
        self._id = _typed(request_id, str, call, "request_id")
        correlation_id = _typed(correlation_id, (int, str), call, "correlation_id")
        self._correlation_id = correlation_id if isinstance(correlation_id, str) else int(correlation_id)
        self._flags = int(_typed(flags, int, call, "flags"))
        self._timeout = int(_typed(timeout, int, call, "timeout"))
        if preferred_memory is not None:
            _typed(preferred_memory, PreferredMemory, call, "preferred_memory")
        self._model_version = int(_typed(model_version, int, call, "model_version"))
        # Once every argument has its type, as in Triton: no None among the inputs, then the parameters.
        self._inputs = _listed(inputs, Tensor, call, "inputs", f"Input tensor for request with id '{self._id}' "
                               f"and model name '{model_name}' should not be empty.")
        self._parameters = {} if parameters is None else _checked_parameters(parameters, "InferenceRequest")
        self._source = None  # the served request (core InferRequest) of a request execute received
        self._senders = None
        self._index = 0

    @classmethod
    def _received(cls, model_name: str, model_version: int, inputs: list[Tensor], requested: list[str], source,
                  correlation_id: int | str, flags: int, parameters: dict, senders, index: int) -> "InferenceRequest":
        """Request ``index`` of the batch ``execute`` receives; ``source`` is the server's request,
        ``senders`` the batch's ``decoupled.BatchSenders``."""
        request = cls.__new__(cls)
        request._model_name, request._model_version = model_name, model_version
        request._inputs, request._requested = inputs, requested
        request._id, request._correlation_id, request._flags = source.id, correlation_id, flags
        request._timeout, request._parameters = source.timeout_us, parameters
        request._source, request._senders, request._index = source, senders, index
        return request

    def inputs(self) -> list[Tensor]:
        return list(self._inputs)

    def get_input_tensor_by_name(self, name: str) -> Tensor | None:
        return get_input_tensor_by_name(self, name)

    def requested_output_names(self) -> list[str]:
        return list(self._requested)

    def request_id(self) -> str:
        return self._id

    def correlation_id(self) -> int | str:
        """The sequence id (0 when none): an int, or a str for a string sequence id."""
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        self._flags = int(_typed(flags, int, "InferenceRequest.set_flags()", "flags"))

    def timeout(self) -> int:
        return self._timeout

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def parameters(self) -> str:
        """The request's parameters as a JSON string, as Triton's Python backend gives them."""
        return json.dumps(self._parameters, default=str, separators=(",", ":"))  # Triton's compact form

    def is_cancelled(self) -> bool:
        """Whether the client gave up on this request (disconnected, cancelled, deadline passed)."""
        return self._source is not None and self._source.cancelled

    def set_release_flags(self, flags: int) -> None:
        """``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``: when execute() returns, the request runs
        again instead of ending (the next step of an iterative sequence: ``sequence_batching {
        iterative_sequence: true }``); ``TRITONSERVER_REQUEST_RELEASE_ALL`` (the default) ends it."""
        if self._source is None:
            raise TritonModelException("set_release_flags() is only available on the requests execute() receives, "
                                       "not on a BLS request a model builds")
        if flags not in (TRITONSERVER_REQUEST_RELEASE_ALL, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE):
            raise TritonModelException(f"unsupported request release flags {flags}: use "
                                       "TRITONSERVER_REQUEST_RELEASE_ALL or TRITONSERVER_REQUEST_RELEASE_RESCHEDULE")
        self._source.reschedule = flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE

    def trace(self) -> "InferenceTrace":
        """The request's trace, which a BLS request it makes may take (``trace=request.trace()``)."""
        return InferenceTrace()

    def get_response_sender(self):
        """The request's ``InferenceResponseSender`` (the same object on every call): a decoupled
        model sends its responses, then ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL``, through it."""
        if self._senders is None:
            raise TritonModelException("get_response_sender() is only available on the requests execute() "
                                       "receives, not on a BLS request a model builds")
        return self._senders.sender(self._index, self._source)

    def exec(self, decoupled: bool = False):
        """Run this BLS request on its model through the server's scheduling and wait: an
        InferenceResponse (errors included, never raised), or with ``decoupled=True`` an iterator
        of every response the model sends (its final flag alone ends it as an empty response)."""
        from tritonctl.serve.backends import bls

        return bls.execute(self, decoupled)

    def async_exec(self, decoupled: bool = False):
        """``exec`` for ``async def execute``: an awaitable of what ``exec`` returns."""
        from tritonctl.serve.backends import bls

        return bls.execute_async(self, decoupled)


class InferenceResponse:
    """The answer to one request: output tensors, or an error."""

    def __init__(self, output_tensors: list[Tensor] = (), error: TritonError | None = None,
                 parameters: dict | str | None = None):
        call = "InferenceResponse()"
        self._error = None if error is None else _typed(error, TritonError, call, "error")
        self._outputs = _listed(output_tensors, Tensor, call, "output_tensors",
                                "Output tensor for inference response should not be empty.")
        # the checked values; the server and the stub read them here, the model as JSON
        self._parameter_values = None if parameters is None else _checked_parameters(parameters, "InferenceResponse")

    def parameters(self) -> str:
        """The response's parameters as JSON ("" when it has none)."""
        return "" if self._parameter_values is None else json.dumps(self._parameter_values)

    def output_tensors(self) -> list[Tensor]:
        return list(self._outputs)

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


# ---- custom metrics (MetricFamily) --------------------------------------------------------------
COUNTER, GAUGE, HISTOGRAM = 0, 1, 2  # a MetricFamily's kind (the numbers of serve.core.custom_metrics)
# Set by what runs the model (the server, or the stub process): () -> the model instance's metrics,
# with family / metric / release_family / release_metric / update, raising ValueError when refused.
metrics_of_model = None


def _refused_as_exception(method, *args):
    """``method(*args)``: what the server refuses (ValueError) reaches the model as TritonModelException."""
    try:
        return method(*args)
    except ValueError as exc:
        raise TritonModelException(str(exc)) from None


def _number(value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TritonModelException(f"a metric's value must be a number, got {type(value).__name__}")
    return float(value)


class MetricFamily:
    """A family of metrics the model defines; ``/metrics`` shows them under ``name``. Made again with
    the same name and kind, it is the same family (the first description stays)."""

    COUNTER, GAUGE, HISTOGRAM = COUNTER, GAUGE, HISTOGRAM

    def __init__(self, name: str, description: str, kind: int):
        if metrics_of_model is None:
            raise TritonModelException("pb_utils.MetricFamily works in a model that tritonctl serve runs")
        metrics = metrics_of_model()
        _refused_as_exception(metrics.family, name, description, kind)
        self._metrics, self._name, self._kind = metrics, name, kind

    def Metric(self, labels: dict | None = None, buckets: list | None = None) -> "Metric":  # noqa: N802 - Triton's
        return Metric(self, labels, buckets)

    def __del__(self):
        if hasattr(self, "_name"):
            try:
                self._metrics.release_family(self._name)
            except Exception:  # the server or the interpreter is going away
                pass


class Metric:
    """One metric of a family, by its labels: made again with the same labels, it is the same metric.
    As in Triton, it works only while the MetricFamily object it was made from exists."""

    def __init__(self, family: MetricFamily, labels: dict | None = None, buckets: list | None = None):
        if labels is not None and (not isinstance(labels, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items())):
            raise TritonModelException(f"a metric's labels must be a dict of str to str, got {labels!r}")
        labels = dict(labels) if labels else None
        buckets = None if buckets is None else list(buckets)
        _refused_as_exception(family._metrics.metric, family._name, labels, buckets)
        self._family = weakref.ref(family)
        self._metrics, self._name, self._labels = family._metrics, family._name, labels

    def increment(self, value: float) -> None:
        self._update("increment", _number(value))

    def set(self, value: float) -> None:
        self._update("set", _number(value))

    def observe(self, value: float) -> None:
        self._update("observe", _number(value))

    def value(self) -> float:
        return self._update("value")

    def _update(self, op: str, value: float | None = None):
        if self._family() is None:
            raise TritonModelException("Invalid metric operation as the corresponding 'MetricFamily' has been "
                                       "deleted.")
        return _refused_as_exception(self._metrics.update, self._name, self._labels, op, value)

    def __del__(self):
        if hasattr(self, "_name"):
            try:
                self._metrics.release_metric(self._name, self._labels)
            except Exception:
                pass


# ---- the model loading API -----------------------------------------------------------------------
# Set by what runs the model: () -> the server's model control (load, unload, ready), raising
# ValueError with the server's refusal.
model_control_of_model = None
# () -> the version directory of the model whose code calls, set by whoever runs models
model_dir_of_model = None


def get_model_dir() -> str:
    """The directory of the calling model's version (``<repository>/<model>/<version>``), where a
    Python-based backend's model finds its files."""
    if model_dir_of_model is None:
        raise TritonModelException("pb_utils.get_model_dir() works in a model that tritonctl serve runs")
    return model_dir_of_model()


def _model_control():
    if model_control_of_model is None:
        raise TritonModelException("the model loading API works in a model that tritonctl serve runs")
    return model_control_of_model()


def load_model(model_name: str, config: str = "", files: dict | None = None) -> None:
    """Load (or reload) ``model_name`` from the repository, with ``config`` (the model's config as
    JSON) in place of its config.pbtxt, or from ``files`` ({"file:<version>/<name>": bytes}, which
    need ``config``); the server must run in explicit model control mode."""
    if not isinstance(model_name, str) or not isinstance(config, str):
        raise TritonModelException("load_model() takes the model's name and its config as str")
    parameters: dict = {"config": config} if config else {}
    for key, content in (files or {}).items():
        if not isinstance(key, str) or not isinstance(content, (bytes, bytearray)):
            raise TritonModelException("load_model() takes files as a dict of 'file:<version>/<name>' to bytes")
        parameters[key] = bytes(content)
    _refused_as_exception(_model_control().load, model_name, parameters)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    if not isinstance(model_name, str):
        raise TritonModelException("unload_model() takes the model's name as str")
    _refused_as_exception(_model_control().unload, model_name)  # unload_dependents: as the repository API


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    if not isinstance(model_name, str) or not isinstance(model_version, str):
        raise TritonModelException("is_model_ready() takes the model's name and version as str")
    return bool(_refused_as_exception(_model_control().ready, model_name, model_version))


def check_send_arguments(response, flags: int) -> None:
    """What a response sender's send() refuses before anything is sent, in Triton's texts."""
    if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
        raise TritonModelException("Unable to send response. Unsupported flag provided.")
    if response is None and flags == 0:
        raise TritonModelException("Inference Response object must be provided when the response flags is set "
                                   "to zero.")
    if response is not None and not isinstance(response, InferenceResponse):
        raise TritonModelException(f"send() takes a pb_utils.InferenceResponse, not a {type(response).__name__}")


def _checked_parameters(parameters: dict | str, owner: str) -> dict:
    """A request's or a response's parameters (a dict, or its JSON text): str keys, bool, int or
    str values, refused in Triton's words otherwise."""
    if isinstance(parameters, str):
        try:
            parameters = json.loads(parameters)
        except ValueError as exc:
            raise TritonModelException(f"{owner}'s parameters are not valid JSON: {exc}") from None
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect {owner}'s parameters to be a dict or its JSON text, got "
                                   f"{type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(key)}")
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(f"Expect parameters values to have type bool/int/str, found type "
                                       f"{type(value)}")
    return dict(parameters)


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in inference_request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in inference_response.output_tensors() if t.name() == name), None)


def serialize_byte_tensor(input_tensor: np.ndarray) -> np.ndarray:
    """A BYTES tensor as Triton's wire form: each element's length (4 bytes, little endian), then the
    element, in C order, as a 0-d object array holding those bytes (as Triton's module returns it).
    Elements that are not bytes are written as their UTF-8 text."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.object_)
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        raise TritonModelException("cannot serialize bytes tensor: invalid datatype")
    return np.asarray(serialize_bytes(input_tensor), dtype=np.object_)


def deserialize_bytes_tensor(encoded_tensor) -> np.ndarray:
    """The elements of a BYTES tensor in Triton's wire form (bytes, a uint8 array, or the 0-d array
    ``serialize_byte_tensor`` returns), as a 1-D object array of bytes."""
    if isinstance(encoded_tensor, np.ndarray) and encoded_tensor.dtype == np.object_ and encoded_tensor.ndim == 0:
        encoded_tensor = encoded_tensor.item()
    buffer = memoryview(encoded_tensor).cast("B")
    elements, offset = [], 0
    while offset < len(buffer):
        if offset + 4 > len(buffer):
            raise TritonModelException(f"cannot deserialize bytes tensor: {len(buffer) - offset} bytes at offset "
                                       f"{offset} are too few for an element's 4-byte length")
        (length,) = struct.unpack_from("<I", buffer, offset)
        offset += 4
        if offset + length > len(buffer):
            raise TritonModelException(f"cannot deserialize bytes tensor: an element of {length} bytes at offset "
                                       f"{offset} runs past the {len(buffer)} bytes given")
        elements.append(bytes(buffer[offset:offset + length]))
        offset += length
    return np.array(elements, dtype=np.object_)


def triton_string_to_numpy(triton_type_string: str):
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int):
    return _NUMPY_BY_ENUM.get(data_type)


def numpy_to_triton_type(data_type) -> int | None:
    dtype = np.dtype(data_type)
    if dtype.kind in "SUO":
        return 13
    for number, numpy_type in _NUMPY_BY_ENUM.items():
        if np.dtype(numpy_type) == dtype:
            return number
    return None


# The names of Triton's compiled ``c_python_backend_utils``, which ``triton_python_backend_utils``
# re-exports: a model may import either.
C_MODULE_NAME = "c_python_backend_utils"
_C_MODULE_NAMES = (
    "TritonError", "TritonModelException", "PreferredMemory", "TRITONSERVER_MEMORY_CPU", "TRITONSERVER_MEMORY_GPU",
    "InferenceTrace", "InferenceRequest", "Tensor", "InferenceResponse", "Logger", "LogLevel", "MetricFamily",
    "Metric", "COUNTER", "GAUGE", "HISTOGRAM", "load_model", "unload_model", "is_model_ready",
    "TRITONSERVER_REQUEST_RELEASE_ALL", "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
)
SHM_POOL_BYTE_SIZE = 1 << 20  # Triton's default shm-default-byte-size


def _free_memory() -> int:
    """The free bytes of the stub's shared-memory pool: all of it, as tensors never stay in it
    between calls here."""
    return SHM_POOL_BYTE_SIZE


def c_python_backend_utils() -> types.ModuleType:
    """A ``c_python_backend_utils`` module over this module's classes (the same objects)."""
    module = types.ModuleType(C_MODULE_NAME)
    for name in _C_MODULE_NAMES:
        setattr(module, name, globals()[name])
    module.shared_memory = types.SimpleNamespace(free_memory=_free_memory)
    return module
