"""``--grpc-restricted-protocol`` / ``--http-restricted-api`` against the real Triton 2.51
(../shared/anchors): the same flags on the same repository, the same calls with and without the
headers, over both protocols; each call's outcome (OK, or the status and message) must be the
same on both servers, over both transports of tritonctl serve. Bad flags: both refuse to start,
with the same reason. HTTP health stays open here: the anchor's start script polls
/v2/health/ready."""

from __future__ import annotations

import queue

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from helpers.triton_anchor import TritonServer, unavailable_reason
from helpers.serve_models import write_python_identity
from tritonctl.serve.core.restrictions import RestrictionError
from tritonctl.serve.runtime import BackgroundServer, ServeOptions, ServerRuntime

UNAVAILABLE = unavailable_reason()
pytestmark = [pytest.mark.triton, pytest.mark.slow, pytest.mark.skipif(UNAVAILABLE is not None,
                                                                       reason=UNAVAILABLE or "")]

GRPC_GROUPS = ["inference,health:infer-key=infer-value", "model-repository,statistics:admin-key=admin-value"]
HTTP_GROUPS = ["inference,model-config:infer-key=infer-value", "model-repository,statistics:admin-key=admin-value"]
FLAGS = (*[f"--grpc-restricted-protocol={group}" for group in GRPC_GROUPS],
         *[f"--http-restricted-api={group}" for group in HTTP_GROUPS])
GRPC_HEADERS = {"none": None, "infer": {"triton-grpc-protocol-infer-key": "infer-value"},
                "admin": {"triton-grpc-protocol-admin-key": "admin-value"},
                "bad": {"triton-grpc-protocol-infer-key": "x", "triton-grpc-protocol-admin-key": "x"}}
HTTP_HEADERS = {"none": {}, "infer": {"infer-key": "infer-value"}, "admin": {"Admin-Key": "admin-value"},
                "bad": {"infer-key": "x", "admin-key": "x"}}
BODY = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [2.0]}]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("restricted_diff") / "repo"
    write_python_identity(repo)
    return repo


def grpc_outcomes(url: str) -> dict:
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.full([1], 3.0, np.float32))
    calls = {
        "ServerLive": lambda c, h: c.is_server_live(headers=h),
        "ModelReady": lambda c, h: c.is_model_ready("identity", headers=h),
        "ServerMetadata": lambda c, h: c.get_server_metadata(headers=h).name,
        "ModelMetadata": lambda c, h: c.get_model_metadata("identity", headers=h).name,
        "ModelConfig": lambda c, h: c.get_model_config("identity", headers=h).config.name,
        "ModelInfer": lambda c, h: c.infer("identity", [tensor], headers=h).as_numpy("OUTPUT0").tolist(),
        "ModelStatistics": lambda c, h: len(c.get_inference_statistics("identity", headers=h).model_stats),
        "RepositoryIndex": lambda c, h: len(c.get_model_repository_index(headers=h).models),
        "SystemSharedMemoryStatus": lambda c, h: len(c.get_system_shared_memory_status(headers=h).regions),
    }
    outcomes = {}
    with grpcclient.InferenceServerClient(url) as client:
        for name, call in calls.items():
            for label, headers in GRPC_HEADERS.items():
                try:
                    outcomes[name, label] = ("OK", call(client, headers))
                except InferenceServerException as exc:
                    outcomes[name, label] = (exc.status(), exc.message())
        for label, headers in GRPC_HEADERS.items():
            results: queue.Queue = queue.Queue()
            client.start_stream(callback=lambda result, error: results.put((result, error)), headers=headers)
            try:
                client.async_stream_infer("identity", [tensor])
            except InferenceServerException:  # a refusal may end the stream before the request is sent
                pass  # the callback gets the refusal either way
            result, error = results.get(timeout=60)
            client.stop_stream()
            outcomes["ModelStreamInfer", label] = (("OK", result.as_numpy("OUTPUT0").tolist()) if error is None
                                                   else (error.status(), error.message()))
    with grpc.insecure_channel(url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        for label, headers in GRPC_HEADERS.items():
            try:
                outcomes["Health/Check", label] = ("OK", check(b"", metadata=tuple((headers or {}).items()),
                                                               timeout=30))
            except grpc.RpcError as exc:
                outcomes["Health/Check", label] = (exc.code().name, exc.details())
    return outcomes


def http_outcomes(url: str) -> dict:
    base = f"http://{url}"
    calls = {
        "GET /v2/health/ready": ("GET", "/v2/health/ready", None),
        "GET /v2": ("GET", "/v2", None),
        "GET config": ("GET", "/v2/models/identity/config", None),
        "POST config": ("POST", "/v2/models/identity/config", None),  # the header is checked first
        "POST infer": ("POST", "/v2/models/identity/infer", BODY),
        "POST versioned infer": ("POST", "/v2/models/identity/versions/1/infer", BODY),
        "POST generate": ("POST", "/v2/models/identity/generate", {"INPUT0": [2.0]}),
        "POST generate_stream": ("POST", "/v2/models/identity/versions/1/generate_stream", {"INPUT0": 2.0}),
        "GET generate": ("GET", "/v2/models/identity/generate", None),  # the header is checked first
        "GET stats": ("GET", "/v2/models/stats", None),
        "GET model stats": ("GET", "/v2/models/identity/stats", None),
        "POST repository index": ("POST", "/v2/repository/index", None),
        "GET shm status": ("GET", "/v2/systemsharedmemory/status", None),
    }
    outcomes = {}
    for name, (method, path, body) in calls.items():
        for label, headers in HTTP_HEADERS.items():
            reply = requests.request(method, base + path, json=body, headers=headers, timeout=60)
            error = reply.json().get("error") if reply.status_code != 200 and reply.content else None
            outcomes[name, label] = (reply.status_code, error)
    return outcomes


@pytest.fixture(scope="module")
def triton(repo, tmp_path_factory):
    with TritonServer(repo, tmp_path_factory.mktemp("triton_restricted"),
                      args=("--load-model=identity", *FLAGS)) as server:
        yield {"grpc": grpc_outcomes(f"127.0.0.1:{server.grpc_port}"),
               "http": http_outcomes(f"127.0.0.1:{server.http_port}")}


@pytest.fixture(scope="module")
def ours(repo, transports):
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
                           load_models=["identity"], python_isolation="thread", exit_timeout_secs=5,
                           grpc_restricted_protocol=GRPC_GROUPS, http_restricted_api=HTTP_GROUPS, **transports)
    with BackgroundServer(options) as server:
        yield {"grpc": grpc_outcomes(server.grpc_url), "http": http_outcomes(server.http_url)}


def differences(theirs: dict, mine: dict) -> list[str]:
    return [f"{key}: triton {theirs.get(key)!r}, tritonctl {mine.get(key)!r}"
            for key in sorted(set(theirs) | set(mine)) if theirs.get(key) != mine.get(key)]


def test_grpc_calls_end_as_in_triton(triton, ours):
    assert ("StatusCode.UNAVAILABLE", "This protocol is restricted, expecting header "
            "'triton-grpc-protocol-infer-key'") == triton["grpc"]["ModelInfer", "none"]  # the refusal is exercised
    assert differences(triton["grpc"], ours["grpc"]) == []


def test_http_calls_end_as_in_triton(triton, ours):
    assert triton["http"]["POST infer", "none"] == (403, "This API is restricted, expecting header 'infer-key'")
    assert differences(triton["http"], ours["http"]) == []


@pytest.mark.parametrize("flags, reason", [
    (("--grpc-restricted-protocol=model-reposit,health:k1=v1",), "unknown restricted protocol 'model-reposit'"),
    (("--http-restricted-api=inference:k",),
     "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got inference:k"),
    (("--http-restricted-api=model-repository,statistics:k1=v1", "--http-restricted-api=statistics:k2=v2"),
     "restricted api 'statistics' can not be specified in multiple config groups"),
])
def test_bad_flags_are_refused_by_both_for_the_same_reason(repo, tmp_path, flags, reason):
    with pytest.raises(RuntimeError) as triton_refusal:
        with TritonServer(repo, tmp_path, args=flags):
            pass
    assert reason in triton_refusal.value.args[0]
    option = flags[0].split("=", 1)[0][2:].replace("-", "_")
    with pytest.raises(RestrictionError) as refusal:
        ServerRuntime(ServeOptions(repo, **{option: [flag.split("=", 1)[1] for flag in flags]}))
    assert reason in str(refusal.value)
