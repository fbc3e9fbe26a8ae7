"""How a Python-backend model's ``model.py`` is imported, as Triton's stub imports it: as the module
``<package>.model`` of a package whose path is the version directory (Triton's package is the
version, ``1.model``), with the version directory and the model directory on ``sys.path``. So a
model finds its own files both ways, ``import helper`` and ``from . import helper``.

Standard library only: the stub process, which may run another Python that has nothing of
tritonctl installed, loads this file by its path.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def model_search_paths(model_file: Path) -> list[str]:
    """The directories a model imports its own files from: its version directory, then its model
    directory (Triton's stub puts both on sys.path)."""
    return [str(model_file.parent), str(model_file.parent.parent)]


def import_model_file(package: str, model_file: Path, module_globals: dict | None = None) -> types.ModuleType:
    """Run ``model_file`` as the module ``<package>.<file stem>``, with ``module_globals`` set first.
    The package and the module are registered in sys.modules (where relative imports, dataclasses
    and pickling look them up); ``forget_model_modules(package)`` drops them. Raises whatever the
    file raises."""
    parent = types.ModuleType(package)
    parent.__path__ = [str(model_file.parent)]
    sys.modules[package] = parent
    name = f"{package}.{model_file.stem}"
    spec = importlib.util.spec_from_file_location(name, model_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    module.__dict__.update(module_globals or {})
    spec.loader.exec_module(module)
    return module


def forget_model_modules(package: str) -> None:
    """Drop a model's package and every module imported into it from sys.modules."""
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
        del sys.modules[name]
