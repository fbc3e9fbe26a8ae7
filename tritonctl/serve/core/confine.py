"""Every file the server opens for a model stays inside that model's directory (docs/security.md).

A model is loaded only once its directory, its config file, its version directories and every
file its config names (``default_model_filename``, ``cc_model_filenames``, output
``label_filename``, warm-up ``input_data_file``, state ``initial_state`` data files, the files a
``checksum`` repository agent hashes, a Python model's ``EXECUTION_ENV_PATH``) resolve,
symlinks followed, inside the model's directory, and the directory inside the repository. The
check runs on the config as written (the file on disk, or the load API's ``config`` override)
before anything named in it is read."""

from __future__ import annotations

import os
from pathlib import Path

from tritonctl.repo_schema.repository import config_path_for, version_dirs
from tritonctl.repo_schema.rules.parameters import MODEL_DIR_VARIABLE
from tritonctl.repo_schema.schema import model_config_pb2


ENV_PATH = "EXECUTION_ENV_PATH"


class Escape(Exception):
    """A path a model names that leaves its directory (or the model directory leaving the repository)."""


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` resolves (symlinks followed, missing parts kept) inside ``root``, resolved."""
    resolved, base = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return resolved == base or base in resolved.parents


def _relative_name(value: str, what: str, model: str) -> None:
    """A file name a config gives must be relative and plain (no '..', no NUL)."""
    if "\0" in value or os.path.isabs(value) or value.startswith(("/", "\\")) or \
            ".." in value.replace("\\", "/").split("/"):
        raise Escape(f"{what} '{value}' of model '{model}' must be a relative path inside the model directory")


def check_model_dir(repository: Path, model_dir: Path, config_name: str | None) -> None:
    """The directory, its config file and its version directories stay inside the repository."""
    name = model_dir.name
    if not inside(model_dir, repository):
        raise Escape(f"model directory '{name}' resolves outside the model repository "
                     f"({os.path.realpath(model_dir)})")
    config = config_path_for(model_dir, config_name)
    if config.exists() and not inside(config, model_dir):
        raise Escape(f"the config file of model '{name}' resolves outside its directory ({os.path.realpath(config)})")
    for version in version_dirs(model_dir):
        if not inside(version.path, model_dir):
            raise Escape(f"version directory '{version.path.name}' of model '{name}' resolves outside the model "
                         f"directory ({os.path.realpath(version.path)})")


def check_config(config, model_dir: Path) -> None:
    """Every file ``config`` (a ModelConfig as written) names stays inside ``model_dir``."""
    name = model_dir.name
    model_files = [("default_model_filename", config.default_model_filename)]
    model_files += [(f"cc_model_filenames['{key}']", value) for key, value in config.cc_model_filenames.items()]
    for what, value in model_files:
        if not value:
            continue
        _relative_name(value, what, name)
        for version in version_dirs(model_dir):
            if not inside(version.path / value, model_dir):
                raise Escape(f"{what} '{value}' of model '{name}' resolves outside the model directory")
    named = [(f"label_filename of output '{o.name}'", o.label_filename, model_dir) for o in config.output]
    named += [(f"input_data_file of warmup '{w.name}' input '{key}'", i.input_data_file, model_dir / "warmup")
              for w in config.model_warmup for key, i in w.inputs.items()]
    named += [(f"initial_state data_file of state '{s.input_name}'", i.data_file, model_dir / "initial_state")
              for s in config.sequence_batching.state for i in s.initial_state]
    named += [(f"file of checksum '{key}'", key.partition(":")[2], model_dir)
              for agent in config.model_repository_agents.agents if agent.name == "checksum"
              for key in agent.parameters]
    for what, value, base in named:
        if value:
            _relative_name(value, what, name)
            if not inside(base / value, model_dir):
                raise Escape(f"{what} '{value}' of model '{name}' resolves outside the model directory")
    if ENV_PATH in config.parameters:
        _check_env_path(config.parameters[ENV_PATH].string_value, model_dir)


def _check_env_path(value: str, model_dir: Path) -> None:
    """A Python model's EXECUTION_ENV_PATH must be ``$$TRITON_MODEL_DIRECTORY/<file>``, inside the
    model's directory (the server runs every model in its own Python environment and never
    unpacks the archive, but a path elsewhere would be another host's file to trust)."""
    name = model_dir.name
    how = f"write it as {MODEL_DIR_VARIABLE}/<archive> with the archive in the model directory"
    if not value.startswith(MODEL_DIR_VARIABLE):
        raise Escape(f"{ENV_PATH} '{value}' of model '{name}' must be inside the model directory: {how}")
    relative = value[len(MODEL_DIR_VARIABLE):].lstrip("/")
    if "\0" in relative or not inside(model_dir / relative, model_dir):
        raise Escape(f"{ENV_PATH} '{value}' of model '{name}' resolves outside the model directory: {how}")


def check_disk_config(model_dir: Path, config_name: str | None) -> None:
    """``check_config`` on the config file as written; a file that does not parse is left to the
    loader, which reports it (and then knows no file name but the defaults)."""
    from google.protobuf import text_format

    path = config_path_for(model_dir, config_name)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    config = model_config_pb2().ModelConfig()
    try:
        text_format.Parse(text, config, allow_unknown_field=True)
    except text_format.ParseError:
        return
    check_config(config, model_dir)


def check_file_override(key: str, model: str) -> None:
    """A load's ``file:<path>`` key names a file inside the model directory."""
    _relative_name(key[len("file:"):], "'file:' override", model)
    if not key[len("file:"):]:
        raise Escape(f"a 'file:' override of model '{model}' names no file")
