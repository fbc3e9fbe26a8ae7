"""The backend API, owned by the core: what a backend implements (``ModelInstance`` and its two
kinds), what it gets at load (``LoadRequest``, with the ``ServerHandle`` for requests of its own),
and the registry through which the runtime plugs backends in. The core reaches backends only
through this module, so a new backend registers itself without touching the core."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tritonctl.serve.core.custom_metrics import CustomMetrics
from tritonctl.serve.core.errors import ServeError, Status


class BackendLoadError(Exception):
    """A model instance that cannot be created; the model becomes UNAVAILABLE with this reason."""


@dataclass(frozen=True)
class InstanceSpec:
    """One model instance: its name, kind (``KIND_CPU`` / ``KIND_GPU``) and device."""

    name: str
    kind: str
    device_id: int = -1


class ServerHandle:
    """The server that serves a manager's models, for a backend whose models send requests of
    their own (Python BLS) or metrics of their own. ``server`` is the ``core.server.InferenceServer``
    once one runs over the manager, None before (and for a manager used on its own)."""

    __slots__ = ("server", "metrics")

    def __init__(self):
        self.server = None
        self.metrics = CustomMetrics()  # the metrics models define (pb_utils.MetricFamily)


@dataclass(frozen=True)
class LoadRequest:
    """Everything a backend is given to create one instance of one model version."""

    config: object  # the model's ModelConfig
    model_dir: Path
    version_dir: Path
    instance: InstanceSpec
    host: ServerHandle


class ModelInstance:
    """One instance of one model version; its methods run in that instance's worker thread."""

    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        self.config = config
        self.version_dir = version_dir
        self.instance = instance

    def close(self) -> None:
        """Release the instance's resources."""

    def ready(self) -> bool:
        """Whether the instance can still execute; one that cannot (a Python model's stub process
        that died) makes its model report not ready."""
        return True

    def readiness(self) -> str | None:
        """Why the instance is not ready (None: ready), for a client asking whether its model is:
        ``ready()``, and whatever else the backend checks (a Python model's own ``is_ready()``,
        which may take seconds: called off the event loop)."""
        return None if self.ready() else f"instance '{self.instance.name}' cannot execute"

    def text_inputs(self) -> frozenset[str]:
        """The inputs whose BYTES elements this backend needs as UTF-8 text (an onnxruntime string
        tensor): each request's are checked before it is queued, so a client's bytes that are not
        text are its own 400, never a failed batch."""
        return frozenset()


class Backend(ModelInstance, abc.ABC):
    """A backend that runs a batch as one execution over the requests' concatenated inputs."""

    @abc.abstractmethod
    def execute(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        """Run one (batched) execution; ``outputs`` names the outputs wanted."""


class RequestBackend(ModelInstance, abc.ABC):
    """A backend that receives the batch as separate requests (Triton's Python backend)."""

    @abc.abstractmethod
    def execute_requests(self, requests: list, deliver) -> list | None:
        """One result per request of ``requests`` (InferRequest objects): its outputs by name, the
        ServeError that request fails with, or None when the model answers it itself through
        ``deliver`` (``core.responder.Responder.deliver``). None instead of the list for a
        decoupled model, which answers every request through ``deliver``. Raises ServeError when
        the whole batch fails, AnsweredFailure when it failed after every request was answered
        through ``deliver`` (a decoupled model's execute() raised)."""


class AnsweredFailure(Exception):
    """A batch's execution failed, and the backend has answered each of its requests with the
    error already: the execution counts, as in Triton, but no request's compute time does."""


class ModelExecutionError(ServeError):
    """The model itself failed while executing (reported as INTERNAL, failure reason BACKEND)."""

    def __init__(self, message: str):
        super().__init__(Status.INTERNAL, message)


# (config, model directory) -> the config completed by the backend; raises BackendLoadError
CompleteConfig = Callable[[object, Path], object]


@dataclass(frozen=True)
class BackendType:
    """A backend as registered: ``create`` makes an instance; ``complete_config``, where the
    backend completes a model's config itself (Triton's backend auto-complete), runs once per
    load before any instance exists."""

    name: str
    create: Callable[[LoadRequest], ModelInstance]
    complete_config: CompleteConfig | None = None


class BackendRegistry:
    """The backends a server runs, by the config's ``backend`` name; ``find`` looks up a name not
    registered (Python-based backends: a ``model.py`` in a backend directory), each time asked."""

    def __init__(self, types: list[BackendType] | None = None,
                 find: Callable[[str], BackendType | None] | None = None, not_found_hint: str = ""):
        self._types: dict[str, BackendType] = {}
        self._find = find
        self._not_found_hint = not_found_hint
        for backend_type in types or ():
            self.register(backend_type)

    def register(self, backend_type: BackendType) -> None:
        self._types[backend_type.name] = backend_type

    def names(self) -> list[str]:
        return list(self._types)

    def complete_config(self, config, model_dir: Path):
        """``config`` as its backend completes it (``config`` itself for a backend without the hook
        or one not registered, which loading then reports). Raises BackendLoadError."""
        backend_type = self._lookup(config.backend)
        if backend_type is None or backend_type.complete_config is None:
            return config
        return backend_type.complete_config(config, model_dir)

    def create(self, load: LoadRequest) -> ModelInstance:
        backend_type = self._lookup(load.config.backend)
        if backend_type is None:
            names = [f"'{name}'" for name in self._types]
            runs = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names) or "no"
            raise BackendLoadError(f"unable to find backend library for backend '{load.config.backend}'; "
                                   f"tritonctl serve runs {runs} models{self._not_found_hint}")
        return backend_type.create(load)

    def _lookup(self, name: str) -> BackendType | None:
        backend_type = self._types.get(name)
        if backend_type is None and self._find is not None:
            backend_type = self._find(name)
        return backend_type
