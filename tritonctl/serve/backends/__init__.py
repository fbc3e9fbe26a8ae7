"""Model execution backends, each implementing the core's backend API (``core.backend_api``)
and registered by the runtime through ``registry()``."""

from __future__ import annotations

from tritonctl.serve.core.backend_api import BackendRegistry, BackendType, LoadRequest


def _onnxruntime(load: LoadRequest):
    from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend(load.config, load.version_dir, load.instance)


def _pytorch(load: LoadRequest):
    from tritonctl.serve.backends.pytorch import PyTorchBackend

    return PyTorchBackend(load.config, load.version_dir, load.instance)


def _tensorrt(load: LoadRequest):
    from tritonctl.serve.backends.tensorrt import TensorRTBackend

    return TensorRTBackend(load.config, load.version_dir, load.instance)


def _python(load: LoadRequest):
    from tritonctl.serve.backends.python import PythonBackend

    return PythonBackend(load.config, load.model_dir, load.version_dir, load.instance, load.host)


def _python_complete_config(config, model_dir):
    from tritonctl.serve.backends.python_autocomplete import complete_config

    return complete_config(config, model_dir)


def registry() -> BackendRegistry:
    """Every backend tritonctl serve runs: onnxruntime, pytorch (TorchScript, with torch installed),
    tensorrt (plans, with the tensorrt extra and a GPU) and python (with its auto-complete)."""
    return BackendRegistry([BackendType("onnxruntime", _onnxruntime),
                            BackendType("pytorch", _pytorch),
                            BackendType("tensorrt", _tensorrt),
                            BackendType("python", _python, _python_complete_config)])
