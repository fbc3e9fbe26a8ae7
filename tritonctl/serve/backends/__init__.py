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


def _python_process(load: LoadRequest):
    from tritonctl.serve.backends.python_process import ProcessPythonBackend

    return ProcessPythonBackend(load.config, load.model_dir, load.version_dir, load.instance, load.host)


def _python_complete_config(config, model_dir):
    from tritonctl.serve.backends.python_autocomplete import complete_config

    return complete_config(config, model_dir)


def _python_process_complete_config(config, model_dir):
    from tritonctl.serve.backends.python_autocomplete import complete_config_in_stub

    return complete_config_in_stub(config, model_dir)


PYTHON_ISOLATIONS = ("thread", "process")


def registry(python_isolation: str = "process") -> BackendRegistry:
    """Every backend tritonctl serve runs: onnxruntime, pytorch (TorchScript, with torch installed),
    tensorrt (plans, with the tensorrt extra and a GPU) and python (with its auto-complete): each
    Python model instance in the server's process (``thread``) or in a stub process of its own
    (``process``)."""
    if python_isolation not in PYTHON_ISOLATIONS:
        raise ValueError(f"unknown Python isolation '{python_isolation}'; use one of {', '.join(PYTHON_ISOLATIONS)}")
    python = BackendType("python", _python, _python_complete_config) if python_isolation == "thread" else \
        BackendType("python", _python_process, _python_process_complete_config)
    return BackendRegistry([BackendType("onnxruntime", _onnxruntime),
                            BackendType("pytorch", _pytorch),
                            BackendType("tensorrt", _tensorrt),
                            python])
