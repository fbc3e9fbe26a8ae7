"""Triton's Python backend, in process: each instance loads ``<model>/<version>/model.py`` (or
``default_model_filename``) as its own module, creates its ``TritonPythonModel``, calls
``initialize(args)`` once, ``execute(requests)`` per batch and ``finalize()`` on unload.

While ``model.py`` is imported, ``import triton_python_backend_utils`` resolves to
``tritonctl.serve.backends.pb_utils``, and the model finds the files beside it as in Triton
(``import helper``, ``from . import helper``: ``python_model_import``). ``import model`` gives a model's code its
own module and ``sys.argv`` reads ``['']`` to it, as in Triton's stub (``own_module``). The names
NumPy 2.0 removed that models written for Triton's numpy 1.x stub use are put back (``numpy_compat``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import re
import sys
import threading
import time
import weakref
from pathlib import Path

import numpy as np

from tritonctl.serve.backends import bls, bls_deadlock, own_module, pb_utils
from tritonctl.serve.backends.numpy_compat import restore_numpy1_names
from tritonctl.repo_schema.python_model_import import forget_model_modules, import_model_file, model_search_paths
from tritonctl.serve.stub.errors import describe, execute_failure
from tritonctl.serve.stub.readiness import ReadinessCheck, has_is_ready, run_is_ready
from tritonctl.serve.core.backend_api import (AnsweredFailure, BackendLoadError, InstanceSpec, RequestBackend,
                                              ServerHandle)
from tritonctl.serve.core.custom_metrics import MetricUser
from tritonctl.serve.backends.decoupled import BatchSenders, ModelEventLoop
from tritonctl.serve.core.errors import ServeError, Status, internal
from tritonctl.serve.core.responder import ErrorResponse
from tritonctl.serve.core.types import ModelOutputs

log = logging.getLogger("tritonctl.serve")

PB_UTILS_NAME = "triton_python_backend_utils"
C_PB_UTILS = pb_utils.c_python_backend_utils()


def _model_metrics() -> MetricUser:
    """The metrics of the model instance whose code makes a pb_utils.MetricFamily here."""
    return bls.current_caller("a custom metric (pb_utils.MetricFamily)").backend.metrics_user


def _model_control() -> bls.ModelControl:
    """The model loading API for the model instance whose code calls it here."""
    return bls.ModelControl(bls.current_caller("the model loading API (pb_utils.load_model)").backend)


def _model_dir() -> str:
    """The version directory of the model instance whose code asks (pb_utils.get_model_dir)."""
    return str(bls.current_caller("pb_utils.get_model_dir()").backend.version_dir)


pb_utils.metrics_of_model = _model_metrics
pb_utils.model_control_of_model = _model_control
pb_utils.model_dir_of_model = _model_dir


@contextlib.contextmanager
def model_import_context(model_file: Path, package: str):
    """pb_utils importable under Triton's names (``triton_python_backend_utils`` and
    ``c_python_backend_utils``) and the model's directories on sys.path, only
    meanwhile. Modules the model imports from its own directories by their top-level names are
    dropped afterwards, so two models (or a reload) with a ``helper.py`` each get their own; those
    of its package (``from . import helper``) go with the package (``forget_model_modules``)."""
    restore_numpy1_names()  # models written for Triton's numpy 1.x stub (numpy_compat)
    previous = {name: sys.modules.get(name) for name in (PB_UTILS_NAME, pb_utils.C_MODULE_NAME)}
    before = set(sys.modules)
    sys.modules[PB_UTILS_NAME] = pb_utils
    sys.modules[pb_utils.C_MODULE_NAME] = C_PB_UTILS
    search_paths = model_search_paths(model_file)
    sys.path[0:0] = search_paths
    try:
        yield
    finally:
        for path in search_paths:
            with contextlib.suppress(ValueError):
                sys.path.remove(path)
        for name, module in previous.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        root = str(model_file.parent.parent.resolve())
        for name in set(sys.modules) - before:
            if name == package or name.startswith(package + "."):
                continue
            location = getattr(sys.modules[name], "__file__", None) or ""
            if location and str(Path(location).resolve()).startswith(root):
                del sys.modules[name]


def exec_model_file(package: str, model_file: Path, module_globals: dict | None = None):
    """Run ``model_file`` as the module ``<package>.model`` (``python_model_import``). Raises
    whatever the file raises, with the package forgotten."""
    try:
        with model_import_context(model_file, package):
            return import_model_file(package, model_file, module_globals)
    except BaseException:
        forget_model_modules(package)
        raise


class PythonBackend(RequestBackend):
    def __init__(self, config, model_dir: Path, version_dir: Path, instance: InstanceSpec,
                 host: ServerHandle | None = None, model_file: Path | None = None):
        """``model_file``: the ``model.py`` of a Python-based backend; else the version's own."""
        super().__init__(config, version_dir, instance)
        self.host = host if host is not None else ServerHandle()  # the server BLS requests go to
        if config.sequence_batching.state:
            raise BackendLoadError(
                f"unable to load model '{config.name}': the python backend cannot use implicit state "
                "(sequence_batching.state); like Triton's, it has no way to write the output state, so every "
                "request would see the initial state. Keep the state in the model (e.g. a dict keyed by the "
                "CONTROL_SEQUENCE_CORRID input) or serve the model with onnxruntime")
        self.model_file = model_file or version_dir / (config.default_model_filename or "model.py")
        if not self.model_file.is_file():
            raise BackendLoadError(f"unable to find '{self.model_file}' for model '{config.name}'; a Python "
                                   "backend model needs <version>/model.py defining class TritonPythonModel")
        self.package = "tritonctl_python_model_" + re.sub(r"\W", "_", f"{config.name}_{version_dir.name}_"
                                                                          f"{instance.name}")
        self.decoupled: bool = config.model_transaction_policy.decoupled
        self.version = int(version_dir.name)
        self._event_loop: ModelEventLoop | None = None  # started by the first ``async def execute``
        self._caller = bls.Caller(self, holds_instance=True)  # who runs BLS requests during execute()
        self.bls_ready = False  # set by the first BLS request, once this instance is found serving
        self.metrics_user = MetricUser(self.host.metrics)  # the metric families the model makes
        own_module.install()  # `import model` and sys.argv as in Triton's stub
        self.model = self._create()
        self._initialize(model_dir)
        self._user_readiness = ReadinessCheck(self._start_is_ready) if self._has_is_ready() else None

    def _create(self):
        try:
            # the instance global finds the caller of BLS in the model's threads
            module = exec_model_file(self.package, self.model_file, {bls.INSTANCE_GLOBAL: weakref.ref(self)})
        except BaseException as exc:  # SyntaxError, ImportError, SystemExit ... all stop the load
            raise BackendLoadError(f"failed to load python model '{self.config.name}' from "
                                   f"'{self.model_file}': {describe(exc, self.model_file)}") from None
        model_class = getattr(module, "TritonPythonModel", None)
        if model_class is None:
            forget_model_modules(self.package)
            raise BackendLoadError(f"'{self.model_file}' of model '{self.config.name}' defines no class "
                                   "TritonPythonModel")
        try:
            return model_class()
        except Exception as exc:
            forget_model_modules(self.package)
            raise BackendLoadError(f"TritonPythonModel() of model '{self.config.name}' failed: "
                                   f"{describe(exc, self.model_file)}") from None

    def _initialize(self, model_dir: Path) -> None:
        initialize = getattr(self.model, "initialize", None)
        if initialize is None:
            return
        try:
            initialize(self._initialize_args(model_dir))
        except Exception as exc:
            forget_model_modules(self.package)
            self.metrics_user.close()
            raise BackendLoadError(f"failed to initialize python model '{self.config.name}' instance "
                                   f"'{self.instance.name}': {describe(exc, self.model_file)}") from None

    # ---- readiness: the model's own is_ready() -------------------------------------------------------
    def _has_is_ready(self) -> bool:
        return has_is_ready(self.model)

    def _start_is_ready(self, done) -> None:
        """Run the model's is_ready() in a thread of its own; ``done`` gets the outcome."""
        loop = self._event_loop.loop if self._event_loop is not None else None
        threading.Thread(target=lambda: done(run_is_ready(self.model, loop)), daemon=True,
                         name=f"{self.instance.name}-is-ready").start()

    def readiness(self) -> str | None:
        reason = super().readiness()
        if reason is None and self._user_readiness is not None:
            reason = self._user_readiness.check()
        return reason

    def _initialize_args(self, model_dir: Path) -> dict:
        """The args ``initialize`` gets, as Triton's."""
        from tritonctl.repo_schema.pb_config import config_to_json

        return {
            "model_config": json.dumps(config_to_json(self.config)),
            "model_instance_kind": "GPU" if self.instance.kind == "KIND_GPU" else "CPU",
            "model_instance_name": self.instance.name,
            "model_instance_device_id": str(max(self.instance.device_id, 0)),
            "model_repository": str(model_dir),
            "model_version": self.version_dir.name,
            "model_name": self.config.name,
        }

    def execute_requests(self, requests: list, deliver) -> list | None:
        senders = BatchSenders(self.decoupled, self._result, deliver, time.monotonic_ns())
        pb_requests = [self._pb_request(r, senders, i) for i, r in enumerate(requests)]
        if self.decoupled:
            bls_deadlock.mark_started(requests)
        token = bls.CALLER.set(self._caller)
        try:
            result = self.model.execute(pb_requests)
            if inspect.iscoroutine(result):
                result = self._run_coroutine(result, pb_requests)
        except Exception as exc:
            error = self._failure(exc)
            log.error("%s", error.message)
            if not self.decoupled:
                raise error from None
            self._fail_open(pb_requests, error)
            raise AnsweredFailure(error.message) from None
        finally:
            bls.CALLER.reset(token)
        if self.decoupled:
            if result is not None:
                self._fail_open(pb_requests, self._execute_error(
                    f"Python model '{self.instance.name}' is using the decoupled mode and the execute function "
                    "must return None."))
            return None
        if result is None:  # every request is answered through its response sender (or runs again)
            return [None if index in senders.made or requests[index].reschedule else internal(
                f"python model '{self.config.name}' returned None from execute() without sending a response for "
                "this request; return a list with one InferenceResponse per request, or send one through "
                "request.get_response_sender()") for index in range(len(requests))]
        if not isinstance(result, (list, tuple)) or len(result) != len(requests):
            got = len(result) if isinstance(result, (list, tuple)) else type(result).__name__
            raise internal(f"python model '{self.config.name}' returned {got} responses from execute() for "
                           f"{len(requests)} requests; it must return a list with one InferenceResponse per "
                           "request, in order")
        answers = []
        for index, response in enumerate(result):
            sender = senders.made.get(index)
            if requests[index].reschedule and response is not None:
                requests[index].reschedule = False
                answers.append(internal("Expected a None object in the execute function return list for reschduled "
                                        "request"))  # Triton's text, as written
            elif requests[index].reschedule:
                answers.append(None)  # it runs again
            elif sender is not None and (response is None or not sender.claim_for_return()):
                answers.append(None)  # answered through its response sender (already, or later)
            else:
                answers.append(self._result(response))
        return answers

    def _failure(self, exc: Exception) -> ServeError:
        """What the requests of a batch whose execute() raised ``exc`` fail with."""
        return self._execute_error(execute_failure(exc, __file__))

    def _execute_error(self, message: str) -> ServeError:
        return internal(f"Failed to process the request(s) for model '{self.instance.name}', message: {message}")

    def _run_coroutine(self, coroutine, pb_requests: list):
        """An ``async def execute``: an ordinary model waits for it; a decoupled model's runs on
        while this instance takes its next batch (its requests are answered through senders)."""
        if self._event_loop is None:
            self._event_loop = ModelEventLoop(self.instance.name)
        caller = bls.Caller(self, holds_instance=not self.decoupled)

        async def with_caller():
            bls.CALLER.set(caller)
            return await coroutine

        if not self.decoupled:
            return self._event_loop.run(with_caller())

        def failed(exc: BaseException) -> None:
            error = self._execute_error(execute_failure(exc, __file__))
            log.error("%s", error.message)
            self._fail_open(pb_requests, error)

        self._event_loop.start(with_caller(), failed)
        return None

    @staticmethod
    def _fail_open(pb_requests: list, error: ServeError) -> None:
        """Answer ``error`` (and the final flag) to every request whose sender is still open."""
        for request in pb_requests:
            request.get_response_sender().fail(error)

    def _pb_request(self, request, senders: BatchSenders, index: int) -> pb_utils.InferenceRequest:
        requested = request.requested_outputs
        names = [o.name for o in requested] if requested is not None else [t.name for t in self.config.output]
        flags = (pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START if request.sequence_start else 0) \
            | (pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END if request.sequence_end else 0)
        return pb_utils.InferenceRequest._received(
            self.config.name, self.version,
            [pb_utils.Tensor(t.name, pb_utils.model_data(t.datatype, t.data)) for t in request.inputs.values()],
            names, request, request.sequence_id, flags,
            {k: v for k, v in request.parameters.items() if not k.startswith("binary_data")}, senders, index)

    def _result(self, response) -> dict[str, np.ndarray] | ServeError:
        if not isinstance(response, pb_utils.InferenceResponse):
            return internal(f"python model '{self.config.name}' returned {type(response).__name__} instead of "
                            "a pb_utils.InferenceResponse")
        error = response.error()
        if error is not None:
            return ErrorResponse(bls.STATUS_OF_CODE.get(error.code(), Status.INTERNAL), error.message())
        produced: dict[str, np.ndarray] = {}
        for tensor in response.output_tensors():
            if not isinstance(tensor, pb_utils.Tensor):
                return internal(f"python model '{self.config.name}' put a {type(tensor).__name__} among a "
                                "response's output tensors; use pb_utils.Tensor(name, numpy_array)")
            try:
                produced[tensor.name()] = pb_utils.server_data(tensor._host_numpy("output"))[1]
            except pb_utils.TritonModelException as exc:
                return internal(str(exc))
        parameters = response._parameter_values
        return ModelOutputs(produced, parameters) if parameters else produced

    def close(self) -> None:
        finalize = getattr(self.model, "finalize", None)
        if finalize is not None:
            try:
                finalize()
            except Exception as exc:
                log.error("finalize() of python model '%s' instance '%s' failed: %s", self.config.name,
                          self.instance.name, describe(exc, self.model_file))
        if self._event_loop is not None:
            self._event_loop.close()
        self.model = None
        forget_model_modules(self.package)
        self.metrics_user.close()
