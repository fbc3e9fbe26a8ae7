"""``serve`` against the real Triton 2.51: the requests of Triton's QA cases that
docs/compatibility.md lists (L0_input_validation, L0_http, L0_parameters, L0_nan_inf,
L0_metrics) are sent to a real tritonserver and to ``tritonctl serve`` on the same model
repository, and both must answer the same: HTTP status and body, gRPC code and details, the
parameters a model sees, metric label order. The differences docs/compatibility.md explains are
the only ones allowed, each normalised by name below."""

from __future__ import annotations

import http.client
import json
import re
import urllib.request

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from helpers.compat_models import compat_repository
from helpers.triton_anchor import TritonServer, unavailable_reason
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

UNAVAILABLE = unavailable_reason()
pytestmark = [pytest.mark.triton, pytest.mark.slow,
              pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]

MODELS = ["onnx_zero_1_float32", "onnx_zero_3_float32", "onnx_zero_1_object_1_element", "onnx_zero_1_object",
          "onnx_zero_1_float16", "input_all_required", "input_optional", "parameter", "not_utf8", "non_finite",
          "failing"]
JSON = {"Content-Type": "application/json"}
# Headers forwarded as request parameters by both servers: none of the other cases' headers match.
FORWARD = "^x-fwd|^key1$|^triton_x$|^sequence_id$"
RAW = {"Inference-Header-Content-Length": "0"}


class Endpoints:
    """One server's HTTP, gRPC and metrics ports on 127.0.0.1."""

    def __init__(self, http_port: int, grpc_port: int, metrics_port: int):
        self.http_port, self.grpc_port, self.metrics_port = http_port, grpc_port, metrics_port

    def post(self, path: str, body, headers: dict) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=60)
        try:
            if isinstance(body, bytes):
                connection.request("POST", path, body=body, headers={"Content-Length": str(len(body)), **headers})
            else:
                connection.request("POST", path, body=body, headers=headers, encode_chunked=True)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def grpc_infer(self, request: service_pb2.ModelInferRequest, metadata=()) -> tuple[str, object]:
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            try:
                reply = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=60,
                                                                                      metadata=metadata)
            except grpc.RpcError as exc:
                return exc.code().name, exc.details()
        return "OK", list(reply.raw_output_contents)

    def metrics(self) -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30).read().decode()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(Triton 2.51, tritonctl serve), both serving the same repository, both forwarding the
    headers that FORWARD matches."""
    repo = compat_repository(tmp_path_factory.mktemp("qa") / "repo")
    forward = (f"--http-header-forward-pattern={FORWARD}", f"--grpc-header-forward-pattern={FORWARD}")
    with TritonServer(repo, tmp_path_factory.mktemp("triton-logs"), args=forward) as triton:
        for model in MODELS:
            assert triton.load(model, timeout_s=120).loaded, model
        options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, http_header_forward_pattern=FORWARD,
                               grpc_header_forward_pattern=FORWARD)
        with BackgroundServer(options) as served:
            runtime = served.runtime
            ours = Endpoints(runtime.http_port, runtime.grpc_port, runtime.metrics_port)
            yield Endpoints(triton.http_port, triton.grpc_port, triton.metrics_port), ours


def json_infer(inputs: list[dict], outputs: list[dict] | None = None) -> bytes:
    doc = {"inputs": inputs, **({"outputs": outputs} if outputs else {})}
    return json.dumps(doc).encode()


def fp32_input(name: str = "INPUT0", value: float = 1.0) -> dict:
    return {"name": name, "shape": [1], "datatype": "FP32", "data": [value]}


def binary_bytes_request(data: bytes) -> tuple[bytes, dict]:
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(data)}}]}).encode()
    return header + data, {"Inference-Header-Content-Length": str(len(header))}


FRAMING = [b"427", b"\x09\x00\x00\x00427", b"\x01\x00\x00\x00a\x01\x00\x00\x00b", b""]
CHUNKED = np.arange(8, dtype=np.float32).tobytes()

HTTP_CASES = {
    # L0_input_validation
    "missing inputs, optional ones declared": ("/v2/models/input_optional/infer", json_infer([fp32_input()]), JSON),
    "missing inputs, none given": ("/v2/models/input_optional/infer", json_infer([]), JSON),
    "missing inputs, all required": ("/v2/models/input_all_required/infer", json_infer([fp32_input()]), JSON),
    "shape without the batch dimension": ("/v2/models/onnx_zero_1_float32/infer",
                                          json_infer([{"name": "INPUT0", "shape": [2], "datatype": "FP32",
                                                       "data": [1.0, 2.0]}]), JSON),
    "shape of a model without batching": ("/v2/models/not_utf8/infer",
                                          json_infer([{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32",
                                                       "data": [[1.0]]}]), JSON),
    # L0_http
    "raw request, three inputs": ("/v2/models/onnx_zero_3_float32/infer",
                                  np.arange(24, dtype=np.float32).tobytes(), RAW),
    "raw request, BYTES of variable shape": ("/v2/models/onnx_zero_1_object/infer", b"427", RAW),
    "raw request, two variable dimensions": ("/v2/models/onnx_zero_1_float16/infer",
                                             np.ones(4, np.float16).tobytes(), RAW),
    "raw request, one BYTES element": ("/v2/models/onnx_zero_1_object_1_element/infer", b"427", RAW),
    "binary FP32, wrong byte count": ("/v2/models/onnx_zero_1_float32/infer", *(lambda header: (
        header + b"\0" * 12, {"Inference-Header-Content-Length": str(len(header))}))(json.dumps(
            {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                         "parameters": {"binary_data_size": 12}}]}).encode())),
    "raw request, FP32": ("/v2/models/onnx_zero_1_float32/infer", CHUNKED, RAW),
    "chunked with Content-Length": ("/v2/models/onnx_zero_1_float32/infer",
                                    f"{len(CHUNKED):X}\r\n".encode() + CHUNKED + b"\r\n0\r\n\r\n",
                                    {**RAW, "Transfer-Encoding": "chunked"}),
    "chunked": ("/v2/models/onnx_zero_1_float32/infer", (CHUNKED[:10], CHUNKED[10:]), RAW),
    **{f"BYTES without framing {i}": ("/v2/models/onnx_zero_1_object_1_element/infer", *binary_bytes_request(data))
       for i, data in enumerate(FRAMING)},
    **{f"shape {shape}": ("/v2/models/onnx_zero_1_float32/infer",
                          json_infer([{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": [1.0]}]), JSON)
       for shape in ([2, -5], [1, 2.5], [1, True])},
    # L0_nan_inf, L0_string_io
    "NaN and Infinity": ("/v2/models/non_finite/infer",
                         b'{"inputs":[{"name":"INPUT0","shape":[1],"datatype":"FP32","data":[NaN]}]}', JSON),
    "non-UTF-8 BYTES as JSON": ("/v2/models/not_utf8/infer", json_infer([fp32_input()]), JSON),
    "non-UTF-8 BYTES as binary": ("/v2/models/not_utf8/infer",
                                  json_infer([fp32_input()], [{"name": "OUTPUT0",
                                                               "parameters": {"binary_data": True}}]), JSON),
}

# docs/compatibility.md, "Differences": Triton answers a JSON shape that is not non-negative
# integers with 500, tritonctl with 400 and its text followed by what is wrong.
SHAPE_TEXT = "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"


def comparable(status: int, body: bytes, name: str) -> tuple:
    """(status, body as data): JSON bodies parsed (NaN tokens and raw bytes kept), binary tails kept."""
    text = body.decode("utf-8", errors="surrogateescape")
    try:
        header, tail = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return status, body
    if name.startswith("shape ") and "error" in header and header["error"].startswith(SHAPE_TEXT):
        return ("400 or 500" if status in (400, 500) else status), SHAPE_TEXT
    if "error" in header:
        return status, header["error"]
    return status, json.dumps(header, sort_keys=True), tail


@pytest.mark.parametrize("name", list(HTTP_CASES))
def test_http_answers_match_triton(servers, name):
    path, body, headers = HTTP_CASES[name]
    triton, ours = servers
    body = body if isinstance(body, bytes) else iter(body)
    expected = comparable(*triton.post(path, body, headers), name)
    body = HTTP_CASES[name][1] if isinstance(HTTP_CASES[name][1], bytes) else iter(HTTP_CASES[name][1])
    assert comparable(*ours.post(path, body, headers), name) == expected


@pytest.mark.parametrize("data", FRAMING + [b"\x03\x00\x00\x00427"])
def test_grpc_bytes_framing_matches_triton(servers, data):
    request = service_pb2.ModelInferRequest(model_name="onnx_zero_1_object_1_element")
    request.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, 1])
    request.raw_input_contents.append(data)
    triton, ours = servers
    assert ours.grpc_infer(request) == triton.grpc_infer(request)


def grpc_missing_inputs(model: str, names: list[str]) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model)
    for name in names:
        request.inputs.add(name=name, datatype="FP32", shape=[1])
        request.raw_input_contents.append(np.ones(1, np.float32).tobytes())
    return request


@pytest.mark.parametrize("model,names", [("input_optional", []), ("input_optional", ["INPUT0"]),
                                         ("input_all_required", ["INPUT0"])])
def test_grpc_missing_inputs_match_triton(servers, model, names):
    triton, ours = servers
    assert ours.grpc_infer(grpc_missing_inputs(model, names)) == triton.grpc_infer(grpc_missing_inputs(model, names))


PARAMETERS = [{"key1": "value1", "key2": "value2"}, {"key1": 1, "key2": 2}, {"key1": 123.123, "key2": 321.321},
              {"key1": True, "key2": "value2"}, {"big": 1 << 40, "negative": -3}]


@pytest.mark.parametrize("parameters", PARAMETERS, ids=range(len(PARAMETERS)))
def test_parameters_reach_the_model_as_with_triton(servers, parameters):
    """The parameters' JSON text and the model's outputs, over HTTP and gRPC; key order over gRPC
    follows Triton's protobuf map there (docs/compatibility.md), so JSON objects compare as dicts."""
    triton, ours = servers
    body = json.dumps({"inputs": [fp32_input()], "parameters": parameters}).encode()
    answers = []
    for server in (triton, ours):
        status, reply = server.post("/v2/models/parameter/infer", body, JSON)
        outputs = {o["name"]: o["data"] for o in json.loads(reply)["outputs"]}
        answers.append((status, dict(zip(outputs["key"], outputs["value"])), outputs["text"]))
    assert answers[1] == answers[0]
    assert answers[0][2] == [json.dumps(parameters, separators=(",", ":"))]
    replies = []
    for server in (triton, ours):
        request = grpc_missing_inputs("parameter", ["INPUT0"])
        for key, value in parameters.items():
            kind = {bool: "bool_param", int: "int64_param", float: "double_param", str: "string_param"}[type(value)]
            setattr(request.parameters[key], kind, value)
        code, contents = server.grpc_infer(request)
        replies.append((code, json.loads(contents[2][4:])))
    assert replies[1] == replies[0]


def test_forwarded_headers_reach_the_model_as_with_triton(servers):
    """--http/grpc-header-forward-pattern: the names as sent (HTTP), a value's trailing space, a
    header replacing the request's parameter of the same name, reserved names as plain
    parameters. Triton's JSON text then holds the replaced key twice (the model's json.loads keeps
    the last, the header's); here it is there once, with the header's value: compared as parsed."""
    triton, ours = servers
    body = json.dumps({"inputs": [fp32_input()], "parameters": {"key1": 5, "key2": "b"}}).encode()
    headers = {**JSON, "X-Fwd-Mixed": "v", "x-fwd-space": "ends in a space ", "key1": "from the header",
               "triton_x": "1", "sequence_id": "7", "Other": "not forwarded"}
    answers = []
    for server in (triton, ours):
        status, reply = server.post("/v2/models/parameter/infer", body, headers)
        outputs = {o["name"]: o["data"] for o in json.loads(reply)["outputs"]}
        answers.append((status, json.loads(outputs["text"][0])))
    assert answers[1] == answers[0] == (200, {"key1": "from the header", "key2": "b", "X-Fwd-Mixed": "v",
                                              "x-fwd-space": "ends in a space ", "triton_x": "1", "sequence_id": "7"})
    replies = []
    for server in (triton, ours):
        request = grpc_missing_inputs("parameter", ["INPUT0"])
        request.parameters["key1"].int64_param = 5
        code, contents = server.grpc_infer(request, metadata=(("x-fwd-a", "1 "), ("key1", "from the header"),
                                                              ("other", "not forwarded")))
        replies.append((code, json.loads(contents[2][4:])))
    assert replies[1] == replies[0] == ("OK", {"key1": "from the header", "x-fwd-a": "1 "})


def test_metrics_are_written_as_triton_writes_them(servers):
    """Same families in the same order, the same samples (metric and labels, in Triton's label
    order), and a model that raises counted as a BACKEND failure by both."""
    for server in servers:
        server.post("/v2/models/failing/infer", json_infer([fp32_input()]), JSON)
    pattern = r'^nv_inference_request_failure\{model="failing",reason="BACKEND",version="1"\} 1$'
    texts = [server.metrics() for server in servers]
    assert all(re.search(pattern, text, re.MULTILINE) for text in texts), texts

    def families(text: str) -> list[str]:
        return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE nv_inference")]

    def samples(text: str) -> list[str]:
        return sorted(line.rsplit(" ", 1)[0] for line in text.splitlines() if line.startswith("nv_inference"))

    assert families(texts[1]) == families(texts[0])
    assert samples(texts[1]) == samples(texts[0])
