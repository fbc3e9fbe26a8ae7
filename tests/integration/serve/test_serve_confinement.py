"""The server stays inside its repository, and a failed load or reload changes nothing, over both
transports of both protocols (raw HTTP, tritonclient, raw gRPC stubs).

Outside the repository sits a sentinel: a valid model (``other/1/model.onnx``, which would load
and become READY if it were read) and a text file. Every path a hostile load names - a model
name, ``default_model_filename`` relative or absolute, ``file:`` overrides, label files,
symlinks out of a model or out of the repository - is refused with 400 / INVALID_ARGUMENT, and
neither an audit hook (Python opens) nor the files' access times (the C++ opens of onnxruntime)
show the sentinel touched."""

from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from helpers.serve_models import add_sub_onnx, write_add_sub
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

OLD = (946684800, 946684800)  # 2000-01-01: any read since moves a relatime access time
OPENED: list[str] = []  # every path Python opened, as the audit hook saw it


def _audit(event: str, args: tuple) -> None:
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        OPENED.append(os.fsdecode(args[0]))


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("outside")
    add_sub_onnx(root / "other" / "1" / "model.onnx")
    (root / "secret.txt").write_text("label0\nlabel1\n")
    return root


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory, outside):
    repo = tmp_path_factory.mktemp("confined") / "repo"
    write_add_sub(repo, "steady")
    write_add_sub(repo, "reloadable")
    # escapes written on disk, loaded only through the API (explicit mode)
    write_add_sub(repo, "abs_filename", extra=f'default_model_filename: "{outside / "other/1/model.onnx"}"')
    write_add_sub(repo, "dotdot_filename", extra='default_model_filename: "../../../outside_any/other/1/model.onnx"')
    write_add_sub(repo, "link_file")
    os.symlink(outside / "other" / "1" / "model.onnx", repo / "link_file" / "1" / "linked.onnx")
    (repo / "link_file" / "config.pbtxt").write_text(
        (repo / "link_file" / "config.pbtxt").read_text() + 'default_model_filename: "linked.onnx"\n')
    write_add_sub(repo, "label_escape")
    text = (repo / "label_escape" / "config.pbtxt").read_text()
    (repo / "label_escape" / "config.pbtxt").write_text(
        text.replace('{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }',
                     f'{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "{outside}/secret.txt" }}'))
    os.symlink(outside / "other", repo / "linked_model")  # a model directory that leaves the repository
    (repo / "linked_version").mkdir()
    write_add_sub(repo, "linked_version", versions=())
    (repo / "linked_version" / "1").symlink_to(outside / "other" / "1")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
                           load_models=["steady", "reloadable"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server


def http_load(served, name: str, parameters: dict | None = None, raw_body: bytes | None = None):
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = raw_body if raw_body is not None else json.dumps({"parameters": parameters or {}}).encode()
    try:
        conn.request("POST", f"/v2/repository/models/{name}/load", body=body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def grpc_load(served, name: str, config=None, files: dict | None = None):
    request = service_pb2.RepositoryModelLoadRequest(model_name=name)
    if isinstance(config, str):
        request.parameters["config"].string_param = config
    elif isinstance(config, int):
        request.parameters["config"].int64_param = config
    for key, data in (files or {}).items():
        request.parameters[key].bytes_param = data
    with grpc.insecure_channel(served.grpc_url) as channel:
        try:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).RepositoryModelLoad(request, timeout=30)
        except grpc.RpcError as exc:
            return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


def override(**fields) -> str:
    config = {"name": "reloadable", "backend": "onnxruntime", "max_batch_size": 8,
              "input": [{"name": n, "data_type": "TYPE_FP32", "dims": [4]} for n in ("INPUT0", "INPUT1")],
              "output": [{"name": n, "data_type": "TYPE_FP32", "dims": [4]} for n in ("OUTPUT0", "OUTPUT1")]}
    config.update(fields)
    return json.dumps(config)


@pytest.fixture
def untouched(outside):
    """Asserts, after the test, that nothing under ``outside`` was opened or read."""
    files = [p for p in outside.rglob("*") if p.is_file()]
    for path in files:
        os.utime(path, OLD)
    control = outside / "control.txt"  # does this file system record reads at all?
    control.write_text("x")
    os.utime(control, OLD)
    control.read_text()
    atime_works = control.stat().st_atime != OLD[0]
    control.unlink()
    sys.addaudithook(_audit)  # process-wide and permanent: it only appends to OPENED
    OPENED.clear()
    yield
    touched = [p for p in OPENED if p.startswith(str(outside))]
    assert not touched, f"opened outside the repository: {touched}"
    if atime_works:
        read = [str(p) for p in files if p.stat().st_atime != OLD[0]]
        assert not read, f"read outside the repository: {read}"


ESCAPING_OVERRIDES = [
    ({"default_model_filename": "../../../other/1/model.onnx"}, "must be a relative path inside the model"),
    ({"default_model_filename": "ABSOLUTE"}, "must be a relative path inside the model"),
    ({"default_model_filename": "..\\..\\x.onnx"}, "must be a relative path inside the model"),
    ({"output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4], "label_filename": "../../secret.txt"}]},
     "label_filename of output 'OUTPUT0'"),
    ({"parameters": {"EXECUTION_ENV_PATH": {"string_value": "/opt/envs/env.tar.gz"}}},
     "must be inside the model directory: write it as $$TRITON_MODEL_DIRECTORY/<archive>"),
    ({"parameters": {"EXECUTION_ENV_PATH": {"string_value": "env.tar.gz"}}}, "must be inside the model directory"),
    ({"parameters": {"EXECUTION_ENV_PATH": {"string_value": "$$TRITON_MODEL_DIRECTORY/../../other/env.tar.gz"}}},
     "EXECUTION_ENV_PATH '$$TRITON_MODEL_DIRECTORY/../../other/env.tar.gz' of model 'reloadable' resolves outside"),
]


@pytest.mark.parametrize("fields,text", ESCAPING_OVERRIDES)
def test_config_overrides_that_leave_the_model_directory_are_400(served, outside, untouched, fields, text):
    fields = {k: (str(outside / "other/1/model.onnx") if v == "ABSOLUTE" else v) for k, v in fields.items()}
    status, body = http_load(served, "reloadable", {"config": override(**fields)})
    assert status == 400 and text in json.loads(body)["error"], body
    code, details = grpc_load(served, "reloadable", override(**fields))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and text in details, details
    assert_still_serving(served, "reloadable")


@pytest.mark.parametrize("key", ["file:../../../outside/x.onnx", "file:/etc/passwd", "file:1/../../x",
                                 "file:..\\x", "file:"])
def test_file_overrides_outside_the_model_directory_are_400(served, untouched, key):
    status, body = http_load(served, "reloadable", {"config": override(), key: "AAAA"})
    assert status == 400 and "'file:' override" in json.loads(body)["error"], body
    code, details = grpc_load(served, "reloadable", override(), {key: b"\0"})
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert_still_serving(served, "reloadable")


@pytest.mark.parametrize("name,text", [
    ("abs_filename", "default_model_filename"),
    ("dotdot_filename", "default_model_filename"),
    ("link_file", "default_model_filename 'linked.onnx' of model 'link_file' resolves outside"),
    ("label_escape", "label_filename of output 'OUTPUT0'"),
    ("linked_model", "resolves outside the model repository"),
    ("linked_version", "version directory '1' of model 'linked_version' resolves outside"),
])
def test_configs_and_symlinks_on_disk_that_leave_the_repository_are_refused(served, untouched, name, text):
    status, body = http_load(served, name)
    assert status == 400 and text in json.loads(body)["error"], body
    code, details = grpc_load(served, name)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and text in details, details
    with httpclient.InferenceServerClient(served.http_url) as client:
        assert not client.is_model_ready(name)
        rows = {row["name"]: row for row in client.get_model_repository_index()}
        assert text in rows[name]["reason"]


@pytest.mark.parametrize("name", ["..", "%2e%2e", "%2E", "..%2F..%2Fother", "a%5C..", "%00"])
def test_load_names_that_are_not_one_directory_are_400(served, untouched, name):
    status, body = http_load(served, name)
    assert status == 400 and "invalid model name" in json.loads(body)["error"], body


# ---- a failed load or reload changes nothing -------------------------------------------------
def assert_still_serving(served, name: str) -> None:
    a = np.ones((1, 4), np.float32)
    with httpclient.InferenceServerClient(served.http_url) as client:
        assert client.is_model_ready(name)
        inputs = [httpclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        assert np.array_equal(client.infer(name, inputs).as_numpy("OUTPUT0"), a + a)
    client = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        assert client.is_model_ready(name)
    finally:
        client.close()


@pytest.mark.parametrize("parameters,text", [
    ({"config": []}, "must be a string"),
    ({"config": {"name": "reloadable"}}, "must be a string"),
    ({"config": 5}, "must be a string"),
    ({"config": "[]"}, "not a valid ModelConfig JSON"),
    ({"config": "{not json"}, "not a valid ModelConfig JSON"),
    ({"config": override(max_batch_size="eight")}, "not a valid ModelConfig JSON"),
    ({"config": override(nonsense_field=1)}, "not a valid ModelConfig JSON"),
    ({"config": override(default_model_filename="missing.onnx")}, "UNAVAILABLE"),
    ({"config": override(backend="no_such_backend")}, "reloadable"),
])
def test_a_failed_reload_over_http_leaves_the_serving_version_serving(served, parameters, text):
    status, body = http_load(served, "reloadable", parameters)
    assert status == 400 and text in json.loads(body)["error"], body
    assert_still_serving(served, "reloadable")


@pytest.mark.parametrize("raw_body", [b"[]", b'{"parameters": []}', b'{"parameters": 3}', b"\xff"])
def test_load_bodies_that_are_not_objects_are_400(served, raw_body):
    status, body = http_load(served, "reloadable", raw_body=raw_body)
    assert status == 400, body
    assert_still_serving(served, "reloadable")


@pytest.mark.parametrize("config,text", [(5, "must be a string"), ("[]", "not a valid ModelConfig JSON"),
                                         (override(nonsense_field=1), "not a valid ModelConfig JSON"),
                                         (override(default_model_filename="missing.onnx"), "UNAVAILABLE")])
def test_a_failed_reload_over_grpc_leaves_the_serving_version_serving(served, config, text):
    code, details = grpc_load(served, "reloadable", config)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and text in details, details
    assert_still_serving(served, "reloadable")


def test_an_execution_env_path_inside_the_model_directory_loads(served):
    status, body = http_load(served, "reloadable", {"config": override(
        parameters={"EXECUTION_ENV_PATH": {"string_value": "$$TRITON_MODEL_DIRECTORY/env.tar.gz"}})})
    assert status == 200, body
    assert_still_serving(served, "reloadable")


def index_rows(served, name: str) -> tuple[list[dict], list]:
    """``name``'s rows of the repository index over HTTP, and over gRPC."""
    with httpclient.InferenceServerClient(served.http_url) as client:
        http_rows = [row for row in client.get_model_repository_index() if row["name"] == name]
    client = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        grpc_rows = [row for row in client.get_model_repository_index().models if row.name == name]
    finally:
        client.close()
    return http_rows, grpc_rows


def test_a_failed_reload_tells_its_reason_in_the_index_while_serving(served):
    status, body = http_load(served, "reloadable", {"config": override(default_model_filename="missing.onnx")})
    assert status == 400, body
    http_rows, grpc_rows = index_rows(served, "reloadable")
    assert [(row["version"], row["state"]) for row in http_rows] == [("1", "READY")]
    for reason in (http_rows[0]["reason"], grpc_rows[0].reason):
        assert "load failed for model 'reloadable'" in reason and "missing.onnx" in reason, reason
        assert "the versions that were serving go on serving" in reason
    assert grpc_rows[0].state == "READY"
    assert_still_serving(served, "reloadable")
    status, body = http_load(served, "reloadable", {"config": override()})  # a good reload: the reason goes
    assert status == 200, body
    http_rows, grpc_rows = index_rows(served, "reloadable")
    assert "reason" not in http_rows[0] and grpc_rows[0].reason == ""


def test_a_good_reload_after_failed_ones_takes_effect(served):
    status, body = http_load(served, "reloadable", {"config": override(max_batch_size=4)})
    assert status == 200, body
    with httpclient.InferenceServerClient(served.http_url) as client:
        assert client.get_model_config("reloadable")["max_batch_size"] == 4
    assert_still_serving(served, "reloadable")
    assert_serves_steady(served)


def assert_serves_steady(served) -> None:
    with httpclient.InferenceServerClient(served.http_url) as client:
        assert client.is_model_ready("steady")
    with pytest.raises(InferenceServerException):  # nothing outside was loaded under any name
        with httpclient.InferenceServerClient(served.http_url) as client:
            client.get_model_metadata("other")
