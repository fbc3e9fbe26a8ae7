"""The interface every backend implements, and the registry that picks one for a model."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonctl.serve.core.errors import ServeError, Status


class BackendLoadError(Exception):
    """A model instance that cannot be created; the model becomes UNAVAILABLE with this reason."""


@dataclass(frozen=True)
class InstanceSpec:
    """One model instance: its name, kind (``KIND_CPU`` / ``KIND_GPU``) and device."""

    name: str
    kind: str
    device_id: int = -1


class ModelInstance:
    """One instance of one model version; its methods run in that instance's worker thread."""

    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        self.config = config
        self.version_dir = version_dir
        self.instance = instance

    def close(self) -> None:
        """Release the instance's resources."""


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
        the whole batch fails."""


class ModelExecutionError(ServeError):
    """The model itself failed while executing (reported as INTERNAL, failure reason BACKEND)."""

    def __init__(self, message: str):
        super().__init__(Status.INTERNAL, message)


def create_backend(config, model_dir: Path, version_dir: Path, instance: InstanceSpec) -> ModelInstance:
    backend = config.backend
    if backend == "onnxruntime":
        from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(config, version_dir, instance)
    if backend == "python":
        from tritonctl.serve.backends.python import PythonBackend

        return PythonBackend(config, model_dir, version_dir, instance)
    raise BackendLoadError(f"unable to find backend library for backend '{backend}'; tritonctl serve runs "
                           "'onnxruntime' and 'python' models")
