"""The server's layers: the core owns the backend API and imports no backend and no transport;
every scheduler provides what the ``Scheduler`` protocol states; backends plug in by registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tritonctl.serve.core as core
from tritonctl.serve.backends import registry
from tritonctl.serve.core.backend_api import (BackendLoadError, BackendRegistry, BackendType, InstanceSpec,
                                              LoadRequest, ModelInstance, ServerHandle)
from tritonctl.serve.core.ensemble import EnsembleScheduler
from tritonctl.serve.core.scheduler import DynamicBatchScheduler, Scheduler
from tritonctl.serve.core.sequence import SequenceScheduler

ABOVE_THE_CORE = ("tritonctl.serve.backends", "tritonctl.serve.grpc", "tritonctl.serve.http",
                  "tritonctl.serve.metrics", "tritonctl.serve.runtime", "tritonctl.serve.native_front_end",
                  "tritonctl.cli", "tritonctl.analyzer", "tritonctl.perf")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at module top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_core_imports_no_backend_and_no_transport():
    offending = {f"{path.name}: {name}" for path in Path(core.__file__).parent.glob("*.py")
                 for name in imported_modules(path) if name.startswith(ABOVE_THE_CORE)}
    assert offending == set()


@pytest.mark.parametrize("scheduler", [DynamicBatchScheduler, SequenceScheduler, EnsembleScheduler])
def test_every_scheduler_provides_the_protocol(scheduler):
    members = [name for name in vars(Scheduler) if not name.startswith("_")]
    assert "hold_in_order" in members
    assert [name for name in members if not hasattr(scheduler, name)] == []


class Echo(ModelInstance):
    def __init__(self, load: LoadRequest):
        super().__init__(load.config, load.version_dir, load.instance)
        self.host = load.host


def test_a_registered_backend_is_created_with_its_load_request(tmp_path):
    from tritonctl.repo_schema.schema import model_config_pb2

    config = model_config_pb2().ModelConfig(name="m", backend="echo")
    host = ServerHandle()
    backends = BackendRegistry([BackendType("echo", Echo, lambda c, _dir: type(c)(name=c.name, backend="done"))])
    instance = backends.create(LoadRequest(config, tmp_path, tmp_path / "1", InstanceSpec("m_0", "KIND_CPU"), host))
    assert isinstance(instance, Echo) and instance.host is host and instance.instance.name == "m_0"
    assert backends.complete_config(config, tmp_path).backend == "done"
    with pytest.raises(BackendLoadError, match="backend 'tensorflow'; tritonctl serve runs 'echo' models"):
        backends.create(LoadRequest(model_config_pb2().ModelConfig(name="m", backend="tensorflow"), tmp_path,
                                    tmp_path / "1", InstanceSpec("m_0", "KIND_CPU"), host))


def test_the_runtime_registers_onnxruntime_pytorch_tensorrt_and_python():
    assert registry().names() == ["onnxruntime", "pytorch", "tensorrt", "python"]
