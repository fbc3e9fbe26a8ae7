"""The process that runs a Python model's ``auto_complete_config``, as Triton's Python-backend stub
does at load: ``import triton_python_backend_utils as pb_utils`` works, ``model.py`` is imported
as in Triton (``python_model_import``), ``TritonPythonModel.auto_complete_config`` (when the
class has one) is called with ``pb_utils.ModelConfig`` and must return one.

Run by ``python_autocomplete.run_auto_complete`` as ``python -m`` this module: the request (JSON)
comes on standard input, the answer (one JSON object) goes to the original standard output;
whatever the model prints goes to standard error.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types
from pathlib import Path

from tritonctl.repo_schema.python_model_import import import_model_file, model_search_paths

PB_UTILS_NAME = "triton_python_backend_utils"


class NotProvided(AttributeError):
    """A pb_utils name that only a running server has (tensors, requests, BLS, metrics...)."""


def pb_utils_module() -> types.ModuleType:
    from tritonctl.repo_schema import pb_config

    module = types.ModuleType(PB_UTILS_NAME)
    for name in ("ModelConfig", "TritonError", "TritonModelException", "get_input_config_by_name",
                 "get_output_config_by_name", "using_decoupled_model_transaction_policy"):
        setattr(module, name, getattr(pb_config, name))

    def missing(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotProvided(f"pb_utils.{name}")

    module.__getattr__ = missing
    return module


def _where(exc: BaseException, model_file: Path) -> dict:
    """The innermost frame of the model's own directory: file, line and function."""
    root = model_file.resolve().parent
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve().parent == root]
    if not frames:
        return {}
    frame = frames[-1]
    return {"file": frame.filename, "line": frame.lineno, "function": frame.name}


def _failure(exc: BaseException, model_file: Path, stage: str) -> dict:
    if isinstance(exc, NotProvided):
        return {"status": "unavailable", "reason": f"it uses {exc}, which exists only in a running server",
                **_where(exc, model_file)}
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return {"status": "unavailable", "reason": f"it imports '{exc.name}', which is not installed here",
                "module": exc.name, **_where(exc, model_file)}
    return {"status": "error", "stage": stage, "error": f"{type(exc).__name__}: {exc}", **_where(exc, model_file)}


def evaluate(request: dict) -> dict:
    """Import the model and run its ``auto_complete_config``; the outcome as a JSON-ready dict."""
    model_file = Path(request["model_file"])
    pb_utils = pb_utils_module()
    sys.modules[PB_UTILS_NAME] = pb_utils
    sys.path[0:0] = model_search_paths(model_file)
    try:
        module = sys.modules["model"] = import_model_file(model_file.parent.name, model_file)
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: the model's import fails either way
        return _failure(exc, model_file, "import")
    model_class = getattr(module, "TritonPythonModel", None)
    if model_class is None:
        return {"status": "no_hook"}
    config = pb_utils.ModelConfig(request["config"])
    if hasattr(model_class, "auto_complete_config"):
        try:
            config = model_class.auto_complete_config(config)
        except BaseException as exc:  # noqa: BLE001
            return _failure(exc, model_file, "call")
    else:
        return {"status": "no_hook"}
    if not isinstance(config, pb_utils.ModelConfig):
        return {"status": "error", "stage": "return",
                "error": f"auto_complete_config function in model '{request['name']}' must return a valid "
                         "pb.ModelConfig object."}
    try:
        completed = json.dumps(config._model_config)
    except (TypeError, ValueError) as exc:
        return {"status": "error", "stage": "return", "error": f"{type(exc).__name__}: {exc}"}
    return {"status": "completed", "config": completed}


def main() -> None:
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the model's prints go to standard error
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    result = evaluate(request)
    answer.write(json.dumps(result))
    answer.flush()
    os._exit(0)  # skip interpreter teardown: threads or atexit hooks the model left must not hang it


if __name__ == "__main__":
    main()
