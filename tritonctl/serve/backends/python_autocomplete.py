"""Triton's Python-backend auto-complete: a model whose ``TritonPythonModel`` defines the static
method ``auto_complete_config`` fills in its own config. The backend calls it once at load, before
any instance exists, with the config as loaded (``pb_utils.ModelConfig``), and serves the config
it returns."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tritonctl.repo_schema.autocomplete import model_version_dir
from tritonctl.repo_schema.python_autocomplete import may_autocomplete
from tritonctl.serve.backends import pb_utils
from tritonctl.serve.core.backend_api import BackendLoadError
from tritonctl.repo_schema.python_model_import import forget_model_modules
from tritonctl.serve.backends.python import exec_model_file
from tritonctl.serve.stub.errors import describe


def _model_file(config, model_dir: Path, model_file: Path | None) -> Path | None:
    """The model's ``model.py`` (a Python-based backend's, else its latest version's), or None."""
    if model_file is not None:
        return model_file
    version_dir = model_version_dir(model_dir, None)
    return version_dir / (config.default_model_filename or "model.py") if version_dir else None


def complete_config(config, model_dir: Path, model_file: Path | None = None):
    """``config`` as the model's ``auto_complete_config`` completes it; ``config`` itself when the
    model has none. ``model_file``: a Python-based backend's ``model.py``. Raises BackendLoadError
    with what went wrong."""
    from google.protobuf import json_format

    from tritonctl.repo_schema.pb_config import config_to_json

    model_file = _model_file(config, model_dir, model_file)
    if model_file is None or not model_file.is_file():
        return config  # loading the instances reports the missing file
    if not may_autocomplete(model_file):  # read statically: no need to run the file
        return config
    package = "tritonctl_python_autocomplete_" + re.sub(r"\W", "_", config.name)
    try:
        module = exec_model_file(package, model_file)
    except BaseException as exc:
        raise BackendLoadError(f"failed to load python model '{config.name}' from '{model_file}': "
                               f"{describe(exc, model_file)}") from None
    complete = getattr(getattr(module, "TritonPythonModel", None), "auto_complete_config", None)
    try:
        if complete is None:
            return config
        result = complete(pb_utils.ModelConfig(json.dumps(config_to_json(config))))
    except Exception as exc:
        raise BackendLoadError(f"auto_complete_config of python model '{config.name}' failed: "
                               f"{describe(exc, model_file)}") from None
    finally:
        forget_model_modules(package)  # kept while auto_complete_config runs: it may import from its package
    if not isinstance(result, pb_utils.ModelConfig):
        raise BackendLoadError(f"auto_complete_config function in model '{config.name}' must return a valid "
                               "pb.ModelConfig object")
    completed = type(config)()
    try:
        json_format.ParseDict(result.as_dict(), completed)
    except json_format.ParseError as exc:
        raise BackendLoadError(f"auto_complete_config of python model '{config.name}' returned a config that is "
                               f"not a valid ModelConfig: {exc}") from None
    return completed


def complete_config_in_stub(config, model_dir: Path, model_file: Path | None = None):
    """``complete_config`` run where the model's instances will run: in a stub process with the
    model's Python (``--python-isolation process``), so a model.py importing packages of its
    ``EXECUTION_ENV_PATH`` completes its config too."""
    from google.protobuf import json_format

    from tritonctl.repo_schema.pb_config import config_to_json
    from tritonctl.serve.backends.python_env import python_for
    from tritonctl.serve.backends.python_process import StubDied, StubProcess

    model_file = _model_file(config, model_dir, model_file)
    if model_file is None or not model_file.is_file() or not may_autocomplete(model_file):
        return config
    python, env = python_for(config, model_dir)
    stub = StubProcess(python, env, f"{config.name} (auto-complete)", lambda message: None)
    try:
        reply = stub.request({"op": "auto_complete", "model_file": str(model_file),
                              "config": json.dumps(config_to_json(config))})
    except StubDied:
        raise BackendLoadError(f"auto_complete_config of python model '{config.name}' failed: its stub process "
                               f"ended ({stub.exit_reason()})") from None
    finally:
        stub.stop(5.0)
    if reply["op"] == "complete_failed":
        if reply["stage"] == "import":
            raise BackendLoadError(f"failed to load python model '{config.name}' from '{model_file}': {reply['text']}")
        if reply["stage"] == "call":
            raise BackendLoadError(f"auto_complete_config of python model '{config.name}' failed: {reply['text']}")
        raise BackendLoadError(f"auto_complete_config function in model '{config.name}' must return a valid "
                               "pb.ModelConfig object")
    if reply["config"] is None:
        return config
    completed = type(config)()
    try:
        json_format.ParseDict(reply["config"], completed)
    except json_format.ParseError as exc:
        raise BackendLoadError(f"auto_complete_config of python model '{config.name}' returned a config that is "
                               f"not a valid ModelConfig: {exc}") from None
    return completed
