"""Triton's Python backend, in process: each instance loads ``<model>/<version>/model.py`` (or
``default_model_filename``) as its own module, creates its ``TritonPythonModel``, calls
``initialize(args)`` once, ``execute(requests)`` per batch and ``finalize()`` on unload.

While ``model.py`` is imported, ``import triton_python_backend_utils`` resolves to
``tritonctl.serve.backends.pb_utils`` and the version directory is on ``sys.path`` (so the
model can import modules lying beside it, as in Triton).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import re
import sys
import traceback
from pathlib import Path

import numpy as np

from tritonctl.serve.backends import pb_utils
from tritonctl.serve.backends.base import BackendLoadError, InstanceSpec, RequestBackend
from tritonctl.serve.core.errors import ServeError, Status, internal

log = logging.getLogger("tritonctl.serve")

PB_UTILS_NAME = "triton_python_backend_utils"
# pb_utils.TritonError codes -> Triton statuses.
ERROR_STATUS = {
    pb_utils.TritonError.UNKNOWN: Status.UNKNOWN, pb_utils.TritonError.INTERNAL: Status.INTERNAL,
    pb_utils.TritonError.NOT_FOUND: Status.NOT_FOUND, pb_utils.TritonError.INVALID_ARG: Status.INVALID_ARG,
    pb_utils.TritonError.UNAVAILABLE: Status.UNAVAILABLE, pb_utils.TritonError.UNSUPPORTED: Status.UNSUPPORTED,
    pb_utils.TritonError.ALREADY_EXISTS: Status.ALREADY_EXISTS, pb_utils.TritonError.CANCELLED: Status.CANCELLED,
}


@contextlib.contextmanager
def model_import_context(version_dir: Path):
    """pb_utils importable under Triton's name and ``version_dir`` on sys.path, only meanwhile.
    Modules the model imports from its own directory are dropped afterwards, so two models (or
    a reload) with a ``helper.py`` each get their own."""
    previous = sys.modules.get(PB_UTILS_NAME)
    before = set(sys.modules)
    sys.modules[PB_UTILS_NAME] = pb_utils
    sys.path.insert(0, str(version_dir))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(version_dir))
        if previous is None:
            sys.modules.pop(PB_UTILS_NAME, None)
        else:
            sys.modules[PB_UTILS_NAME] = previous
        root = str(version_dir.resolve())
        for name in set(sys.modules) - before:
            location = getattr(sys.modules[name], "__file__", None) or ""
            if location and str(Path(location).resolve()).startswith(root):
                del sys.modules[name]


def describe(exc: BaseException, model_file: Path) -> str:
    """``Type: message`` and the innermost line of the model's own file, as Triton reports it."""
    text = f"{type(exc).__name__}: {exc}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve().parent == model_file.resolve().parent]
    if frames:
        frame = frames[-1]
        text += f" (at {Path(frame.filename).name}:{frame.lineno} in {frame.name})"
    return text


class PythonBackend(RequestBackend):
    def __init__(self, config, model_dir: Path, version_dir: Path, instance: InstanceSpec):
        super().__init__(config, version_dir, instance)
        if config.sequence_batching.state:
            raise BackendLoadError(
                f"unable to load model '{config.name}': the python backend cannot use implicit state "
                "(sequence_batching.state); like Triton's, it has no way to write the output state, so every "
                "request would see the initial state. Keep the state in the model (e.g. a dict keyed by the "
                "CONTROL_SEQUENCE_CORRID input) or serve the model with onnxruntime")
        self.model_file = version_dir / (config.default_model_filename or "model.py")
        if not self.model_file.is_file():
            raise BackendLoadError(f"unable to find '{self.model_file}' for model '{config.name}'; a Python "
                                   "backend model needs <version>/model.py defining class TritonPythonModel")
        self.module_name = "tritonctl_python_model_" + re.sub(r"\W", "_", f"{config.name}_{version_dir.name}_"
                                                                          f"{instance.name}")
        self.model = self._create()
        self._initialize(model_dir)

    def _create(self):
        spec = importlib.util.spec_from_file_location(self.module_name, self.model_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.module_name] = module  # dataclasses and pickling look their module up here
        try:
            with model_import_context(self.version_dir):
                spec.loader.exec_module(module)
        except BaseException as exc:  # SyntaxError, ImportError, SystemExit ... all stop the load
            sys.modules.pop(self.module_name, None)
            raise BackendLoadError(f"failed to load python model '{self.config.name}' from "
                                   f"'{self.model_file}': {describe(exc, self.model_file)}") from None
        model_class = getattr(module, "TritonPythonModel", None)
        if model_class is None:
            sys.modules.pop(self.module_name, None)
            raise BackendLoadError(f"'{self.model_file}' of model '{self.config.name}' defines no class "
                                   "TritonPythonModel")
        try:
            return model_class()
        except Exception as exc:
            sys.modules.pop(self.module_name, None)
            raise BackendLoadError(f"TritonPythonModel() of model '{self.config.name}' failed: "
                                   f"{describe(exc, self.model_file)}") from None

    def _initialize(self, model_dir: Path) -> None:
        initialize = getattr(self.model, "initialize", None)
        if initialize is None:
            return
        from tritonctl.serve.core.server import config_to_json

        args = {
            "model_config": json.dumps(config_to_json(self.config)),
            "model_instance_kind": "GPU" if self.instance.kind == "KIND_GPU" else "CPU",
            "model_instance_name": self.instance.name,
            "model_instance_device_id": str(max(self.instance.device_id, 0)),
            "model_repository": str(model_dir),
            "model_version": self.version_dir.name,
            "model_name": self.config.name,
        }
        try:
            initialize(args)
        except Exception as exc:
            sys.modules.pop(self.module_name, None)
            raise BackendLoadError(f"failed to initialize python model '{self.config.name}' instance "
                                   f"'{self.instance.name}': {describe(exc, self.model_file)}") from None

    def execute_requests(self, requests: list) -> list:
        pb_requests = [self._pb_request(r) for r in requests]
        try:
            responses = self.model.execute(pb_requests)
        except Exception as exc:
            raise internal(f"Failed to process the request(s) for model instance '{self.instance.name}', "
                           f"message: {describe(exc, self.model_file)}") from None
        if not isinstance(responses, (list, tuple)) or len(responses) != len(requests):
            got = len(responses) if isinstance(responses, (list, tuple)) else type(responses).__name__
            raise internal(f"python model '{self.config.name}' returned {got} responses from execute() for "
                           f"{len(requests)} requests; it must return a list with one InferenceResponse per "
                           "request, in order")
        return [self._result(response) for response in responses]

    def _pb_request(self, request) -> pb_utils.InferenceRequest:
        requested = request.requested_outputs
        names = [o.name for o in requested] if requested is not None else [t.name for t in self.config.output]
        return pb_utils.InferenceRequest(
            self.config.name, [pb_utils.Tensor(t.name, t.data) for t in request.inputs.values()], names,
            request.id, request.sequence_id,
            (pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START if request.sequence_start else 0)
            | (pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END if request.sequence_end else 0),
            {k: v for k, v in request.parameters.items() if not k.startswith("binary_data")},
            int(self.version_dir.name))

    def _result(self, response) -> dict[str, np.ndarray] | ServeError:
        if not isinstance(response, pb_utils.InferenceResponse):
            return internal(f"python model '{self.config.name}' returned {type(response).__name__} instead of "
                            "a pb_utils.InferenceResponse")
        error = response.error()
        if error is not None:
            return ServeError(ERROR_STATUS.get(error.code(), Status.INTERNAL), error.message())
        produced: dict[str, np.ndarray] = {}
        for tensor in response.output_tensors():
            if not isinstance(tensor, pb_utils.Tensor):
                return internal(f"python model '{self.config.name}' put a {type(tensor).__name__} among a "
                                "response's output tensors; use pb_utils.Tensor(name, numpy_array)")
            produced[tensor.name()] = tensor.as_numpy()
        return produced

    def close(self) -> None:
        finalize = getattr(self.model, "finalize", None)
        if finalize is not None:
            try:
                finalize()
            except Exception as exc:
                log.error("finalize() of python model '%s' instance '%s' failed: %s", self.config.name,
                          self.instance.name, describe(exc, self.model_file))
        self.model = None
        sys.modules.pop(self.module_name, None)
