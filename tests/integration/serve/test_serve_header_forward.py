"""``--http-header-forward-pattern`` / ``--grpc-header-forward-pattern``: request headers (HTTP)
and client metadata (gRPC) whose name matches become string parameters of the request, which a
Python model reads in ``request.parameters()``. What is asserted is what Triton 2.51 does with
the same flags (measured on it): RE2 syntax, matched case-insensitively anywhere in the name
(``(?-i)`` makes it case-sensitive), the header's name as the client spelled it, a header named
like a request parameter replacing its value, reserved names forwarded as plain parameters, a
stream's metadata reaching every request of the stream, nothing forwarded without the flag. A
pattern that is not a regular expression stops the start with a clear error."""

from __future__ import annotations

import json
import queue
import subprocess
import sys

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aiogrpcclient
import tritonclient.http as httpclient

from tritonctl.serve.core.header_forward import HeaderPatternError
from tritonctl.serve.runtime import BackgroundServer, ServeOptions, ServerRuntime

# The model answers with its request's parameters, as request.parameters() gives them (JSON).
MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PARAMS", np.array([r.parameters()], dtype=object))])
                for r in requests]
'''
CONFIG = '''
name: "params"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]
'''
HEADERS = {"my_header_1": "my_value_1", "my_header_2": 'a "quoted" value with a backslash\\', "header_1": "value_1"}
FORWARDED = {"my_header_1": "my_value_1", "my_header_2": 'a "quoted" value with a backslash\\'}


def repository(tmp_path_factory):
    repo = tmp_path_factory.mktemp("forward") / "repo"
    (repo / "params" / "1").mkdir(parents=True)
    (repo / "params" / "config.pbtxt").write_text(CONFIG)
    (repo / "params" / "1" / "model.py").write_text(MODEL)
    return repo


def start(repo, transports, http_pattern=None, grpc_pattern=None) -> BackgroundServer:
    return BackgroundServer(ServeOptions(
        repo, http_port=0, grpc_port=0, metrics_port=None, python_isolation="thread", exit_timeout_secs=5,
        http_header_forward_pattern=http_pattern, grpc_header_forward_pattern=grpc_pattern, **transports)).start()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return repository(tmp_path_factory)


@pytest.fixture(scope="module")
def forwarding(repo, transports):
    """Both flags as Triton's L0_parameters passes them (`my_header.*`)."""
    server = start(repo, transports, "my_header.*", "my_header.*")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def plain(repo, transports):
    """No flag: nothing is forwarded."""
    server = start(repo, transports)
    yield server
    server.stop()


def http_infer(server, headers, parameters=None) -> dict:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones([1], np.float32))
    try:
        # a copy: tritonclient.http adds its own headers to the dict it is given
        result = client.infer("params", [tensor], headers=dict(headers), parameters=parameters)
    finally:
        client.close()
    return json.loads(result.as_numpy("PARAMS")[0])


def raw_http_infer(server, headers, parameters=None) -> dict:
    """Without tritonclient: the headers' names go out exactly as written here."""
    body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
    if parameters:
        body["parameters"] = parameters
    reply = requests.post(f"http://{server.http_url}/v2/models/params/infer", json=body, headers=headers, timeout=60)
    assert reply.status_code == 200, reply.text
    return json.loads(reply.json()["outputs"][0]["data"][0])


def grpc_input():
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones([1], np.float32))
    return tensor


def grpc_infer(server, headers, parameters=None) -> dict:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        result = client.infer("params", [grpc_input()], headers=headers, parameters=parameters)
    return json.loads(result.as_numpy("PARAMS")[0])


def custom(parameters: dict) -> dict:
    """The parameters but the client's own (gRPC's user-agent is metadata too)."""
    return {key: value for key, value in parameters.items() if key != "user-agent"}


def test_http_forwards_the_matching_headers_only(forwarding):
    assert http_infer(forwarding, HEADERS) == FORWARDED
    assert http_infer(forwarding, HEADERS, {"key1": 1, "key2": True}) == {"key1": 1, "key2": True, **FORWARDED}


def test_a_value_arrives_whole_with_its_trailing_whitespace(forwarding):
    # Triton's HTTP parser keeps it (L0_parameters sends 'This is a "quoted" string with a backslash\\ ');
    # so do both transports here, and gRPC.
    assert raw_http_infer(forwarding, {"my_header_3": "ends in a space ", "my_header_4": "a tab\t"}) == \
        {"my_header_3": "ends in a space ", "my_header_4": "a tab\t"}
    assert custom(grpc_infer(forwarding, {"my_header_3": "ends in a space "})) == {"my_header_3": "ends in a space "}


def test_grpc_forwards_the_matching_metadata_only(forwarding):
    assert grpc_infer(forwarding, HEADERS) == FORWARDED
    assert grpc_infer(forwarding, HEADERS, {"key1": "value1"}) == {"key1": "value1", **FORWARDED}


def test_grpc_async_and_aio_clients_forward_too(forwarding):
    received: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(forwarding.grpc_url) as client:
        client.async_infer("params", [grpc_input()], callback=lambda result, error: received.put((result, error)),
                           headers=HEADERS)
        result, error = received.get(timeout=60)
    assert error is None and json.loads(result.as_numpy("PARAMS")[0]) == FORWARDED

    async def aio_infer():
        async with aiogrpcclient.InferenceServerClient(forwarding.grpc_url) as client:
            tensor = aiogrpcclient.InferInput("INPUT0", [1], "FP32")
            tensor.set_data_from_numpy(np.ones([1], np.float32))
            return await client.infer("params", [tensor], headers=HEADERS)

    import asyncio
    assert json.loads(asyncio.run(aio_infer()).as_numpy("PARAMS")[0]) == FORWARDED


def test_a_streams_metadata_reaches_every_request_of_the_stream(forwarding):
    received: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(forwarding.grpc_url) as client:
        client.start_stream(callback=lambda result, error: received.put((result, error)), headers=HEADERS)
        for key in ("a", "b"):
            client.async_stream_infer("params", [grpc_input()], parameters={"key": key})
        answers = [received.get(timeout=60) for _ in range(2)]
        client.stop_stream()
    for (result, error), key in zip(answers, ("a", "b")):
        assert error is None
        assert json.loads(result.as_numpy("PARAMS")[0]) == {"key": key, **FORWARDED}


def test_the_match_is_case_insensitive_anywhere_in_the_name_and_keeps_the_senders_spelling(forwarding):
    # HTTP names keep the client's spelling (Triton passes them on as sent); RE2's PartialMatch
    # finds the pattern anywhere in the name, as Triton matches it.
    sent = {"My_Header_Mixed": "1", "X-MY_HEADER": "2", "Other": "3"}
    assert raw_http_infer(forwarding, sent) == {"My_Header_Mixed": "1", "X-MY_HEADER": "2"}
    # gRPC metadata names are lower case on the wire, whatever the client wrote.
    assert custom(grpc_infer(forwarding, {"x_my_header": "2", "other": "3"})) == {"x_my_header": "2"}


def test_a_header_named_like_a_request_parameter_replaces_its_value(forwarding):
    # Triton sets the forwarded headers after the request's own parameters: the model sees the header.
    assert raw_http_infer(forwarding, {"my_header_1": "from the header"}, {"my_header_1": 5, "key": 1}) == \
        {"my_header_1": "from the header", "key": 1}
    assert custom(grpc_infer(forwarding, {"my_header_1": "from the header"}, {"my_header_1": 5})) == \
        {"my_header_1": "from the header"}


def test_without_the_flags_nothing_is_forwarded(plain):
    assert http_infer(plain, HEADERS) == {}
    assert grpc_infer(plain, HEADERS) == {}
    assert raw_http_infer(plain, {"My_Header_1": "1"}, {"key": "v"}) == {"key": "v"}


def test_case_sensitive_pattern_and_reserved_names(repo, transports):
    # '(?-i)' turns Triton's case-insensitive default off: lower-case gRPC metadata no longer
    # matches an upper-case pattern (L0_parameters' test_grpc_header_forward_pattern_case_sensitive),
    # while an HTTP header sent in upper case does. Reserved names (triton_*, sequence_id) are
    # forwarded as plain string parameters, as Triton 2.51 does: they set no request option.
    server = start(repo, transports, "(?-i)MY_HEADER.*|^triton_|^sequence_id$", "(?-i)MY_HEADER.*")
    try:
        assert custom(grpc_infer(server, HEADERS)) == {}
        assert raw_http_infer(server, {"MY_HEADER_1": "1", "my_header_2": "2"}) == {"MY_HEADER_1": "1"}
        assert raw_http_infer(server, {"triton_x": "1", "sequence_id": "7"}) == {"triton_x": "1", "sequence_id": "7"}
        # a triton_ parameter of the request itself stays refused
        body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}],
                "parameters": {"triton_y": 1}}
        reply = requests.post(f"http://{server.http_url}/v2/models/params/infer", json=body,
                              headers={"triton_x": "1"}, timeout=60)
        assert reply.status_code == 400 and "reserved for Triton usage" in reply.json()["error"]
    finally:
        server.stop()


def test_a_pattern_that_is_not_a_regular_expression_is_refused_at_start(repo, transports):
    with pytest.raises(HeaderPatternError, match=r"--grpc-header-forward-pattern 'my_\(' is not a regular "
                                                 r"expression tritonserver accepts \(missing \)"):
        ServerRuntime(ServeOptions(repo, grpc_header_forward_pattern="my_(", **transports))
    # RE2 has no lookarounds: a pattern Python's re would take is refused as tritonserver refuses it
    with pytest.raises(HeaderPatternError, match="--http-header-forward-pattern"):
        ServerRuntime(ServeOptions(repo, http_header_forward_pattern="(?<=x)y", **transports))


def test_the_cli_refuses_a_bad_pattern_before_loading_anything(repo):
    process = subprocess.run([sys.executable, "-m", "tritonctl", "serve", str(repo), "--http-header-forward-pattern",
                              "my_[", "--http-port", "0", "--grpc-port", "0", "--metrics-port", "-1"],
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 2, process.stderr
    assert "--http-header-forward-pattern 'my_[' is not a regular expression tritonserver accepts" in process.stderr
    assert "missing ]" in process.stderr
