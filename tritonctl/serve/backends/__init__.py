"""Model execution backends, each implementing the core's backend API (``core.backend_api``)
and registered by the runtime through ``registry()``."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from tritonctl.serve.core.backend_api import BackendRegistry, BackendType, LoadRequest

# Triton's default --backend-directory, where Python-based backends are found too
DEFAULT_BACKEND_DIRECTORY = Path("/opt/tritonserver/backends")


def _onnxruntime(load: LoadRequest):
    from tritonctl.serve.backends.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend(load.config, load.version_dir, load.instance)


def _pytorch(load: LoadRequest):
    from tritonctl.serve.backends.pytorch import PyTorchBackend

    return PyTorchBackend(load.config, load.version_dir, load.instance)


def _tensorrt(load: LoadRequest):
    from tritonctl.serve.backends.tensorrt import TensorRTBackend

    return TensorRTBackend(load.config, load.version_dir, load.instance)


def _python(load: LoadRequest, model_file: Path | None = None):
    from tritonctl.serve.backends.python import PythonBackend

    return PythonBackend(load.config, load.model_dir, load.version_dir, load.instance, load.host, model_file)


def _python_process(load: LoadRequest, model_file: Path | None = None):
    from tritonctl.serve.backends.python_process import ProcessPythonBackend

    return ProcessPythonBackend(load.config, load.model_dir, load.version_dir, load.instance, load.host, model_file)


def _python_complete_config(config, model_dir, model_file: Path | None = None):
    from tritonctl.serve.backends.python_autocomplete import complete_config

    return complete_config(config, model_dir, model_file)


def _python_process_complete_config(config, model_dir, model_file: Path | None = None):
    from tritonctl.serve.backends.python_autocomplete import complete_config_in_stub

    return complete_config_in_stub(config, model_dir, model_file)


PYTHON_ISOLATIONS = ("thread", "process")
PYTHON_RUNTIME = "model.py"  # Triton's kPythonFilename: what a Python-based backend runs


def _python_based(backend_directory: Path, thread: bool, name: str) -> BackendType | None:
    """Triton's Python-based backend ``name``: ``<backend directory>/<name>/model.py``, run as a
    Python model for every model whose config names the backend (their version directories hold
    what it reads: ``pb_utils.get_model_dir()``)."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        return None  # a name that is not one directory
    model_file = backend_directory / name / PYTHON_RUNTIME
    if not model_file.is_file():
        return None
    if thread:
        return BackendType(name, partial(_python, model_file=model_file),
                           partial(_python_based_complete_config, _python_complete_config, model_file))
    return BackendType(name, partial(_python_process, model_file=model_file),
                       partial(_python_based_complete_config, _python_process_complete_config, model_file))


def _python_based_complete_config(complete, model_file: Path, config, model_dir):
    """A Python-based backend's model, its config completed: as Triton, which names the file it
    runs as the model's ``runtime`` ("model.py", where the config leaves it empty) when it finds
    the backend, before the model's ``auto_complete_config`` sees the config."""
    if not config.runtime:
        config.runtime = PYTHON_RUNTIME
    return complete(config, model_dir, model_file=model_file)


def registry(python_isolation: str = "process", backend_directory: Path | None = None) -> BackendRegistry:
    """Every backend tritonctl serve runs: onnxruntime, pytorch (TorchScript, with torch installed),
    tensorrt (plans, with the tensorrt extra and a GPU), python (with its auto-complete) and the
    Python-based backends of ``backend_directory`` (Triton's default when None): each Python model
    instance in the server's process (``thread``) or in a stub process of its own (``process``)."""
    if python_isolation not in PYTHON_ISOLATIONS:
        raise ValueError(f"unknown Python isolation '{python_isolation}'; use one of {', '.join(PYTHON_ISOLATIONS)}")
    thread = python_isolation == "thread"
    python = BackendType("python", _python, _python_complete_config) if thread else \
        BackendType("python", _python_process, _python_process_complete_config)
    directory = backend_directory or DEFAULT_BACKEND_DIRECTORY
    return BackendRegistry([BackendType("onnxruntime", _onnxruntime),
                            BackendType("pytorch", _pytorch),
                            BackendType("tensorrt", _tensorrt),
                            python],
                           find=partial(_python_based, directory, thread),
                           not_found_hint=f", and Python-based backends ({directory}/<backend>/model.py)")
