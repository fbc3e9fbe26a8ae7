"""Loading a repository into the server core: configs, diagnostics, version policies, request
checks and execution against real onnxruntime sessions."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from helpers.serve_models import loaded_server, standard_repository, write_add_sub
from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.backends import registry
from tritonctl.serve.core.manager import ModelManager
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.core.types import InferRequest, InferTensor


@pytest.fixture
def repo(tmp_path):
    return standard_repository(tmp_path / "repo")


@pytest.fixture
def server(repo):
    with loaded_server(repo) as server:
        yield server


def infer(server: InferenceServer, model: str, inputs: dict[str, tuple[str, np.ndarray]], version: str = ""):
    done = threading.Event()
    box = {}

    def complete(response, error):
        box["response"], box["error"] = response, error
        done.set()

    request = InferRequest(model, {n: InferTensor(n, dt, a) for n, (dt, a) in inputs.items()},
                           model_version=version, complete=complete)
    server.submit(request)
    assert done.wait(5)
    if box["error"] is not None:
        raise box["error"]
    return {t.name: t.data for t in box["response"].outputs}


def test_repository_loads_and_a_broken_model_does_not_stop_the_others(server):
    index = {row["name"]: row for row in server.manager.index()}
    assert {n: r["state"] for n, r in index.items()} == {
        "add_sub": "READY", "add_sub_int": "READY", "broken": "UNAVAILABLE", "echo_bytes": "READY",
        "onnx_only": "READY"}
    # the same diagnostic as `tritonctl validate`, with its code and position
    assert index["broken"]["reason"].startswith("TXT01 ")
    assert "config.pbtxt:4:" in index["broken"]["reason"]
    assert not server.ready()  # strict readiness: a model failed to load


def test_model_with_only_an_onnx_file_loads_and_runs(server):
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    assert np.array_equal(infer(server, "onnx_only", {"X": ("FP32", x)})["Y"], x * 2)


def test_inference_and_errors_with_tritons_texts(server):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = infer(server, "add_sub", {"INPUT0": ("FP32", a), "INPUT1": ("FP32", a)})
    assert np.array_equal(out["OUTPUT0"], a + a) and np.array_equal(out["OUTPUT1"], a - a)
    cases = [
        ("nope", {"INPUT0": ("FP32", a)}, Status.NOT_FOUND, "Request for unknown model: 'nope' is not found"),
        ("add_sub", {"INPUT0": ("FP32", a)}, Status.INVALID_ARG,
         "expected 2 inputs but got 1 inputs for model 'add_sub'"),
        ("add_sub", {"INPUT0": ("INT32", a.astype(np.int32)), "INPUT1": ("FP32", a)}, Status.INVALID_ARG,
         "inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'"),
        ("add_sub", {"INPUT0": ("FP32", a[:, :3]), "INPUT1": ("FP32", a[:, :3])}, Status.INVALID_ARG,
         "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,4], got [2,3]"),
        ("add_sub", {"INPUT0": ("FP32", np.zeros((9, 4), np.float32)),
                     "INPUT1": ("FP32", np.zeros((9, 4), np.float32))}, Status.INVALID_ARG,
         "inference request batch-size must be <= 8 for 'add_sub'"),
        ("add_sub", {"INPUT0": ("FP32", a), "INPUT1": ("FP32", a), "EXTRA": ("FP32", a)}, Status.INVALID_ARG,
         "expected 2 inputs but got 3 inputs for model 'add_sub'. Got input(s) ['INPUT0','INPUT1','EXTRA'], but "
         "missing required input(s) ]. Please provide all required input(s)."),
        ("add_sub", {"INPUT0": ("INT32", a.astype(np.int32))}, Status.INVALID_ARG,
         "expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing required "
         "input(s) ['INPUT1']. Please provide all required input(s)."),
        ("add_sub", {"INPUT0": ("FP32", a), "WRONG": ("FP32", a)}, Status.INVALID_ARG,
         "unexpected inference input 'WRONG' for model 'add_sub'"),
    ]
    for model, inputs, status, text in cases:
        with pytest.raises(ServeError) as caught:
            infer(server, model, inputs)
        assert caught.value.status is status
        assert text in caught.value.message


def test_bytes_round_trip(server):
    text = np.array([[b"hello", b"w\xc3\xb6rld"]], dtype=object)
    assert infer(server, "echo_bytes", {"TEXT": ("BYTES", text)})["TEXT_OUT"].tolist() == text.tolist()


def test_version_policies(tmp_path):
    repo = tmp_path / "repo"
    write_add_sub(repo, "latest2", versions=(1, 2, 3),
                  extra="version_policy { latest { num_versions: 2 } }")
    write_add_sub(repo, "all", versions=(1, 2), extra="version_policy { all { } }")
    write_add_sub(repo, "specific", versions=(1, 2, 3), extra="version_policy { specific { versions: [1, 3] } }")
    write_add_sub(repo, "default", versions=(1, 5))
    manager = ModelManager(repo, registry())
    try:
        manager.load_all()
        assert manager.ready_versions("latest2") == ["2", "3"]
        assert manager.ready_versions("all") == ["1", "2"]
        assert manager.ready_versions("specific") == ["1", "3"]
        assert manager.ready_versions("default") == ["5"]
        assert manager.get("specific").version == 3
        with pytest.raises(ServeError) as caught:
            manager.get("specific", "2")
        assert caught.value.status is Status.NOT_FOUND
    finally:
        manager.stop(5)


def test_unload_and_load_with_a_config_override(server):
    manager = server.manager
    manager.unload("add_sub_int")
    assert not manager.is_ready("add_sub_int")
    assert {"name": "add_sub_int", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"} in manager.index()
    manager.load("add_sub_int")
    assert manager.is_ready("add_sub_int")
    override = ('{"name": "add_sub_int", "backend": "onnxruntime", "max_batch_size": 2, "input": ['
                '{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [4]}, '
                '{"name": "INPUT1", "data_type": "TYPE_INT32", "dims": [4]}], '
                '"output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [4]}]}')
    manager.load("add_sub_int", override)
    model = manager.get("add_sub_int")
    assert model.max_batch_size == 2 and list(model.outputs) == ["OUTPUT0"]
    a = np.ones((2, 4), np.int32)
    assert list(infer(server, "add_sub_int", {"INPUT0": ("INT32", a), "INPUT1": ("INT32", a)})) == ["OUTPUT0"]


def test_kind_gpu_without_a_gpu_is_a_clear_load_error(tmp_path):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has CUDA")
    repo = tmp_path / "repo"
    write_add_sub(repo, "gpu_model").joinpath("config.pbtxt").write_text(
        (repo / "gpu_model" / "config.pbtxt").read_text().replace("KIND_CPU", "KIND_GPU"))
    manager = ModelManager(repo, registry())
    with pytest.raises(ServeError) as caught:
        manager.load("gpu_model")
    assert "KIND_GPU" in caught.value.message and "no GPUs are available" in caught.value.message
    assert manager.index()[0]["state"] == "UNAVAILABLE"


def test_poll_loads_new_reloads_changed_and_unloads_removed_models(tmp_path):
    import shutil

    repo = tmp_path / "repo"
    write_add_sub(repo, "first")
    manager = ModelManager(repo, registry(), control_mode="poll")
    try:
        manager.load_all()
        first = manager.get("first")
        write_add_sub(repo, "second")
        manager.poll()
        assert manager.is_ready("second") and manager.get("first") is first  # unchanged: kept as is
        config = repo / "first" / "config.pbtxt"
        config.write_text(config.read_text().replace("max_batch_size: 8", "max_batch_size: 2"))
        manager.poll()
        assert manager.get("first").max_batch_size == 2
        shutil.rmtree(repo / "second")
        manager.poll()
        assert not manager.is_ready("second")
    finally:
        manager.stop(5)


def test_poll_keeps_the_serving_version_when_a_changed_model_fails_and_retries_only_on_a_new_change(tmp_path):
    repo = tmp_path / "repo"
    write_add_sub(repo, "first")
    manager = ModelManager(repo, registry(), control_mode="poll")
    try:
        manager.load_all()
        serving = manager.get("first")
        config = repo / "first" / "config.pbtxt"
        good = config.read_text()
        config.write_text(good.replace("TYPE_FP32", "TYPE_NOPE", 1))
        manager.poll()
        assert manager.get("first") is serving  # the broken reload changed nothing
        loads = []
        original = manager.load
        manager.load = lambda *args: loads.append(args) or original(*args)
        manager.poll()
        assert loads == []  # the same broken files are not loaded again on every poll
        config.write_text(good.replace("max_batch_size: 8", "max_batch_size: 2"))
        manager.poll()
        assert manager.get("first").max_batch_size == 2
    finally:
        manager.stop(5)


def test_classification_returns_top_values_with_labels(tmp_path):
    repo = tmp_path / "repo"
    model_dir = write_add_sub(repo, "classifier")
    (model_dir / "labels.txt").write_text("zero\none\ntwo\nthree\n")
    config = model_dir / "config.pbtxt"
    config.write_text(config.read_text().replace(
        '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }',
        '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }'))
    manager = ModelManager(repo, registry())
    manager.load_all()
    server = InferenceServer(manager)
    try:
        from tritonctl.serve.core.types import RequestedOutput

        done = threading.Event()
        box = {}
        a = np.array([[0.1, 0.9, 0.5, 0.2]], np.float32)
        request = InferRequest("classifier", {"INPUT0": InferTensor("INPUT0", "FP32", a),
                                              "INPUT1": InferTensor("INPUT1", "FP32", np.zeros_like(a))},
                               requested_outputs=[RequestedOutput("OUTPUT0", classification=2)],
                               complete=lambda r, e: (box.update(r=r, e=e), done.set()))
        server.submit(request)
        assert done.wait(5) and box["e"] is None
        tensor = box["r"].outputs[0]
        assert tensor.datatype == "BYTES" and tensor.shape == [1, 2]
        assert tensor.data.tolist() == [[b"0.900000:1:one", b"0.500000:2:two"]]
    finally:
        manager.stop(5)


def test_a_failing_execution_is_a_500_and_the_model_keeps_serving(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    repo = tmp_path / "repo"
    model_dir = repo / "fragile"
    (model_dir / "1").mkdir(parents=True)
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 4])
    graph = helper.make_graph([helper.make_node("Reshape", ["X", "shape"], ["Y"])], "fragile",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [-1])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [-1, 4])], initializer=[shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(model_dir / "1" / "model.onnx"))
    (model_dir / "config.pbtxt").write_text(
        'backend: "onnxruntime"\nmax_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]\n'
        'instance_group [ { kind: KIND_CPU count: 1 } ]\n')
    manager = ModelManager(repo, registry())
    manager.load_all()
    server = InferenceServer(manager)
    try:
        with pytest.raises(ServeError) as caught:
            infer(server, "fragile", {"X": ("FP32", np.ones(3, np.float32))})
        assert caught.value.status is Status.INTERNAL and "model 'fragile'" in caught.value.message
        assert infer(server, "fragile", {"X": ("FP32", np.ones(8, np.float32))})["Y"].shape == (2, 4)
        assert manager.get("fragile").stats.failures == {"BACKEND": 1}
    finally:
        manager.stop(5)
