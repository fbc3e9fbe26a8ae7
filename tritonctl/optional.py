"""Which install provides each third-party library tritonctl imports, and the one error for a
missing one.

Libraries are imported where they are used, so a command only needs what it runs. When one is
missing, ``require`` raises ``MissingDependency``, an ImportError whose message is one line:
what needs it, the package, and the pip command that installs it. The CLI prints that line, and
turns any other ``ModuleNotFoundError`` for a module listed here into the same message.

``pip install tritonctl`` gives every command on CPU (validate, generate, build from ONNX,
serve, perf, analyze); the extras add PyTorch sources (``torch``), TensorRT plans
(``tensorrt``), onnxruntime's CUDA provider with CUDA shared memory (``gpu``), the checks of
KServe manifests against KServe's schema (``export``), and ``analyze --ray`` (``ray``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Provider:
    package: str  # the distribution on PyPI, as pyproject.toml names it
    extra: str | None = None  # tritonctl's extra that installs it; None: a dependency of tritonctl itself

    @property
    def install(self) -> str:
        return f"pip install 'tritonctl[{self.extra}]'" if self.extra else f"pip install {self.package}"


# Top-level (or dotted) module -> what installs it; tests/unit/test_optional.py keeps this and
# pyproject.toml in step.
PROVIDERS: dict[str, Provider] = {
    "typer": Provider("typer"),
    "rich": Provider("rich"),
    "google.protobuf": Provider("protobuf"),
    "numpy": Provider("numpy"),
    "ml_dtypes": Provider("ml-dtypes"),
    "onnx": Provider("onnx"),
    "tritonclient": Provider("tritonclient"),
    "grpc": Provider("grpcio"),
    "onnxruntime": Provider("onnxruntime"),
    "uvicorn": Provider("uvicorn"),
    "httptools": Provider("httptools"),
    "orjson": Provider("orjson"),
    "uvloop": Provider("uvloop"),
    "re2": Provider("google-re2"),
    "pandas": Provider("pandas"),
    "pyarrow": Provider("pyarrow"),
    "plotly": Provider("plotly"),
    "jinja2": Provider("jinja2"),
    "torch": Provider("torch", "torch"),
    "onnxscript": Provider("onnxscript", "torch"),
    "tensorrt": Provider("tensorrt", "tensorrt"),
    "polygraphy": Provider("polygraphy", "tensorrt"),
    "cuda": Provider("cuda-python", "gpu"),
    "yaml": Provider("pyyaml", "export"),
    "kserve": Provider("kserve", "export"),
    "kubernetes": Provider("kubernetes", "export"),
    "ray": Provider("ray", "ray"),
}
# onnxruntime's CUDA build: the same `onnxruntime` module as the base install's CPU build.
ONNXRUNTIME_GPU = Provider("onnxruntime-gpu", "gpu")


class MissingDependency(ImportError):
    """A library a command needs is not installed; the message says how to install it."""

    def __init__(self, needed_by: str, module: str, provider: Provider):
        super().__init__(f"{needed_by} needs {provider.package}: {provider.install}", name=module)
        self.provider = provider


def provider_of(module: str) -> Provider | None:
    """What installs ``module`` (or the package it belongs to), if tritonctl knows."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        provider = PROVIDERS.get(".".join(parts[:end]))
        if provider is not None:
            return provider
    return None


def missing_dependency(exc: ImportError, needed_by: str) -> MissingDependency | None:
    """``exc`` as the one-line error, when it says that a module listed here is not installed."""
    if isinstance(exc, MissingDependency):
        return exc
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    provider = provider_of(exc.name)
    return MissingDependency(needed_by, exc.name, provider) if provider is not None else None


def require(module: str, needed_by: str) -> ModuleType:
    """``import module``, or MissingDependency naming what ``needed_by`` (e.g. "building from a
    PyTorch source") must install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = missing_dependency(exc, needed_by)
        if missing is None:
            raise
        raise missing from None


def import_error(module: str) -> Exception | None:
    """None when ``module`` imports here; else what importing it raised: a ModuleNotFoundError
    when it is not installed (``provider_of`` names the install), anything else when an install
    is broken (its own libraries fail to load). For code that goes on without an optional
    library, where ``require`` is for code that cannot."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - a broken install raises OSError/RuntimeError from its libraries
        return exc
    return None


def unavailable(module: str) -> str | None:
    """None when ``module`` imports here; else one line saying why not, with the install."""
    error = import_error(module)
    if error is None:
        return None
    provider = provider_of(module)
    package = provider.package if provider else module
    if isinstance(error, ModuleNotFoundError):
        install = f" ({provider.install})" if provider else ""
        return f"the '{package}' Python package is not installed{install}"
    return f"the '{package}' package failed to import ({error})"


def installed(package: str) -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution(package)
    except PackageNotFoundError:
        return False
    return True


def onnxruntime_conflict() -> str | None:
    """onnxruntime and onnxruntime-gpu install the same ``onnxruntime`` module: with both
    installed, whichever was installed last owns it, and the CUDA provider may be gone."""
    if not (installed("onnxruntime") and installed("onnxruntime-gpu")):
        return None
    return ("both onnxruntime and onnxruntime-gpu are installed, and they share the 'onnxruntime' module, so the "
            "CUDA execution provider may be missing; keep only the GPU one: pip uninstall -y onnxruntime && "
            "pip install --force-reinstall --no-deps onnxruntime-gpu")
