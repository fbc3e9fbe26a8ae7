"""``--grpc-restricted-protocol`` / ``--http-restricted-api``: endpoints of the named categories
need a header, as tritonserver 2.51 does it (grpc_server.cc, http_server.cc, command_line_parser.cc;
L0_grpc's RestrictedProtocolTest, L0_http's restricted API runs). Without the header (or with
another value) gRPC answers UNAVAILABLE "This protocol is restricted, expecting header
'triton-grpc-protocol-<key>'" and HTTP answers 403 ``{"error": "This API is restricted, expecting
header '<key>'"}``, before anything else of the call; other categories stay open. Bad flags stop
the start with tritonserver's reason. Driven by the real tritonclient over both transports."""

from __future__ import annotations

import queue
import subprocess
import sys

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_identity
from tritonctl.serve.core.restrictions import RestrictionError
from tritonctl.serve.runtime import BackgroundServer, ServeOptions, ServerRuntime

GROUPS = ["inference,health:infer-key=infer-value",
          "model-repository,statistics,model-config,shared-memory,trace,logging:admin-key=admin-value"]
GRPC_INFER = {"triton-grpc-protocol-infer-key": "infer-value"}
GRPC_ADMIN = {"triton-grpc-protocol-admin-key": "admin-value"}
HTTP_INFER = {"infer-key": "infer-value"}
HTTP_ADMIN = {"admin-key": "admin-value"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("restricted") / "repo"
    write_python_identity(repo)
    return repo


@pytest.fixture(scope="module")
def server(repo, transports):
    server = BackgroundServer(ServeOptions(
        repo, http_port=0, grpc_port=0, metrics_port=None, python_isolation="thread", exit_timeout_secs=5,
        http_restricted_api=GROUPS, grpc_restricted_protocol=GROUPS, **transports)).start()
    yield server
    server.stop()


def grpc_input():
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.full([1], 3.0, np.float32))
    return tensor


def http_input():
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.full([1], 3.0, np.float32))
    return tensor


# category -> (a call of that category through a tritonclient, given a client and headers)
CALLS = {
    "health": lambda c, h: c.is_server_live(headers=h),
    "inference": lambda c, h: c.infer("identity", [grpc_input() if isinstance(c, grpcclient.InferenceServerClient)
                                                   else http_input()], headers=h),
    "model-config": lambda c, h: c.get_model_config("identity", headers=h),
    "model-repository": lambda c, h: c.get_model_repository_index(headers=h),
    "statistics": lambda c, h: c.get_inference_statistics(headers=h),
    "shared-memory": lambda c, h: c.get_system_shared_memory_status(headers=h),
    "trace": lambda c, h: c.get_trace_settings(headers=h),
    "logging": lambda c, h: c.get_log_settings(headers=h),
}
NEEDS = {"health": "infer", "inference": "infer"}  # the others: admin


@pytest.mark.parametrize("category", list(CALLS))
def test_grpc_restricted_categories_need_their_header(server, category):
    call = CALLS[category]
    right = GRPC_INFER if NEEDS.get(category) == "infer" else GRPC_ADMIN
    wrong = GRPC_ADMIN if right is GRPC_INFER else GRPC_INFER
    key = next(iter(right))
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        for headers in (None, wrong, {key: "not-the-value"}):
            with pytest.raises(InferenceServerException) as refused:
                call(client, headers)
            assert refused.value.status() == "StatusCode.UNAVAILABLE"
            assert refused.value.message() == f"This protocol is restricted, expecting header '{key}'"
        assert call(client, right) is not None


@pytest.mark.parametrize("category", list(CALLS))
def test_http_restricted_categories_need_their_header(server, category):
    call = CALLS[category]
    right = HTTP_INFER if NEEDS.get(category) == "infer" else HTTP_ADMIN
    wrong = HTTP_ADMIN if right is HTTP_INFER else HTTP_INFER
    key = next(iter(right))
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        for headers in (None, wrong, {key: "not-the-value"}):
            if category == "health":  # tritonclient.http answers False for any status but 200 (here 403)
                assert call(client, dict(headers) if headers else None) is False
                continue
            with pytest.raises(InferenceServerException) as refused:
                call(client, dict(headers) if headers else None)
            assert f"This API is restricted, expecting header '{key}'" in str(refused.value)
        assert call(client, dict(right)) not in (None, False)
    finally:
        client.close()


def test_unrestricted_categories_stay_open(server):
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        assert client.get_server_metadata().name == "triton"
        assert client.get_model_metadata("identity").name == "identity"
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        assert client.get_server_metadata()["name"] == "triton"
        assert client.get_model_metadata("identity")["name"] == "identity"
    finally:
        client.close()


def test_http_refusal_is_403_with_triton_error_body_before_the_method_is_looked_at(server):
    base = f"http://{server.http_url}"
    reply = requests.get(f"{base}/v2/health/ready", timeout=30)
    assert reply.status_code == 403
    assert reply.json() == {"error": "This API is restricted, expecting header 'infer-key'"}
    # a wrong method on a restricted route is refused for the header first, as tritonserver does
    assert requests.post(f"{base}/v2/health/live", timeout=30).status_code == 403
    assert requests.post(f"{base}/v2/health/live", headers=HTTP_INFER, timeout=30).status_code == 405
    # HTTP header names are case-insensitive; the value is compared exactly
    assert requests.get(f"{base}/v2/health/ready", headers={"Infer-Key": "infer-value"}, timeout=30).status_code == 200
    assert requests.get(f"{base}/v2/health/ready", headers={"infer-key": "Infer-Value"}, timeout=30).status_code == 403
    body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [2.0]}]}
    refused = requests.post(f"{base}/v2/models/identity/versions/1/infer", json=body, timeout=30)
    assert refused.status_code == 403 and refused.json()["error"].startswith("This API is restricted")
    ok = requests.post(f"{base}/v2/models/identity/versions/1/infer", json=body, headers=HTTP_INFER, timeout=30)
    assert ok.status_code == 200 and ok.json()["outputs"][0]["data"] == [2.0]
    # the repository API (a POST with a body) and the per-model statistics are admin
    assert requests.post(f"{base}/v2/repository/index", timeout=30).status_code == 403
    assert requests.post(f"{base}/v2/repository/index", headers=HTTP_ADMIN, timeout=30).status_code == 200
    assert requests.get(f"{base}/v2/models/identity/stats", timeout=30).status_code == 403
    assert requests.get(f"{base}/v2/models/identity/stats", headers=HTTP_ADMIN, timeout=30).status_code == 200


def test_grpc_stream_without_the_header_is_refused(server):
    results: queue.Queue = queue.Queue()
    for headers, expected in ((None, "refused"), (GRPC_INFER, "answered")):
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            client.start_stream(callback=lambda result, error: results.put((result, error)), headers=headers)
            try:
                client.async_stream_infer("identity", [grpc_input()])
            except InferenceServerException:  # a refusal may end the stream before the request is sent
                pass  # the callback gets the refusal either way
            result, error = results.get(timeout=60)
            client.stop_stream()
        if expected == "refused":
            assert result is None
            assert error.status() == "StatusCode.UNAVAILABLE"
            assert error.message() == "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"
        else:
            assert error is None and result.as_numpy("OUTPUT0").tolist() == [3.0]


def test_grpc_stream_is_refused_when_opened_before_any_request(server):
    # L0_grpc's RestrictedProtocolTest.test_stream_infer: the stream is ended as soon as it is
    # opened without the header, so the client finds it invalid before it sends anything.
    results: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        client.start_stream(callback=lambda result, error: results.put((result, error)), headers={"test": "1"})
        result, error = results.get(timeout=60)
        assert result is None and error.status() == "StatusCode.UNAVAILABLE"
        assert error.message() == "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"
        with pytest.raises(InferenceServerException, match="The stream is no longer in valid state"):
            client.async_stream_infer("identity", [grpc_input()])
        client.stop_stream()


def test_grpc_standard_health_check_is_in_the_health_category(server):
    with grpc.insecure_channel(server.grpc_url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        with pytest.raises(grpc.RpcError) as refused:
            check(b"", timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details() == \
            "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"
        assert check(b"", metadata=tuple(GRPC_INFER.items()), timeout=30) == b"\x08\x01"  # SERVING


@pytest.mark.parametrize("flags, message", [
    (["inference"], "--grpc-restricted-protocol option format is '<config name>:<setting>=<value>'. Got inference"),
    (["inference:key"], "option format is '<config name>:<setting>=<value>'. Got inference:key"),
    (["inference:=v"], "Got inference:=v"),
    (["inference:k="], "Got inference:k="),
    ([":k=v"], "Got :k=v"),
    (["model-reposit,health:k1=v1"], "unknown restricted protocol 'model-reposit'"),
    (["model-repository,health:k1=v1", "metadata,health:k2=v2"],
     "restricted protocol 'health' can not be specified in multiple config groups"),
    (["inference,inference:k=v"], "restricted protocol 'inference' can not be specified in multiple config groups"),
])
def test_bad_grpc_flags_stop_the_start(repo, flags, message):
    with pytest.raises(RestrictionError) as refused:
        ServerRuntime(ServeOptions(repo, grpc_restricted_protocol=flags))
    assert message in str(refused.value)


def test_bad_http_flags_stop_the_start(repo):
    with pytest.raises(RestrictionError, match="unknown restricted api 'model-reposit'"):
        ServerRuntime(ServeOptions(repo, http_restricted_api=["model-reposit,health:k1=v1"]))
    with pytest.raises(RestrictionError, match="restricted api 'health' can not be specified in multiple config"):
        ServerRuntime(ServeOptions(repo, http_restricted_api=["model-repository,health:k1=v1",
                                                              "metadata,health:k2=v2"]))


def test_the_cli_refuses_a_bad_flag_before_loading_anything(repo):
    process = subprocess.run([sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-restricted-api",
                              "inference:key", "--http-port", "0", "--grpc-port", "0", "--metrics-port", "-1"],
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 2, process.stderr
    assert "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got inference:key" \
        in process.stderr
