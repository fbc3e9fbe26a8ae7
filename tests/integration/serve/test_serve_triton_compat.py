"""Behaviour that Triton's own QA suites (qa/L0_input_validation, L0_http, L0_parameters,
L0_metrics) and its users' clients match, checked against the texts and statuses a real Triton
2.51 gave for the same requests on the same models (docs/compatibility.md). Every test runs over
both transports of both protocols (the ``transports`` fixture); where a behaviour exists in one
protocol only (raw binary bodies, chunked bodies, JSON shapes), the test says so."""

from __future__ import annotations

import http.client
import json
import re
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from helpers.compat_models import compat_repository
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

MODULES = pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = compat_repository(tmp_path_factory.mktemp("compat") / "repo")
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def client_for(module, served):
    return module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)


def ones(module, *names: str, shape=(1,)):
    tensors = []
    for name in names:
        tensor = module.InferInput(name, list(shape), "FP32")
        tensor.set_data_from_numpy(np.ones(shape, np.float32))
        tensors.append(tensor)
    return tensors


def post(served, path: str, body, headers: dict) -> tuple[int, bytes, dict]:
    """One HTTP request as written: bytes are sent with the headers given (a Content-Length is
    added unless given), an iterable of bytes is sent chunked by http.client."""
    host, port = served.http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        if isinstance(body, bytes):
            headers = {"Content-Length": str(len(body)), **headers}
            connection.request("POST", path, body=body, headers=headers)
        else:
            connection.request("POST", path, body=body, headers=headers, encode_chunked=True)
        response = connection.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def binary_tail(status: int, body: bytes, headers: dict) -> bytes:
    assert status == 200, body
    return body[int(headers["inference-header-content-length"]):]


RAW = {"Inference-Header-Content-Length": "0"}


# ---- input counts and names (qa/L0_input_validation) ----------------------------------------
@MODULES
@pytest.mark.parametrize("model,given,expected", [
    ("input_optional", [], "expected number of inputs between 3 and 4 but got 0 inputs for model 'input_optional'. "
     "Got input(s) [], but missing required input(s) ['INPUT0','INPUT1','INPUT2']. Please provide all required "
     "input(s)."),
    ("input_optional", ["INPUT0"], "expected number of inputs between 3 and 4 but got 1 inputs for model "
     "'input_optional'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1','INPUT2']. Please provide "
     "all required input(s)."),
    ("input_all_required", ["INPUT0"], "expected 3 inputs but got 1 inputs for model 'input_all_required'. Got "
     "input(s) ['INPUT0'], but missing required input(s) ['INPUT1','INPUT2']. Please provide all required input(s)."),
])
def test_missing_inputs_are_named_as_triton_names_them(served, module, model, given, expected):
    """Triton 2.51, both protocols: "[request id: <id_unknown>] expected number of inputs between 3
    and 4 but got 0 inputs for model 'input_optional'. Got input(s) [], but missing required
    input(s) ['INPUT0','INPUT1','INPUT2']. ..." (400 / INVALID_ARGUMENT); "expected N inputs"
    when no input is optional; names listed without spaces."""
    client = client_for(module, served)
    with pytest.raises(InferenceServerException) as caught:
        client.infer(model, ones(module, *given))
    assert caught.value.message() == "[request id: <id_unknown>] " + expected
    assert caught.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    answer = client.infer("input_optional", ones(module, "INPUT0", "INPUT1", "INPUT2"))
    assert answer.as_numpy("OUTPUT0").tolist() == [1.0]


@MODULES
def test_a_shape_refusal_of_a_batching_model_carries_tritons_note(served, module):
    """Triton 2.51: "unexpected shape for input 'INPUT0' for model 'onnx_zero_1_float32'. Expected
    [-1,-1], got [2]. NOTE: Setting a non-zero max_batch_size in the model config requires a batch
    dimension to be prepended to each input shape. ..."; for a model without batching the text
    ends after "got [1,1]. " with no note."""
    client = client_for(module, served)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("onnx_zero_1_float32", ones(module, "INPUT0", shape=(2,)))
    assert caught.value.message() == (
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'onnx_zero_1_float32'. Expected "
        "[-1,-1], got [2]. NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
        "to be prepended to each input shape. If you want to specify the full shape including the batch dim in your "
        "input dims config, try setting max_batch_size to zero. See the model configuration docs for more info on "
        "max_batch_size.")
    with pytest.raises(InferenceServerException) as caught:
        client.infer("input_all_required", ones(module, "INPUT0", "INPUT1", "INPUT2", shape=(1, 1)))
    assert caught.value.message() == ("[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model "
                                      "'input_all_required'. Expected [1], got [1,1]. ")


# ---- raw binary requests and BYTES framing (qa/L0_http/http_test.py) --------------------------
def test_raw_binary_requests_are_refused_with_tritons_texts(served):
    """HTTP only (gRPC has no raw body). Triton 2.51 (400 each): "[request id: <id_unknown>] Raw
    request must only have 1 input (found 1) to be deduced but got 3 inputs in
    'onnx_zero_3_float32' model configuration"; "For BYTE datatype raw input 'INPUT0', the model
    must have input shape [1]"; "The shape of the raw input 'INPUT0' can not be deduced because
    there are more than one variable-sized dimension"."""
    cases = [("onnx_zero_3_float32", np.arange(24, dtype=np.float32).tobytes(),
              "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 3 "
              "inputs in 'onnx_zero_3_float32' model configuration"),
             ("onnx_zero_1_object", b"427",
              "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"),
             ("onnx_zero_1_float16", np.ones(4, np.float16).tobytes(),
              "The shape of the raw input 'INPUT0' can not be deduced because there are more than one "
              "variable-sized dimension")]
    for model, body, text in cases:
        status, reply, _ = post(served, f"/v2/models/{model}/infer", body, RAW)
        assert status == 400 and text in json.loads(reply)["error"], reply
    data = np.arange(8, dtype=np.float32).tobytes()
    assert binary_tail(*post(served, "/v2/models/onnx_zero_1_float32/infer", data, RAW)) == data


def test_a_raw_bytes_body_is_the_one_element_as_sent(served):
    """HTTP only. Triton 2.51 takes the whole raw body of a BYTES model as its one element and adds
    no framing of its own: "427" comes back as b"\\x03\\0\\0\\0427" (L0_http test_byte); a body that
    starts with a length prefix is taken as is too, prefix included."""
    tail = binary_tail(*post(served, "/v2/models/onnx_zero_1_object_1_element/infer", b"427", RAW))
    assert tail == b"\x03\x00\x00\x00427"
    tail = binary_tail(*post(served, "/v2/models/onnx_zero_1_object_1_element/infer", b"\x03\x00\x00\x00427", RAW))
    assert tail == b"\x07\x00\x00\x00\x03\x00\x00\x00427"


BYTES_FRAMING = [  # (binary data for a [1, 1] BYTES input, Triton 2.51's text)
    (b"427", "incomplete string length indicator for inference input 'INPUT0' for model "
     "'onnx_zero_1_object_1_element', expecting 4 bytes but only 3 bytes available. Please make sure the string "
     "length indicator is in one buffer."),
    (b"\x09\x00\x00\x00427", "incomplete string data for inference input 'INPUT0', expecting string of length 9 but "
     "only 3 bytes available"),
    (b"\x01\x00\x00\x00a\x01\x00\x00\x00b", "unexpected number of string elements 2 for inference input 'INPUT0' for "
     "model 'onnx_zero_1_object_1_element', expecting 1"),
]


@pytest.mark.parametrize("data,text", BYTES_FRAMING)
def test_bytes_data_without_its_length_prefix_is_refused_over_http(served, data, text):
    """A BYTES input sent as binary data must carry each element's 4-byte length: Triton 2.51
    answers 400 with these texts."""
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(data)}}]}).encode()
    status, reply, _ = post(served, "/v2/models/onnx_zero_1_object_1_element/infer", header + data,
                            {"Inference-Header-Content-Length": str(len(header))})
    assert status == 400 and text in json.loads(reply)["error"], reply


@pytest.mark.parametrize("data,text", BYTES_FRAMING)
def test_bytes_data_without_its_length_prefix_is_refused_over_grpc(served, data, text):
    """The same BYTES data as raw_input_contents: Triton 2.51 answers INVALID_ARGUMENT, same texts."""
    with grpc.insecure_channel(served.grpc_url) as channel:
        request = service_pb2.ModelInferRequest(model_name="onnx_zero_1_object_1_element")
        request.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, 1])
        request.raw_input_contents.append(data)
        with pytest.raises(grpc.RpcError) as caught:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and text in caught.value.details()


# ---- chunked request bodies and JSON shapes (HTTP only) ----------------------------------------
def test_chunked_request_bodies_are_read(served):
    """Triton 2.51 reads a chunked body (200), also when the client sends a Content-Length beside
    ``Transfer-Encoding: chunked`` with a body it chunked itself (what ``requests`` sends in
    L0_http's test_content_encoding_chunked_manually): Transfer-Encoding wins."""
    data = np.arange(8, dtype=np.float32).tobytes()
    chunked = f"{len(data):X}\r\n".encode() + data + b"\r\n0\r\n\r\n"
    reply = post(served, "/v2/models/onnx_zero_1_float32/infer", chunked, {**RAW, "Transfer-Encoding": "chunked"})
    assert binary_tail(*reply) == data
    reply = post(served, "/v2/models/onnx_zero_1_float32/infer", iter([data[:10], data[10:]]), RAW)
    assert binary_tail(*reply) == data
    doc = [b'{"inputs":[{"name":"INPUT0","shape":[1,2],', b'"datatype":"FP32","data":[1,2]}]}']
    status, reply, _ = post(served, "/v2/models/onnx_zero_1_float32/infer", iter(doc),
                            {"Content-Type": "application/json"})
    assert status == 200 and json.loads(reply)["outputs"][0]["data"] == [1.0, 2.0]


@pytest.mark.parametrize("shape", [[2, -5], [-1], [1, 2.5], [1, "a"], [1, True]])
def test_a_shape_that_is_not_unsigned_integers_gets_tritons_text_as_a_400(served, shape):
    """HTTP JSON only. Triton 2.51 answers "Unable to parse 'shape': attempt to access JSON
    non-unsigned-integer as unsigned-integer" with status 500 (L0_http's test_negative_dimensions
    expects the 500). tritonctl gives the same text, then names the input, with 400: a client fault
    is never a 5xx here (docs/compatibility.md lists the difference)."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": [1.0]}]}).encode()
    status, reply, _ = post(served, "/v2/models/onnx_zero_1_float32/infer", body, {"Content-Type": "application/json"})
    error = json.loads(reply)["error"]
    assert status == 400, reply
    assert error.startswith("Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer")
    assert "input 'INPUT0' of model 'onnx_zero_1_float32'" in error


# ---- request parameters reach a Python model (qa/L0_parameters) ------------------------------
@MODULES
@pytest.mark.parametrize("parameters,values", [
    ({"key1": "value1", "key2": "value2"}, ["value1", "value2"]),
    ({"key1": 1, "key2": 2}, ["1", "2"]),
    ({"key1": 123.123, "key2": 321.321}, ["123.123", "321.321"]),
    ({"key1": True, "key2": "value2"}, ["True", "value2"]),
    ({"big": 1 << 40, "negative": -3}, [str(1 << 40), "-3"]),
])
def test_request_parameters_reach_the_model_with_their_values(served, module, parameters, values):
    """Triton 2.51 gives ``request.parameters()`` as compact JSON with each value's type
    (``{"key1":1,"key2":2}``), and a BYTES output made from an object array of such values holds
    each one's ``str()`` ("1", "123.123", "True"), over both protocols."""
    answer = client_for(module, served).infer("parameter", ones(module, "INPUT0"), parameters=parameters)
    keys = answer.as_numpy("key").astype(str).tolist()
    assert dict(zip(keys, answer.as_numpy("value").astype(str).tolist())) == dict(zip(parameters, values))
    text = answer.as_numpy("text")[0].decode()
    assert json.loads(text) == parameters and ", " not in text and '": ' not in text


# ---- BYTES outputs that are not UTF-8 -------------------------------------------------------
def test_a_non_utf8_bytes_output_requested_as_json_is_refused_as_with_triton(served):
    """Triton 2.51 writes a BYTES element into the JSON response as its bytes, so a response that
    asks for it as JSON is not UTF-8 and tritonclient refuses it: "Failed to encode using UTF-8.
    Please use binary_data=True, if you want to pass a byte array." Binary data and gRPC carry the
    bytes intact."""
    expected = [b"\xff\xfeok", b'quote " and \\ \x01']
    client = httpclient.InferenceServerClient(served.http_url)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("not_utf8", ones(httpclient, "INPUT0"),
                     outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    assert "Failed to encode using UTF-8. Please use binary_data=True, if you want to pass a byte array." \
        in caught.value.message()
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}]}).encode()
    status, reply, _ = post(served, "/v2/models/not_utf8/infer", body, {"Content-Type": "application/json"})
    assert status == 200 and b'"data":["\xff\xfeok","quote \\" and \\\\ \\u0001"]' in reply
    assert json.loads(reply.decode("utf-8", errors="surrogateescape"))["outputs"][0]["data"][1] == expected[1].decode()
    answer = client.infer("not_utf8", ones(httpclient, "INPUT0"))
    assert answer.as_numpy("OUTPUT0").tolist() == expected
    grpc_answer = grpcclient.InferenceServerClient(served.grpc_url).infer("not_utf8", ones(grpcclient, "INPUT0"))
    assert grpc_answer.as_numpy("OUTPUT0").tolist() == expected


# ---- NaN and infinities in JSON (qa/L0_nan_inf) -----------------------------------------------
def test_non_finite_floats_travel_in_json_as_tritons_tokens(served):
    """HTTP JSON only (binary data and gRPC carry IEEE values). Triton 2.51 writes NaN, Infinity and
    -Infinity into a JSON response (not null) and reads them in a request, as rapidjson does; Python's
    json, and so tritonclient, reads them back as floats."""
    body = b'{"inputs":[{"name":"INPUT0","shape":[1],"datatype":"FP32","data":[NaN]}]}'
    status, reply, _ = post(served, "/v2/models/non_finite/infer", body, {"Content-Type": "application/json"})
    assert status == 200 and b'"data":[NaN,NaN,Infinity,-Infinity,1.5]' in reply, reply
    status, reply, _ = post(served, "/v2/models/non_finite/infer", body.replace(b"NaN", b'"NaN"'),
                            {"Content-Type": "application/json"})
    assert status == 400, reply
    client = httpclient.InferenceServerClient(served.http_url)
    tensor = httpclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.array([-np.inf], np.float32), binary_data=False)
    as_json = httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)
    answer = client.infer("non_finite", [tensor], outputs=[as_json])
    np.testing.assert_array_equal(answer.as_numpy("OUTPUT0"), np.array([-np.inf, np.nan, np.inf, -np.inf, 1.5]))


# ---- metrics (qa/L0_metrics) ----------------------------------------------------------------
@MODULES
def test_metric_labels_come_in_tritons_order(served, module):
    """Triton writes every metric's labels sorted by name, as prometheus-cpp does:
    ``nv_inference_request_failure{model="failing",reason="BACKEND",version="1"}``."""
    client = client_for(module, served)
    with pytest.raises(InferenceServerException):
        client.infer("failing", ones(module, "INPUT0"))
    text = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    assert re.search(r'^nv_inference_request_failure\{model="failing",reason="BACKEND",version="1"\} [1-9]',
                     text, re.MULTILINE), text
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert samples
    for line in (line for line in samples if "{" in line):  # the server-wide gauges have no labels
        names = re.findall(r'([a-z_]+)="', line[line.index("{"):line.index("}")])
        assert names == sorted(names), line
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert families.index("nv_inference_request_success") < families.index("nv_inference_request_failure")
