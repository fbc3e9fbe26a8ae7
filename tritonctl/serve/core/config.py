"""The config a served model runs on: the same parse / normalize / auto-complete path as
``tritonctl validate`` and ``generate``, plus the diagnostics that stop a model from loading."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tritonctl.optional import import_error
from tritonctl.repo_schema.autocomplete import DEFAULT_MAX_BATCH_SIZE
from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, code_info
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.core.backend_api import BackendLoadError, CompleteConfig
from tritonctl.serve.core.confine import Escape, check_config

SERVE = "SERVE"  # the code of what the server itself refuses in a config (not a validator rule)


@dataclass
class LoadedConfig:
    config: object | None  # ModelConfig, None when it could not be built
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unreadable: bool = False  # the config text is no ModelConfig at all: Triton fails such a load in its poll

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    def error_text(self) -> str:
        """The errors for a client: the server's own refusals (code SERVE) as they are, the validator's
        with their code and place in the config."""
        return "; ".join(d.message if d.code == SERVE else f"{d.code} {d.location}: {d.message}" for d in self.errors)


@lru_cache(maxsize=1)
def _driver_gpus() -> tuple[int, ...]:
    from tritonctl.repo_schema.gpus import local_gpus

    return tuple(range(local_gpus().count))


@lru_cache(maxsize=1)
def _onnxruntime_has_cuda() -> bool:
    if import_error("onnxruntime") is not None:
        return False
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


@lru_cache(maxsize=1)
def _torch_has_cuda() -> bool:
    if import_error("torch") is not None:
        return False
    import torch

    return torch.cuda.is_available()


# backend -> whether its runtime here can use the driver's GPUs (asked only when there are some)
_RUNTIME_HAS_CUDA = {"onnxruntime": _onnxruntime_has_cuda, "pytorch": _torch_has_cuda}


def available_gpus(backend: str) -> tuple[int, ...]:
    """GPU ids a model of ``backend`` may use here: the devices the driver shows (nvidia-smi, within
    CUDA_VISIBLE_DEVICES). An onnxruntime model sees them only with onnxruntime's CUDA build, a
    PyTorch model only with a CUDA build of torch, so without those their KIND_AUTO instances (and
    instances of a config without instance_group) run on the CPU; a TensorRT model needs a GPU."""
    gpus = _driver_gpus()
    has_cuda = _RUNTIME_HAS_CUDA.get(backend)
    if gpus and has_cuda is not None and not has_cuda():
        return ()
    return gpus


def _error(model_dir: Path, message: str, unreadable: bool = False) -> LoadedConfig:
    return LoadedConfig(None, [Diagnostic(SERVE, Severity.ERROR, message, model_dir, model=model_dir.name)],
                        unreadable)


def load_config(model_dir: Path, config_name: str | None = None, override_json: str | None = None,
                complete: CompleteConfig | None = None, default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
                ) -> LoadedConfig:
    """The config to serve ``model_dir`` with, and everything found wrong with it.

    An ``override_json`` (the repository API's ``config`` parameter) replaces the file on disk.
    ``complete``: the backends' auto-complete hook (``BackendRegistry.complete_config``), run on
    a config without errors. ``default_max_batch_size``: the max_batch_size the onnxruntime
    backend's auto-complete gives a model that can batch (tritonserver's
    ``--backend-config=default-max-batch-size=N``).
    """
    if override_json is not None:
        loaded = _from_override(model_dir, override_json, default_max_batch_size)
    else:
        loaded = _from_disk(model_dir, config_name, default_max_batch_size)
    if complete is not None and loaded.config is not None and not loaded.errors:
        _complete(model_dir, loaded, complete)
    return loaded


def _from_disk(model_dir: Path, config_name: str | None, default_max_batch_size: int) -> LoadedConfig:
    from tritonctl.repo_schema.autocomplete import effective_config
    from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy
    from tritonctl.repo_schema.validate import default_options, validate_paths

    try:
        gpus = _driver_gpus()
        config, diagnostics = effective_config(model_dir, config_name, gpus=gpus,
                                               default_max_batch_size=default_max_batch_size)
        if config is not None and available_gpus(config.backend) != gpus:  # this backend cannot use them
            config, diagnostics = effective_config(model_dir, config_name, gpus=available_gpus(config.backend),
                                                   default_max_batch_size=default_max_batch_size)
        # The server runs a Python model's auto_complete_config itself (_complete_python).
        options = dataclasses.replace(default_options(), model_code=ModelCodePolicy(run=False))
        checked = validate_paths([model_dir], config_name, options=options).diagnostics
    except Exception as exc:  # a config the schema code cannot handle must not stop the server
        return _error(model_dir, f"cannot build the config: {exc}")
    seen = {(d.code, d.location, d.message) for d in diagnostics}
    diagnostics.extend(d for d in checked if (d.code, d.location, d.message) not in seen)
    return LoadedConfig(config, diagnostics)


def _complete(model_dir: Path, loaded: LoadedConfig, complete: CompleteConfig) -> None:
    """Let the model's backend fill in its config (e.g. a Python model's ``auto_complete_config``)."""
    from tritonctl.repo_schema.normalize import core_normalize

    try:
        completed = complete(loaded.config, model_dir)
        if completed is not loaded.config:
            loaded.config = core_normalize(completed, model_dir)
    except BackendLoadError as exc:
        loaded.diagnostics.append(_error(model_dir, str(exc)).diagnostics[0])


def _from_override(model_dir: Path, override_json: str, default_max_batch_size: int) -> LoadedConfig:
    from google.protobuf import json_format

    from tritonctl.repo_schema import autocomplete
    from tritonctl.repo_schema.normalize import core_normalize

    message = model_config_pb2().ModelConfig()
    try:
        value = json.loads(override_json)
        if not isinstance(value, dict):
            raise json_format.ParseError(f"a ModelConfig is a JSON object, got {type(value).__name__}")
        json_format.ParseDict(value, message)
    except (ValueError, json_format.ParseError) as exc:
        return _error(model_dir, f"the 'config' override is not a valid ModelConfig JSON: {exc}", unreadable=True)
    try:
        check_config(message, model_dir)  # before anything the override names is read
    except Escape as exc:
        return _error(model_dir, str(exc))
    diagnostics: list[Diagnostic] = []

    def report(code: str, message: str, hint: str | None = None) -> None:
        diagnostics.append(Diagnostic(code, code_info(code).severity, message, model_dir, None, hint, model_dir.name))

    config = core_normalize(message, model_dir)
    autocomplete.normalize_instance_groups(config, available_gpus(config.backend), report)
    if config.backend == "onnxruntime":
        autocomplete.autocomplete_onnxruntime(config, autocomplete.model_version_dir(model_dir, None), report,
                                              default_max_batch_size)
    return LoadedConfig(core_normalize(config, model_dir), diagnostics)
