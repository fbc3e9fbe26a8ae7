"""TensorRT backend: a serialized engine (``model.plan``) per instance, on the instance's GPU, run
through Polygraphy's ``TrtRunner`` (its own execution context and CUDA stream per instance, input
shapes set for each batch, shape-tensor inputs read from host memory, outputs copied back).

The instance uses the optimization profile the instance group names (``profile: ["1"]``), else
profile 0, as Triton's TensorRT backend does. A batch whose shapes fall outside that profile is
refused with the profile's bounds. Without the ``tensorrt`` extra, a GPU or a readable engine, the
model fails to load with the reason, and every other model of the repository serves."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from tritonctl.optional import MissingDependency, require
from tritonctl.serve.core.backend_api import Backend, BackendLoadError, InstanceSpec
from tritonctl.serve.core.errors import ServeError, Status


def _require(module: str, model: str):
    try:
        return require(module, f"model '{model}' (TensorRT backend)")
    except MissingDependency as exc:
        raise BackendLoadError(f"unable to load model '{model}': {exc}") from None
    except Exception as exc:  # a broken install: its shared libraries fail to load
        raise BackendLoadError(f"unable to load model '{model}': {module} failed to import ({exc})") from None


def gpu_count(model: str) -> tuple[int, str | None]:
    """How many CUDA devices this process sees, and why none when there are none."""
    runtime = _require("cuda.bindings.runtime", model)
    try:
        error, count = runtime.cudaGetDeviceCount()
    except Exception as exc:  # no CUDA runtime library
        return 0, f"CUDA is not usable here ({exc})"
    if error != runtime.cudaError_t.cudaSuccess:
        return 0, f"CUDA reports {runtime.cudaGetErrorString(error)[1].decode()}"
    return count, None if count else "no CUDA device is present"


def set_device(device_id: int, model: str) -> None:
    """Make ``device_id`` the calling thread's CUDA device (device 0 is every thread's default)."""
    if device_id <= 0:
        return
    runtime = _require("cuda.bindings.runtime", model)
    (error,) = runtime.cudaSetDevice(device_id)
    if error != runtime.cudaError_t.cudaSuccess:
        raise BackendLoadError(f"unable to use GPU {device_id} for model '{model}': "
                               f"{runtime.cudaGetErrorString(error)[1].decode()}")


class TensorRTBackend(Backend):
    def __init__(self, config, version_dir: Path, instance: InstanceSpec):
        super().__init__(config, version_dir, instance)
        name = config.name
        path = version_dir / (config.default_model_filename or "model.plan")
        if not path.is_file():
            raise BackendLoadError(f"unable to find '{path}' for model instance '{name}'")
        trt = _require("tensorrt", name)
        _require("polygraphy", name)
        count, why = gpu_count(name)
        if not count:
            raise BackendLoadError(f"unable to load model '{name}': a TensorRT engine needs a GPU, and {why}")
        if instance.kind not in ("KIND_GPU", "KIND_MODEL"):
            raise BackendLoadError(f"instance group '{instance.name}' of model '{name}' has kind {instance.kind}: "
                                   "a TensorRT engine runs on a GPU only; use KIND_GPU")
        self.device_id = max(instance.device_id, 0)
        if self.device_id >= count:
            raise BackendLoadError(f"instance group '{instance.name}' of model '{name}' asks for GPU "
                                   f"{self.device_id}, but {count} GPU(s) are present")
        set_device(self.device_id, name)
        from polygraphy.backend.trt import TrtRunner, engine_from_bytes

        try:
            engine = engine_from_bytes(path.read_bytes())
        except Exception as exc:
            raise BackendLoadError(f"unable to load model '{name}': TensorRT could not deserialize '{path.name}' "
                                   f"({exc}); engines only run with the TensorRT version and GPU kind that built "
                                   "them") from None
        if engine is None:
            raise BackendLoadError(f"unable to load model '{name}': TensorRT could not deserialize '{path.name}'; "
                                   "engines only run with the TensorRT version and GPU kind that built them")
        self.profile = self._profile(config, instance, engine.num_optimization_profiles)
        self.io = {engine.get_tensor_name(i): engine.get_tensor_mode(engine.get_tensor_name(i))
                   for i in range(engine.num_io_tensors)}
        self.engine_inputs = [n for n, mode in self.io.items() if mode == trt.TensorIOMode.INPUT]
        self._check_io(config)
        self.runner = TrtRunner(engine, optimization_profile=self.profile)
        self.runner.activate()
        self._lock = threading.Lock()  # one execution context: one batch at a time

    @staticmethod
    def _profile(config, instance: InstanceSpec, available: int) -> int:
        group = next((g for g in config.instance_group if instance.name.startswith(g.name)), None)
        names = list(group.profile) if group is not None else []
        if not names:
            return 0
        try:
            index = int(names[0])
        except ValueError:
            raise BackendLoadError(f"instance group '{instance.name}' of model '{config.name}': profile "
                                   f"'{names[0]}' is not a profile index") from None
        if not 0 <= index < available:
            raise BackendLoadError(f"instance group '{instance.name}' of model '{config.name}' asks for "
                                   f"optimization profile {index}, but the engine has {available}")
        return index

    def _check_io(self, config) -> None:
        """Every config input and output must be an engine tensor of that direction (Triton's check)."""
        for tensors, wanted in ((config.input, "input"), (config.output, "output")):
            for tensor in tensors:
                mode = self.io.get(tensor.name)
                if mode is None or str(mode).rsplit(".", 1)[-1].lower() != wanted:
                    have = ", ".join(f"'{n}'" for n, m in self.io.items() if str(m).rsplit(".", 1)[-1].lower() == wanted)
                    raise BackendLoadError(f"unable to load model '{config.name}': {wanted} '{tensor.name}' is not an "
                                           f"{wanted} of the engine (its {wanted}s: {have or 'none'})")

    def execute(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        from polygraphy.exception import PolygraphyException

        feed = {name: np.ascontiguousarray(inputs[name]) for name in self.engine_inputs if name in inputs}
        with self._lock:
            set_device(self.device_id, self.config.name)
            try:
                result = self.runner.infer(feed, check_inputs=True)
            except PolygraphyException as exc:
                # Shapes outside the profile (or a missing shape-tensor value) are the request's fault.
                raise ServeError(Status.INVALID_ARGUMENT, f"model '{self.config.name}' (optimization profile "
                                 f"{self.profile}): {exc}") from None
        return {name: np.asarray(result[name]) for name in outputs}

    def close(self) -> None:
        runner = getattr(self, "runner", None)
        if runner is not None and runner.is_active:
            runner.deactivate()
