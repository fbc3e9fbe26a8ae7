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


class Backend(abc.ABC):
    """One instance of one model version. ``execute`` runs in that instance's worker thread."""

    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        self.config = config
        self.version_dir = version_dir
        self.instance = instance

    @abc.abstractmethod
    def execute(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        """Run one (batched) execution; ``outputs`` names the outputs wanted."""

    def close(self) -> None:
        """Release the instance's resources."""


class ModelExecutionError(ServeError):
    """The model itself failed while executing (reported as INTERNAL, failure reason BACKEND)."""

    def __init__(self, message: str):
        super().__init__(Status.INTERNAL, message)


def create_backend(config, model_dir: Path, version_dir: Path, instance: InstanceSpec) -> Backend:
    backend = config.backend
    if backend == "onnxruntime":
        from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(config, version_dir, instance)
    raise BackendLoadError(f"unable to find backend library for backend '{backend}'; tritonctl serve runs "
                           "'onnxruntime' models")
