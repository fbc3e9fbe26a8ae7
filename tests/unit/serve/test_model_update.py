"""Model updates as Triton makes them. qa/L0_model_update: a reload whose config changes only the
instance groups keeps the version and its other instances, creating the added instances and
finalizing the removed ones; any other change loads the version anew. qa/L0_lifecycle: a version
that a reload leaves out stays in the repository index, UNAVAILABLE "unloaded"; a model removed
from the repository leaves it; --strict-model-config needs every model's config file."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter

import numpy as np
import pytest

from tritonctl.serve.core.backend_api import Backend, BackendRegistry, BackendType, LoadRequest
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.core.types import InferRequest, InferTensor

CONFIG = """name: "counted"
backend: "counting"
max_batch_size: {batch}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {groups} ]
"""


class Counting(Backend):
    """Echoes INPUT0; counts the instances created (initialize) and closed (finalize)."""

    counts: Counter = Counter()

    def __init__(self, load: LoadRequest):
        super().__init__(load.config, load.version_dir, load.instance)
        Counting.counts["initialize"] += 1

    def execute(self, inputs, outputs):
        return {"OUTPUT0": inputs["INPUT0"]}

    def close(self) -> None:
        Counting.counts["finalize"] += 1


def write(repo, groups: str = "{ count: 1 kind: KIND_CPU }", batch: int = 0, model: str = "") -> None:
    (repo / "counted" / "1").mkdir(parents=True, exist_ok=True)
    model_file = repo / "counted" / "1" / "model.txt"
    if not model_file.is_file() or model_file.read_text() != model:  # rewritten only when it changes
        model_file.write_text(model)
    (repo / "counted" / "config.pbtxt").write_text(CONFIG.format(batch=batch, groups=groups))


def infer(server: InferenceServer) -> np.ndarray:
    done, box = threading.Event(), {}

    def complete(response, error):
        box["response"], box["error"] = response, error
        done.set()

    data = np.ones(3, np.float32)
    server.submit(InferRequest("counted", {"INPUT0": InferTensor("INPUT0", "FP32", data)}, complete=complete))
    assert done.wait(5) and box["error"] is None
    return box["response"].outputs[0].data


@pytest.fixture
def manager(tmp_path):
    Counting.counts.clear()
    backends = BackendRegistry([BackendType("counting", Counting)])
    manager = ModelManager(tmp_path, backends, control_mode="explicit")
    yield manager
    manager.stop(5)


def counts() -> tuple[int, int]:
    return Counting.counts["initialize"], Counting.counts["finalize"]


def test_instances_are_added_and_removed_in_place(manager, tmp_path):
    write(tmp_path, "{ count: 3 kind: KIND_CPU }")
    manager.load("counted")
    version = manager.get("counted")
    write(tmp_path, "{ count: 4 kind: KIND_CPU }")
    manager.load("counted")
    assert counts() == (4, 0) and manager.get("counted") is version
    write(tmp_path, "{ count: 2 kind: KIND_CPU }")
    manager.load("counted")
    assert counts() == (4, 2) and len(version.instances) == 2
    assert list(infer(InferenceServer(manager))) == [1, 1, 1]  # the kept instances serve on
    write(tmp_path, "{ count: 2 kind: KIND_CPU }")  # the same groups rewritten: nothing to do
    manager.load("counted")
    assert counts() == (4, 2)
    assert manager.get("counted").config.instance_group[0].count == 2


def test_any_other_change_loads_the_version_anew(manager, tmp_path):
    write(tmp_path, "{ count: 2 kind: KIND_CPU }")
    manager.load("counted")
    write(tmp_path, "{ count: 3 kind: KIND_CPU }", batch=2)  # batching changed too
    manager.load("counted")
    write(tmp_path, "{ count: 3 kind: KIND_CPU }", batch=2, model="changed")  # a model file changed
    manager.load("counted")
    manager.unload("counted")
    deadline = time.monotonic() + 5  # the replaced versions are stopped in the background
    while counts() != (8, 8) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert counts() == (8, 8)


def test_a_changed_instance_setting_replaces_that_instance(manager, tmp_path):
    limited = '{ count: 1 kind: KIND_CPU rate_limiter { resources [ { name: "R1" count: %d } ] } }'
    write(tmp_path, limited % 2)
    manager.load("counted")
    write(tmp_path, limited % 8)
    manager.load("counted")
    assert counts() == (2, 1)


@pytest.mark.parametrize("strategy", ["direct { }", "oldest { max_candidate_sequences: 4 }"])
def test_a_sequence_model_gains_and_loses_instances_in_place(manager, tmp_path, strategy):
    def write_sequence(count: int) -> None:
        write(tmp_path, f"{{ count: {count} kind: KIND_CPU }}")
        config = tmp_path / "counted" / "config.pbtxt"
        config.write_text(config.read_text() + f"sequence_batching {{ {strategy} }}\n")

    write_sequence(2)
    manager.load("counted")
    write_sequence(4)
    manager.load("counted")
    write_sequence(3)
    manager.load("counted")
    assert counts() == (4, 1)
    server = InferenceServer(manager)
    for start, end in ((True, False), (False, True)):  # a sequence runs on the instances left
        done, box = threading.Event(), {}
        request = InferRequest("counted", {"INPUT0": InferTensor("INPUT0", "FP32", np.ones(2, np.float32))},
                               complete=lambda response, error: (box.update(error=error), done.set()))
        request.sequence_id, request.sequence_start, request.sequence_end = 7, start, end
        server.submit(request)
        assert done.wait(5) and box["error"] is None


def index_states(manager) -> list[tuple[str, str, str]]:
    return [(row.get("version", ""), row.get("state", ""), row.get("reason", "")) for row in manager.index()]


def test_versions_left_out_by_a_reload_stay_in_the_index_as_unloaded(manager, tmp_path):
    write(tmp_path)
    manager.load("counted")
    (tmp_path / "counted" / "2").mkdir()
    manager.load("counted")  # the default policy serves the latest version only
    deadline = time.monotonic() + 5  # version 1 drains in the background
    while index_states(manager)[0][1] == "UNLOADING" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert index_states(manager) == [("1", "UNAVAILABLE", "unloaded"), ("2", "READY", "")]
    assert manager.server_ready() and manager.failed_models() == []
    manager.unload("counted")
    assert index_states(manager) == [("1", "UNAVAILABLE", "unloaded"), ("2", "UNAVAILABLE", "unloaded")]
    manager.load("counted")
    assert index_states(manager) == [("1", "UNAVAILABLE", "unloaded"), ("2", "READY", "")]


def test_a_model_removed_from_the_repository_leaves_the_index(tmp_path):
    write(tmp_path)
    manager = ModelManager(tmp_path, BackendRegistry([BackendType("counting", Counting)]), control_mode="poll")
    manager.load_all()
    try:
        shutil.rmtree(tmp_path / "counted")
        manager.poll()
        assert manager.index() == []
    finally:
        manager.stop(5)


def test_strict_model_config_needs_the_config_file_and_completes_nothing(tmp_path):
    """tritonserver's --strict-model-config=true: a model without config.pbtxt fails to load, as
    a poll failure; no backend completes the config of the others."""
    write(tmp_path)
    (tmp_path / "bare" / "1").mkdir(parents=True)
    completed = BackendType("counting", Counting, lambda config, _dir: type(config)(name=config.name, max_batch_size=4))
    manager = ModelManager(tmp_path, BackendRegistry([completed]), auto_complete=False)
    try:
        with pytest.raises(ServeError) as caught:
            manager.load("bare")
        assert caught.value.message == (
            f"failed to load 'bare', failed to poll from model repository: failed to open text file for read "
            f"{tmp_path / 'bare' / 'config.pbtxt'}: No such file or directory")
        manager.load("counted")
        assert manager.get("counted").config.max_batch_size == 0
    finally:
        manager.stop(5)
