"""tritonctl.optional: the table of what installs each imported library agrees with
pyproject.toml, and a missing library becomes one line naming its install."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tritonctl.optional import (ONNXRUNTIME_GPU, PROVIDERS, MissingDependency, import_error, missing_dependency,
                                provider_of, require, unavailable)

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def _declared() -> dict[str | None, set[str]]:
    """extra (None: the base install) -> the packages it installs, tritonctl's own extras left out."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = {None: {_name(r) for r in project["dependencies"]}}
    for extra, requirements in project["optional-dependencies"].items():
        declared[extra] = {_name(r) for r in requirements if _name(r) != "tritonctl"}
    return declared


def test_every_provider_is_declared_where_it_says():
    declared = _declared()
    for module, provider in [*PROVIDERS.items(), ("onnxruntime (CUDA build)", ONNXRUNTIME_GPU)]:
        assert _name(provider.package) in declared[provider.extra], (module, provider)


def test_every_dependency_of_a_command_has_a_provider():
    declared = _declared()
    named = {_name(p.package) for p in [*PROVIDERS.values(), ONNXRUNTIME_GPU]}
    for extra in (None, "gpu", "torch", "tensorrt", "cuda", "export"):
        assert declared[extra] <= named, extra


def test_base_install_runs_every_command_on_cpu_and_heavy_parts_stay_extras():
    declared = _declared()
    for package in ("onnxruntime", "uvicorn", "httptools", "orjson", "uvloop", "pandas", "pyarrow", "plotly",
                    "jinja2"):
        assert package in declared[None]
    for package in ("torch", "tensorrt", "onnxruntime-gpu", "cuda-python"):
        assert package not in declared[None]
    assert "onnxruntime-gpu" in declared["gpu"]


def test_install_lines():
    assert PROVIDERS["orjson"].install == "pip install orjson"
    assert PROVIDERS["torch"].install == "pip install 'tritonctl[torch]'"
    assert provider_of("cuda.bindings.driver").install == "pip install 'tritonctl[gpu]'"
    assert provider_of("google.protobuf.message").package == "protobuf"
    assert provider_of("tritonctl.serve.grpc._native") is None


def test_a_missing_listed_module_becomes_one_line():
    exc = ModuleNotFoundError("No module named 'plotly'", name="plotly.graph_objects")
    missing = missing_dependency(exc, "tritonctl analyze")
    assert isinstance(missing, MissingDependency) and isinstance(missing, ImportError)
    assert str(missing) == "tritonctl analyze needs plotly: pip install plotly"
    assert missing_dependency(ModuleNotFoundError("No module named 'x'", name="somethingelse"), "t") is None
    assert missing_dependency(ImportError("cannot import name 'y' from 'numpy'", name="numpy"), "t") is None


def test_require_imports_or_names_the_extra(monkeypatch):
    import sys

    assert require("json", "a test").dumps([]) == "[]"
    monkeypatch.setitem(sys.modules, "torch", None)  # as where torch is not installed
    with pytest.raises(MissingDependency, match=r"^building from a PyTorch source needs torch: "
                                                r"pip install 'tritonctl\[torch\]'$"):
        require("torch", "building from a PyTorch source")
    with pytest.raises(ModuleNotFoundError):
        require("tritonctl_no_such_module", "a test")  # not listed: the error as Python raised it


def test_unavailable_says_missing_or_broken(monkeypatch, tmp_path):
    import sys

    assert unavailable("json") is None and import_error("json") is None
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # as where tensorrt is not installed
    assert isinstance(import_error("tensorrt"), ModuleNotFoundError)
    assert unavailable("tensorrt") == ("the 'tensorrt' Python package is not installed "
                                       "(pip install 'tritonctl[tensorrt]')")
    (tmp_path / "tritonctl_broken_lib.py").write_text("raise OSError('libfoo.so: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert isinstance(import_error("tritonctl_broken_lib"), OSError)
    assert unavailable("tritonctl_broken_lib") == ("the 'tritonctl_broken_lib' package failed to import "
                                                   "(libfoo.so: cannot open shared object file)")
