"""Hostile and malformed requests get Triton's client-fault statuses (400 / INVALID_ARGUMENT,
404 for an unknown route), never a 5xx or a hang, over both transports of both protocols; the
server answers a valid request afterwards. Raw HTTP (http.client, or a socket where a client
cannot send the bytes), raw gRPC stubs and the real tritonclient."""

from __future__ import annotations

import http.client
import json
import socket

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from hypothesis import given, strategies as st
from tritonclient.utils import InferenceServerException

from helpers.serve_clients import assert_serves
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.http.handlers import _accepted_encoding, inference_header_length

BAD_NAMES = ["%2e", "%2E%2e", "..", "a%2Fb", "a%5Cb", "a%00b", "%2e%2e%2F%2e%2e%2Fetc"]
BAD_GRPC_NAMES = [".", "..", "a/b", "a\\b", "a\0b", "../../etc"]


def http_raw(served, method: str, path: str, body: bytes = b"", headers: dict | None = None):
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def socket_raw(served, request_line: bytes) -> bytes:
    """The status line answered to ``request_line`` (bytes a client library would not send)."""
    host, port = served.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_line + b"\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("method,path", [("POST", "/v2/models/add_sub/nonsense"),
                                         ("GET", "/v2/models/add_sub/nonsense"),
                                         ("DELETE", "/v2/models/add_sub/versions/1/nonsense"),
                                         ("GET", "/v2/repository/nonsense"),
                                         ("PUT", "/v2/nonsense")])
def test_unknown_routes_are_404_whatever_the_method(served, method, path):
    assert http_raw(served, method, path) == (404, b'{"error":"Not Found"}')


def test_a_known_route_with_a_wrong_method_stays_405(served):
    assert http_raw(served, "DELETE", "/v2/models/add_sub/ready")[0] == 405
    assert http_raw(served, "GET", "/v2/repository/index")[0] == 405


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("method,template", [("GET", "/v2/models/{}"), ("GET", "/v2/models/{}/ready"),
                                             ("GET", "/v2/models/{}/versions/1/ready"),
                                             ("GET", "/v2/models/{}/config"), ("GET", "/v2/models/{}/stats"),
                                             ("POST", "/v2/models/{}/infer"),
                                             ("POST", "/v2/models/{}/versions/1/infer"),
                                             ("GET", "/v2/models/{}/trace/setting"),
                                             ("POST", "/v2/repository/models/{}/load"),
                                             ("POST", "/v2/repository/models/{}/unload")])
def test_names_that_are_not_one_directory_are_400_on_every_endpoint(served, name, method, template):
    status, body = http_raw(served, method, template.format(name), b'{"inputs": []}' if "infer" in template else b"")
    assert status == 400, body
    assert "invalid model name" in json.loads(body)["error"]


@pytest.mark.parametrize("path", [b"/v2/models/\xff\xfe/ready", b"/v2/models/\xc3(/config",
                                  b"/v2/repository/models/\xff/load", b"/v2/models/\xff/infer"])
@pytest.mark.parametrize("method", [b"GET", b"POST"])
def test_raw_invalid_utf8_paths_are_answered_400(served, method, path):
    # uvicorn refuses the request line itself (its own 400 text); the C++ transport answers in JSON
    assert socket_raw(served, method + b" " + path + b" HTTP/1.1").startswith(b"HTTP/1.1 400")
    assert_serves(served)


@pytest.mark.parametrize("path", ["/v2/models/%ff%fe/ready", "/v2/models/%C3%28/config",
                                  "/v2/repository/models/%ff/load", "/v2/models/%80/infer"])
def test_percent_encoded_invalid_utf8_is_400(served, path):
    status, body = http_raw(served, "POST" if path.endswith(("load", "infer")) else "GET", path)
    assert status == 400 and "not valid UTF-8" in json.loads(body)["error"]


def test_grpc_names_that_are_not_one_directory_are_invalid_argument(served):
    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for name in BAD_GRPC_NAMES:
            calls = [(stub.ModelReady, service_pb2.ModelReadyRequest(name=name)),
                     (stub.ModelMetadata, service_pb2.ModelMetadataRequest(name=name)),
                     (stub.ModelConfig, service_pb2.ModelConfigRequest(name=name)),
                     (stub.ModelStatistics, service_pb2.ModelStatisticsRequest(name=name)),
                     (stub.RepositoryModelLoad, service_pb2.RepositoryModelLoadRequest(model_name=name)),
                     (stub.RepositoryModelUnload, service_pb2.RepositoryModelUnloadRequest(model_name=name)),
                     (stub.ModelInfer, service_pb2.ModelInferRequest(model_name=name))]
            for call, message in calls:
                with pytest.raises(grpc.RpcError) as caught:
                    call(message, timeout=10)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, caught.value.details())
                assert "invalid model name" in caught.value.details()
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="add_sub", version="x1"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert_serves(served)


# Each method's request message, and the field number of its model name.
GRPC_NAME_FIELDS = {"ModelReady": 1, "ModelMetadata": 1, "ModelConfig": 1, "ModelStatistics": 1, "ModelInfer": 1,
                    "RepositoryModelLoad": 2, "RepositoryModelUnload": 2}


@pytest.mark.parametrize("raw_name", [b"\xff\xfe", b"a\xc3(", b"\xed\xa0\x80"])  # not UTF-8; a lone surrogate
def test_grpc_names_that_are_not_utf8_are_refused_as_triton_refuses_them(served, raw_name):
    # a message that does not parse, in Triton 2.51's words; in a stream, the end of the client's requests
    with grpc.insecure_channel(served.grpc_url) as channel:
        for method, field in GRPC_NAME_FIELDS.items():
            message = bytes([field << 3 | 2, len(raw_name)]) + raw_name  # a length-delimited string field
            with pytest.raises(grpc.RpcError) as caught:
                channel.unary_unary(f"/inference.GRPCInferenceService/{method}")(message, timeout=10)
            assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.INTERNAL,
                                                                     "Unable to parse request"), method
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        assert list(stream(iter([bytes([1 << 3 | 2, len(raw_name)]) + raw_name]), timeout=10)) == []
    assert_serves(served)


def test_grpc_stream_answers_invalid_names_in_the_stream(served):
    with grpc.insecure_channel(served.grpc_url) as channel:
        stream = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer
        requests = [service_pb2.ModelInferRequest(model_name=name, id=str(i)) for i, name in enumerate(BAD_GRPC_NAMES)]
        responses = list(stream(iter(requests), timeout=10))
    assert len(responses) == len(BAD_GRPC_NAMES)
    assert all(r.error_message.startswith("invalid model name") for r in responses), responses
    assert_serves(served)


def test_tritonclient_sees_400_for_a_dotdot_model(served):
    with httpclient.InferenceServerClient(served.http_url) as client:
        with pytest.raises(InferenceServerException, match="invalid model name") as caught:
            client.get_model_metadata("..")
        assert caught.value.status() == "400"


def fp16_binary_request(size0: int, extra: bytes = b"") -> tuple[bytes, dict]:
    header = json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "FP16", "shape": [1, 4], "parameters": {"binary_data_size": size0}},
        {"name": "INPUT1", "datatype": "FP16", "shape": [1, 4], "parameters": {"binary_data_size": 8}}]}).encode()
    return header + b"\0" * (size0 + 8) + extra, {"Inference-Header-Content-Length": str(len(header))}


@pytest.mark.parametrize("body,headers,text", [
    (*fp16_binary_request(13), "input byte size mismatch for input 'INPUT0'"),
    (*fp16_binary_request(6), "input byte size mismatch for input 'INPUT0'"),
    (*fp16_binary_request(8, b"\0"), "unexpected additional input data"),
    (b"", {"Inference-Header-Content-Length": "0"}, "Raw request must only have 1 input"),
    (b"\0" * 13, {"Inference-Header-Content-Length": "0"}, "Raw request must only have 1 input"),
])
def test_binary_requests_with_wrong_byte_counts_are_400(served, body, headers, text):
    status, reply = http_raw(served, "POST", "/v2/models/add_sub_fp16/infer", body, headers)
    assert status == 400 and text in json.loads(reply)["error"]


def test_json_data_that_does_not_fill_its_shape_is_400(served):
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1 << 20, 1 << 20], "data": [1]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}).encode()
    status, reply = http_raw(served, "POST", "/v2/models/add_sub/infer", body)
    assert status == 400
    assert "shape does not match true shape for input 'INPUT0'" in json.loads(reply)["error"]
    assert "1099511627776 elements, 'data' holds 1" in json.loads(reply)["error"]


NOT_UTF8 = np.array([[b"\xff\xfe", b"ok"]], dtype=object)


def test_bytes_that_are_not_utf8_to_a_string_model_are_400_over_http(served):
    with httpclient.InferenceServerClient(served.http_url) as client:
        for binary in (True, False):
            tensor = httpclient.InferInput("TEXT", [1, 2], "BYTES")
            if binary:
                tensor.set_data_from_numpy(NOT_UTF8)
            else:  # JSON carries text only: the same bytes through a raw binary body
                continue
            with pytest.raises(InferenceServerException, match="element 0 of input 'TEXT'.*not UTF-8") as caught:
                client.infer("echo_bytes", [tensor])
            assert caught.value.status() == "400"
        tensor = httpclient.InferInput("TEXT", [1, 2], "BYTES")
        tensor.set_data_from_numpy(np.array([["é", "ok"]], dtype=object), binary_data=False)
        assert client.infer("echo_bytes", [tensor]).as_numpy("TEXT_OUT").tolist() == [["é".encode(), b"ok"]]


def test_bytes_that_are_not_utf8_to_a_string_model_are_invalid_argument_over_grpc(served):
    client = grpcclient.InferenceServerClient(served.grpc_url)
    try:
        tensor = grpcclient.InferInput("TEXT", [1, 2], "BYTES")
        tensor.set_data_from_numpy(NOT_UTF8)
        with pytest.raises(InferenceServerException, match="not UTF-8") as caught:
            client.infer("echo_bytes", [tensor])
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    finally:
        client.close()
    assert_serves(served)


def test_grpc_raw_contents_with_wrong_byte_counts_are_invalid_argument(served):
    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for sizes in ((13, 8), (0, 8), (8,)):
            request = service_pb2.ModelInferRequest(model_name="add_sub_fp16")
            for name in ("INPUT0", "INPUT1"):
                request.inputs.add(name=name, datatype="FP16", shape=[1, 4])
            request.raw_input_contents.extend(b"\0" * size for size in sizes)
            with pytest.raises(grpc.RpcError) as caught:
                stub.ModelInfer(request, timeout=10)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert_serves(served)


# ---- memory bounded by what the client sent ----------------------------------------------------
def resident_bytes() -> int:
    """This process's resident memory (the server runs in it, on a thread)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


HUGE = [1, 1 << 40]


def binary_request(name: str, datatype: str, shape: list, data: bytes) -> tuple[bytes, dict]:
    header = json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": shape,
                                     "parameters": {"binary_data_size": len(data)}}]}).encode()
    return header + data, {"Inference-Header-Content-Length": str(len(header))}


@pytest.mark.parametrize("model,name,datatype,shape,data,numbers", [
    ("echo_bytes", "TEXT", "BYTES", HUGE, b"\2\0\0\0ab", ("expected 1099511627776 string elements", "got 1")),
    ("echo_bytes", "TEXT", "BYTES", [1, 3], b"\0\0\0\0", ("expected 3 string elements", "got 1")),
    ("add_sub", "INPUT0", "FP32", HUGE, b"\0" * 16, ("Expected 4398046511104", "got 16")),
    ("add_sub", "INPUT0", "FP32", [0, 1 << 60, 1 << 60], b"", ("declares more than",)),
    ("add_sub", "INPUT0", "FP32", [1] * 40, b"\0" * 4, ("40 dimensions",)),
])
def test_declared_shapes_are_held_against_the_bytes_sent_over_http(served, model, name, datatype, shape, data,
                                                                   numbers):
    before = resident_bytes()
    body, headers = binary_request(name, datatype, shape, data)
    for _ in range(20):
        status, reply = http_raw(served, "POST", f"/v2/models/{model}/infer", body, headers)
        assert status == 400, reply
        text = json.loads(reply)["error"]
        assert f"input '{name}'" in text and all(number in text for number in numbers), text
    assert resident_bytes() - before < 64 << 20
    assert_serves(served)


def test_declared_shapes_are_held_against_the_bytes_sent_over_grpc(served):
    before = resident_bytes()
    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for shape, raw, typed, numbers in ((HUGE, b"\2\0\0\0ab", None, ("expected 1099511627776 string elements",
                                                                         "got 1")),
                                           (HUGE, None, [b"ab"], ("expected 1099511627776 string elements",
                                                                  "got 1")),
                                           ([1 << 62, 1 << 62], b"", None, ("declares more than",))):
            request = service_pb2.ModelInferRequest(model_name="echo_bytes")
            tensor = request.inputs.add(name="TEXT", datatype="BYTES", shape=shape)
            if raw is not None:
                request.raw_input_contents.append(raw)
            else:
                tensor.contents.bytes_contents.extend(typed)
            for _ in range(20):
                with pytest.raises(grpc.RpcError) as caught:
                    stub.ModelInfer(request, timeout=10)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "input 'TEXT'" in caught.value.details()
                assert all(number in caught.value.details() for number in numbers), caught.value.details()
    assert resident_bytes() - before < 64 << 20
    assert_serves(served)


def test_a_shared_memory_region_bounds_the_declared_shape(served):
    import tritonclient.utils.shared_memory as shm

    handle = shm.create_shared_memory_region("hostile_bytes", "/tritonctl_hostile_bytes", 16)
    client = httpclient.InferenceServerClient(served.http_url)
    try:
        shm.set_shared_memory_region(handle, [np.frombuffer(b"\2\0\0\0ab\2\0\0\0cd\0\0\0\0", np.uint8)])
        client.register_system_shared_memory("hostile_bytes", "/tritonctl_hostile_bytes", 16)
        tensor = httpclient.InferInput("TEXT", HUGE, "BYTES")
        tensor.set_shared_memory("hostile_bytes", 16)
        with pytest.raises(InferenceServerException, match="expected 1099511627776 string elements.*got 3") as caught:
            client.infer("echo_bytes", [tensor])
        assert caught.value.status() == "400"
    finally:
        client.unregister_system_shared_memory("hostile_bytes")
        client.close()
        shm.destroy_shared_memory_region(handle)
    assert_serves(served)


# ---- request fields of the wrong type or shape: Triton's texts, as 400 ------------------------
NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NOT_BOOL = "attempt to access JSON non-boolean as boolean"
NOT_STRING = "attempt to access JSON non-string as string"
NOT_ARRAY = "attempt to access JSON non-array as array"


def add_sub_doc(**changes) -> dict:
    doc = {"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
                      for name in ("INPUT0", "INPUT1")]}
    doc.update(changes)
    return doc


def with_input0(**changes) -> dict:
    doc = add_sub_doc()
    doc["inputs"][0].update(changes)
    return doc


def without_input0_field(field: str) -> dict:
    doc = add_sub_doc()
    del doc["inputs"][0][field]
    return doc


def binary_input0(size) -> dict:
    doc = without_input0_field("data")
    doc["inputs"][0]["parameters"] = {"binary_data_size": size}
    return doc


def post_infer(served, doc, headers: dict | None = None, path: str = "/v2/models/add_sub/infer"):
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    status, reply = http_raw(served, "POST", path, body, headers)
    return status, json.loads(reply) if reply else None


@pytest.mark.parametrize("doc,text", [
    (add_sub_doc(id=5), f"Unable to parse 'id': {NOT_STRING}"),
    (add_sub_doc(parameters=[1]), "failed to get request params.: attempt to get members for non-object"),
    (add_sub_doc(parameters={"priority": "x"}), f"Unable to parse 'priority': {NOT_UINT}"),
    (add_sub_doc(parameters={"priority": -1}), f"Unable to parse 'priority': {NOT_UINT}"),
    (add_sub_doc(parameters={"timeout": 1.5}), f"Unable to parse 'timeout': {NOT_UINT}"),
    (add_sub_doc(parameters={"binary_data_output": "yes"}), f"Unable to parse 'binary_data_output': {NOT_BOOL}"),
    (add_sub_doc(parameters={"sequence_id": 1.5}), f"Unable to parse 'sequence_id': {NOT_STRING}"),
    (add_sub_doc(parameters={"custom": None}),
     "parameter 'custom' has invalid type. It should be either 'int', 'bool', or 'string'."),
    (add_sub_doc(parameters={"custom": {"a": 1}}),
     "parameter 'custom' has invalid type. It should be either 'int', 'bool', or 'string'."),
    ({}, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    ([1], "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    (add_sub_doc(inputs={}), f"Unable to parse 'inputs': {NOT_ARRAY}"),
    (add_sub_doc(inputs=[1]), "Input must set only one of the following fields: 'data', 'binary_data_size' in "
                              "'parameters', 'shared_memory_region' in 'parameters'. But no field is set"),
    (with_input0(name=5), f"Unable to parse 'name': {NOT_STRING}"),
    (without_input0_field("name"), "Unable to parse 'name': attempt to access non-existing object member 'name'"),
    (with_input0(datatype=5), f"Unable to parse 'datatype': {NOT_STRING}"),
    (with_input0(datatype="FLOAT"), "invalid datatype for input INPUT0"),
    (with_input0(shape=4), f"Unable to parse 'shape': {NOT_ARRAY}"),
    (with_input0(data=1), f"Unable to parse 'data': {NOT_ARRAY}"),
    (with_input0(data={"a": 1}), f"Unable to parse 'data': {NOT_ARRAY}"),
    (binary_input0("16"), f"Unable to parse 'binary_data_size': {NOT_UINT}"),
    (add_sub_doc(outputs={"name": "OUTPUT0"}), f"Unable to parse 'outputs': {NOT_ARRAY}"),
    (add_sub_doc(outputs=["OUTPUT0"]), "Unable to parse 'name': attempt to access non-existing object member 'name'"),
    (add_sub_doc(outputs=[{}]), "Unable to parse 'name': attempt to access non-existing object member 'name'"),
    (add_sub_doc(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": "true"}}]),
     f"Unable to parse 'binary_data': {NOT_BOOL}"),
    (add_sub_doc(outputs=[{"name": "OUTPUT0", "parameters": {"classification": "2"}}]),
     f"Unable to set 'classification': {NOT_UINT}"),
    (add_sub_doc(outputs=[{"name": "OUTPUT0", "parameters": {"classification": -1}}]),
     f"Unable to set 'classification': {NOT_UINT}"),
    (add_sub_doc(inputs=add_sub_doc()["inputs"] * 2), "[request id: <id_unknown>] input 'INPUT0' already exists in "
                                                      "request"),
])
def test_json_fields_of_the_wrong_type_get_tritons_text_as_400(served, doc, text):
    assert post_infer(served, doc) == (400, {"error": text})
    assert_serves(served)


def test_json_data_elements_of_the_wrong_type_start_with_tritons_text(served):
    status, reply = post_infer(served, with_input0(data=["1", "2", "3", "4"]))
    assert status == 400
    assert reply["error"].startswith("Unable to parse 'data': attempt to access JSON non-number as double (")


def test_json_data_nested_in_any_mix_is_read_row_major(served):
    status, reply = post_infer(served, with_input0(data=[1, [2, [3]], 4]))
    assert status == 200 and reply["outputs"][0]["data"] == [2, 4, 6, 8]


def test_input_parameters_that_are_not_an_object_are_ignored(served):
    status, reply = post_infer(served, with_input0(parameters=[1]))
    assert status == 200 and reply["outputs"][0]["data"] == [2, 4, 6, 8]


def test_an_output_asked_for_twice_comes_back_once_as_first_asked(served):
    doc = add_sub_doc(outputs=[{"name": "OUTPUT0"}, {"name": "OUTPUT0", "parameters": {"binary_data": True}}])
    status, reply = post_infer(served, doc)
    assert status == 200 and [o["name"] for o in reply["outputs"]] == ["OUTPUT0"]
    assert reply["outputs"][0]["data"] == [2, 4, 6, 8]


BINARY_HEADER = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 4],
                                        "parameters": {"binary_data_size": 16}}
                                       for name in ("INPUT0", "INPUT1")]}).encode()
BINARY_BODY = BINARY_HEADER + b"\0" * 32
RAW_REFUSAL = ("[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 "
               "inputs in 'add_sub' model configuration")


@pytest.mark.parametrize("value,text", [
    ("-1", f"inference header size should be in range (0, {len(BINARY_BODY)}), got: -1"),
    (str(len(BINARY_BODY) + 1), f"inference header size should be in range (0, {len(BINARY_BODY)}), got: "
                                f"{len(BINARY_BODY) + 1}"),
    ("99999999999999999999999", f"inference header size should be in range (0, {len(BINARY_BODY)}), got: "
                                "99999999999999999999999"),
    ("abc", RAW_REFUSAL),  # read as C's atoi reads it: no digits is 0, a raw request
    ("", RAW_REFUSAL),
])
def test_inference_header_content_length_is_read_as_triton_reads_it(served, value, text):
    status, reply = post_infer(served, BINARY_BODY, {"Inference-Header-Content-Length": value})
    assert (status, reply) == (400, {"error": text})


def test_inference_header_content_length_with_blanks_and_a_tail_is_its_leading_number(served):
    status, reply = post_infer(served, BINARY_BODY, {"Inference-Header-Content-Length": f" {len(BINARY_HEADER)}xyz"})
    assert status == 200 and reply["outputs"][0]["data"] == [0, 0, 0, 0]


def test_an_empty_body_without_a_header_length_is_a_raw_request(served):
    assert post_infer(served, b"") == (400, {"error": RAW_REFUSAL})


def test_an_empty_compressed_body_is_nothing_to_decompress(served):
    assert post_infer(served, b"", {"Content-Encoding": "gzip"}) == (400, {"error": "nothing to be decompressed"})


@pytest.mark.parametrize("accept,encoding", [("deflate;q=0", None), ("gzip;q=0", None), ("deflate, gzip", "deflate"),
                                             ("gzip;q=0.5, deflate;q=0.8", "deflate"), ("identity, gzip", None),
                                             ("br", None), ("gzip", "gzip")])
def test_reply_compression_follows_accept_encoding_weights_as_triton(served, accept, encoding):
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", "/v2/models/add_sub/infer", json.dumps(add_sub_doc()).encode(),
                     {"Accept-Encoding": accept})
        response = conn.getresponse()
        response.read()
        assert response.status == 200 and response.getheader("Content-Encoding") == encoding
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/v2/", "/v2/health/ready/", "/v2/models/add_sub/", "/v2/models/add_sub/ready/",
                                  "/v2/models/add_sub/versions/1/"])
def test_a_path_with_a_trailing_slash_matches_no_route(served, path):
    assert http_raw(served, "GET", path) == (404, b'{"error":"Not Found"}')


HUGE_VERSION = "99999999999999999999"
VERSION_REFUSAL = (f"failed to get model version from specified version string '{HUGE_VERSION}' (details: stol), "
                   "version should be an integral value > 0")


@pytest.mark.parametrize("path", [f"/v2/models/add_sub/versions/{HUGE_VERSION}",
                                  f"/v2/models/add_sub/versions/{HUGE_VERSION}/ready"])
def test_a_version_past_int64_is_refused_in_tritons_words(served, path):
    status, reply = http_raw(served, "GET", path)
    assert (status, json.loads(reply)) == (400, {"error": VERSION_REFUSAL})


@pytest.mark.parametrize("path", ["/v2/repository/other/index", "/v2/repository/other/models/add_sub/load",
                                  "/v2/repository/other/models/add_sub/unload"])
def test_repository_calls_naming_a_repository_are_unsupported_over_http(served, path):
    status, reply = http_raw(served, "POST", path)
    assert (status, json.loads(reply)) == (501, {"error": "'repository_name' specification is not supported"})


def test_metadata_of_a_version_spelled_with_a_leading_zero_names_the_version(served):
    """Triton reads "01" as version 1 and lists it as "1"."""
    status, reply = http_raw(served, "GET", "/v2/models/add_sub/versions/01")
    assert status == 200 and json.loads(reply)["versions"] == ["1"]


# ---- gRPC inference requests Triton refuses, or reads its own way --------------------------------
FLOATS = np.arange(4, dtype=np.float32).tobytes()


def grpc_add_sub(raw: list | None = (FLOATS, FLOATS), names=("INPUT0", "INPUT1"), typed: tuple = ()):
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    for index, name in enumerate(names):
        tensor = request.inputs.add(name=name, datatype="FP32", shape=[1, 4])
        if index in typed:
            tensor.contents.fp32_contents.extend([0, 1, 2, 3])
    request.raw_input_contents.extend(raw or ())
    return request


def with_parameter(request, key: str, field: str | None, value=None, output: bool = False):
    params = request.outputs.add(name="OUTPUT0").parameters if output else request.parameters
    if field is None:
        params[key].SetInParent()
    else:
        setattr(params[key], field, value)
    return request


def grpc_infer(served, request):
    with grpc.insecure_channel(served.grpc_url) as channel:
        return service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=10)


@pytest.mark.parametrize("request_message,code,details", [
    (grpc_add_sub(raw=[FLOATS]), "INVALID_ARGUMENT",
     "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request."),
    (grpc_add_sub(raw=None), "INVALID_ARGUMENT",
     "unable to find data for input tensor 'INPUT0' for model 'add_sub' in request."),
    (grpc_add_sub(typed=(0,)), "INVALID_ARGUMENT",
     "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'add_sub'"),
    (grpc_add_sub(names=("INPUT0", "INPUT0")), "INVALID_ARGUMENT",
     "[request id: <id_unknown>] input 'INPUT0' already exists in request"),
    (with_parameter(grpc_add_sub(), "priority", "int64_param", -1), "INVALID_ARGUMENT",
     "invalid value for 'priority', expected value >= 0."),
    (with_parameter(grpc_add_sub(), "timeout", "uint64_param", 5), "INVALID_ARGUMENT",
     "invalid value type for 'timeout' parameter, expected int64_param."),
    (with_parameter(grpc_add_sub(), "custom", None), "INVALID_ARGUMENT",
     "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param."),
    (with_parameter(grpc_add_sub(), "classification", "string_param", "2", output=True), "INVALID_ARGUMENT",
     "invalid value type for 'classification' parameter, expected int64_param"),
    (with_parameter(grpc_add_sub(), "classification", "int64_param", -1, output=True), "INVALID_ARGUMENT",
     "invalid value for 'classification' parameter, expected >= 0"),
    (service_pb2.ModelInferRequest(model_name="", raw_input_contents=[FLOATS]), "NOT_FOUND",
     "Request for unknown model: '' is not found"),
    (service_pb2.ModelInferRequest(model_name="add_sub", model_version=HUGE_VERSION), "INVALID_ARGUMENT",
     VERSION_REFUSAL),
    (service_pb2.ModelInferRequest(model_name="add_sub", model_version="-1"), "INVALID_ARGUMENT",
     "invalid model version specified '-1' , version should be an integral value > 0"),
])
def test_grpc_inference_refusals_in_tritons_words(served, request_message, code, details):
    with pytest.raises(grpc.RpcError) as caught:
        grpc_infer(served, request_message)
    assert (caught.value.code().name, caught.value.details()) == (code, details)
    assert_serves(served)


def test_grpc_raw_contents_past_the_inputs_are_left_unread(served):
    reply = grpc_infer(served, grpc_add_sub(raw=[FLOATS, FLOATS, b"extra"]))
    assert len(reply.raw_output_contents) == 2


def test_grpc_an_output_asked_for_twice_comes_back_once(served):
    request = grpc_add_sub()
    request.outputs.add(name="OUTPUT1")
    request.outputs.add(name="OUTPUT1")
    reply = grpc_infer(served, request)
    assert [o.name for o in reply.outputs] == ["OUTPUT1"] and len(reply.raw_output_contents) == 1


def test_grpc_typed_contents_of_the_wrong_count_are_a_byte_size_mismatch(served):
    request = grpc_add_sub(raw=None, typed=(0, 1))
    del request.inputs[0].contents.fp32_contents[-1]
    with pytest.raises(grpc.RpcError) as caught:
        grpc_infer(served, request)
    assert caught.value.details() == ("[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for "
                                      "model 'add_sub'. Expected 16, got 12")


def test_grpc_calls_that_name_no_model(served):
    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ModelReady(service_pb2.ModelReadyRequest(name=""), timeout=10).ready is False
        for call, message in ((stub.ModelMetadata, service_pb2.ModelMetadataRequest(name="")),
                              (stub.ModelConfig, service_pb2.ModelConfigRequest(name=""))):
            with pytest.raises(grpc.RpcError) as caught:
                call(message, timeout=10)
            assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.NOT_FOUND,
                                                                     "Request for unknown model: '' is not found")


def live_with_header(served, size: int):
    """ServerLive with one header of ``size`` bytes, on a channel of its own: its status code."""
    with grpc.insecure_channel(served.grpc_url) as channel:
        try:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ServerLive(
                service_pb2.ServerLiveRequest(), metadata=[("x-big", "a" * size)], timeout=10)
        except grpc.RpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


def test_grpc_metadata_up_to_tritons_hard_limit_can_be_served_and_past_it_is_resource_exhausted(served):
    # Past gRPC's 8 KiB soft limit a call may be refused at random (Triton's gRPC too); under
    # its 16 KiB hard limit one of a few tries is served.
    assert grpc.StatusCode.OK in [live_with_header(served, 9000) for _ in range(6)]
    assert live_with_header(served, 17000) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert live_with_header(served, 10) == grpc.StatusCode.OK


# ---- HTTP methods Triton routes like any other --------------------------------------------------
def raw_exchange(served, data: bytes) -> bytes:
    """Everything the server sends back to ``data`` until it closes the connection or goes quiet."""
    host, port = served.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except socket.timeout:
            pass
    return received


def uvicorn_refuses_unknown_methods(served) -> None:
    if served.runtime.options.http_transport == "uvicorn":
        pytest.skip("uvicorn answers a method token it does not know 400 before any route")


@pytest.mark.parametrize("method,path,status", [("TRACE", "/v2/health/ready", 405), ("TRACE", "/v2/nonsense", 404),
                                                ("FOO", "/v2/health/ready", 405), ("PROPFIND", "/v2", 405),
                                                ("FOO", "/v2/models/add_sub/infer", 405),
                                                ("FOO", "/v2/nonsense", 404)])
def test_unusual_methods_get_tritons_json_404_or_405(served, method, path, status):
    if method != "TRACE":
        uvicorn_refuses_unknown_methods(served)
    reply = socket_raw(served, f"{method} {path} HTTP/1.1".encode())
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode())
    assert body == (b'{"error":"Method Not Allowed"}' if status == 405 else b'{"error":"Not Found"}')


def test_connect_is_routed_and_its_reply_says_where_its_body_ends(served):
    uvicorn_refuses_unknown_methods(served)
    reply = raw_exchange(served, b"CONNECT localhost:80 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 404") and b"\r\ncontent-length: 21\r\n" in reply.lower()
    assert reply.endswith(b'\r\n\r\n{"error":"Not Found"}')


@pytest.mark.parametrize("method", ["TRACE", "FOO", "HEAD"])
def test_a_body_sent_with_a_method_that_takes_none_is_never_read_as_the_next_request(served, method):
    reply = raw_exchange(served, f"{method} /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
                                 "hello".encode() + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    statuses = [line[line.index(b"HTTP/1.1 "):] for line in reply.split(b"\r\n") if b"HTTP/1.1 " in line]
    assert statuses[0].startswith(b"HTTP/1.1 4")
    assert all(status.startswith(b"HTTP/1.1 200") for status in statuses[1:])  # read, or the connection closed
    assert_serves(served)


# ---- the header readers, over any bytes ----------------------------------------------------------
@given(st.binary(max_size=40), st.integers(0, 1 << 40))
def test_the_header_length_reader_gives_a_length_within_the_body_or_tritons_refusal(value, body_size):
    try:
        length = inference_header_length(value, body_size)
    except ServeError as exc:
        assert exc.message.startswith(f"inference header size should be in range (0, {body_size}), got: ")
    else:
        assert 0 <= length <= body_size


@given(st.sampled_from(["", " ", "\t ", "+"]), st.integers(0, (1 << 31) - 1), st.sampled_from(["", "x", " 7", ".5"]))
def test_the_header_length_reader_takes_the_leading_number(blanks, number, tail):
    assert inference_header_length(f"{blanks}{number}{tail}".encode(), 1 << 31) == number


@given(st.binary(max_size=60))
def test_accept_encoding_of_any_bytes_picks_gzip_deflate_or_nothing(value):
    assert _accepted_encoding([(b"accept-encoding", value)]) in (None, b"gzip", b"deflate")
