"""Every HTTP endpoint through the real tritonclient.http (and raw HTTP where the client
cannot send what is tested), over both transports: the C++ one (libevent) and uvicorn."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import serving_repository
from tritonctl.serve.http import native
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory):
    repo = serving_repository(tmp_path_factory.mktemp("http") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=None, metrics_port=0, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5, http_max_input_size=1 << 20,
                           **transports)
    with BackgroundServer(options) as server:
        yield server


@pytest.fixture(scope="module")
def client(served):
    c = httpclient.InferenceServerClient(served.http_url)
    yield c
    c.close()


def add_sub_inputs(a: np.ndarray, b: np.ndarray, binary: bool = True, datatype: str = "FP32", module=httpclient):
    inputs = [module.InferInput("INPUT0", list(a.shape), datatype), module.InferInput("INPUT1", list(b.shape), datatype)]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    return inputs


def raw(served, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        conn.close()


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("add_sub") and client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("add_sub", "7") and not client.is_model_ready("missing")
    meta = client.get_server_metadata()
    assert meta["name"] == "triton" and "binary_tensor_data" in meta["extensions"]
    model = client.get_model_metadata("add_sub")
    assert model == {"name": "add_sub", "versions": ["1"], "platform": "onnxruntime_onnx",
                     "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]},
                                {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 4]}],
                     "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]},
                                 {"name": "OUTPUT1", "datatype": "FP32", "shape": [-1, 4]}]}


def test_model_config_in_tritons_json_shape(client):
    config = client.get_model_config("add_sub")
    assert config["max_batch_size"] == 8 and isinstance(config["max_batch_size"], int)
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
    assert config["dynamic_batching"]["preferred_batch_size"] == [8]
    assert config["input"][0]["dims"] == [4] and config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    auto = client.get_model_config("onnx_only")  # no config.pbtxt: auto-completed from the ONNX file
    assert [i["name"] for i in auto["input"]] == ["X"] and auto["backend"] == "onnxruntime"


@pytest.mark.parametrize("binary", [True, False])
def test_infer_binary_and_json(client, binary):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, np.float32)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary),
               httpclient.InferRequestedOutput("OUTPUT1", binary_data=not binary)]
    result = client.infer("add_sub", add_sub_inputs(a, b, binary), outputs=outputs, request_id="r-1")
    assert np.array_equal(result.as_numpy("OUTPUT0"), a + b)
    assert np.array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.get_response()["id"] == "r-1" and result.get_response()["model_version"] == "1"


def test_infer_int32_without_batcher_and_output_subset(client):
    a = np.arange(4, dtype=np.int32).reshape(1, 4)
    result = client.infer("add_sub_int", add_sub_inputs(a, a, datatype="INT32"),
                          outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    assert np.array_equal(result.as_numpy("OUTPUT1"), a - a)
    assert result.as_numpy("OUTPUT0") is None


@pytest.mark.parametrize("binary", [True, False])
def test_bytes_tensors(client, binary):
    text = np.array([["hello", "wörld"], ["", "x" * 300]], dtype=object)
    tensor = httpclient.InferInput("TEXT", [2, 2], "BYTES")
    tensor.set_data_from_numpy(text, binary_data=binary)
    result = client.infer("echo_bytes", [tensor],
                          outputs=[httpclient.InferRequestedOutput("TEXT_OUT", binary_data=binary)])
    assert [[v.decode() if isinstance(v, bytes) else v for v in row] for row in result.as_numpy("TEXT_OUT")] == \
        text.tolist()


def test_compressed_request_and_response(client):
    a = np.ones((1, 4), np.float32)
    for algorithm in ("gzip", "deflate"):
        result = client.infer("add_sub", add_sub_inputs(a, a), request_compression_algorithm=algorithm,
                              response_compression_algorithm=algorithm)
        assert np.array_equal(result.as_numpy("OUTPUT0"), a * 2)


@pytest.mark.parametrize("inputs,status,text", [
    (lambda: add_sub_inputs(np.ones((1, 3), np.float32), np.ones((1, 3), np.float32)), "400",
     "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,4], got [1,3]"),
    (lambda: add_sub_inputs(np.ones((1, 4), np.int32), np.ones((1, 4), np.int32), datatype="INT32"), "400",
     "inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'"),
    (lambda: add_sub_inputs(np.ones((1, 4), np.float32), np.ones((1, 4), np.float32))[:1], "400",
     "expected 2 inputs but got 1 inputs for model 'add_sub'"),
])
def test_infer_errors(client, inputs, status, text):
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", inputs())
    assert caught.value.status() == status
    assert text in caught.value.message()


def test_unknown_model_is_404(served, client):
    with pytest.raises(InferenceServerException) as caught:
        client.infer("missing", add_sub_inputs(np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)))
    assert caught.value.status() == "404"
    assert "Request for unknown model: 'missing' is not found" in caught.value.message()
    status, body, _ = raw(served, "GET", "/v2/models/missing/versions/3")
    assert status == 404 and "missing" in json.loads(body)["error"]


def test_malformed_requests_get_clear_4xx(served):
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", b"{not json")
    assert status == 400 and "failed to parse the request JSON" in json.loads(body)["error"]
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 16}},
                                    {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 16}}]}).encode()
    short = header + b"\0" * 20
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", short,
                          {"Inference-Header-Content-Length": str(len(header))})
    assert status == 400 and "unexpected size for input 'INPUT1'" in json.loads(body)["error"]
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", header + b"\0" * 40,
                          {"Inference-Header-Content-Length": str(len(header))})
    assert status == 400 and "unexpected additional input data for model 'add_sub'" in json.loads(body)["error"]
    fp16 = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP16", "data": [1.0]}]}).encode()
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", fp16)
    assert status == 400 and "receiving FP16 data via JSON is not supported" in json.loads(body)["error"]
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", b"{}", {"Content-Encoding": "br"})
    assert status == 501 and json.loads(body)["error"] == "Unsupported compression type"
    assert raw(served, "GET", "/v2/nothing/here")[:2] == (404, b'{"error":"Not Found"}')
    assert raw(served, "POST", "/v2/models/add_sub/config")[:2] == (405, b'{"error":"Method Not Allowed"}')


def test_repository_index_load_unload_and_stats(client):
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert index["add_sub"] == {"name": "add_sub", "version": "1", "state": "READY"}
    client.unload_model("unloadable")
    assert not client.is_model_ready("unloadable")
    client.load_model("unloadable")
    assert client.is_model_ready("unloadable")
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("not_in_repository")
    assert "failed to load 'not_in_repository'" in caught.value.message()
    a = np.ones((1, 4), np.float32)
    client.infer("add_sub_int", add_sub_inputs(a.astype(np.int32), a.astype(np.int32), datatype="INT32"))
    stats = client.get_inference_statistics("add_sub_int")["model_stats"][0]
    assert stats["name"] == "add_sub_int" and stats["inference_stats"]["success"]["count"] >= 1
    assert stats["execution_count"] >= 1 and stats["batch_stats"][0]["batch_size"] == 1
    assert client.get_log_settings()["log_verbose_level"] == 0


def test_burst_is_batched_and_counted_in_metrics(served):
    async def burst() -> None:
        client = aiohttpclient.InferenceServerClient(served.http_url, conn_limit=32)
        try:
            a = np.arange(4, dtype=np.float32).reshape(1, 4)
            inputs = add_sub_inputs(a, a, module=aiohttpclient)
            results = await asyncio.gather(*[client.infer("batched", inputs) for _ in range(16)])
            assert all(np.array_equal(r.as_numpy("OUTPUT0"), a * 2) for r in results)
            stats = (await client.get_inference_statistics("batched"))["model_stats"][0]
            assert stats["inference_count"] == 16
            assert stats["execution_count"] < 16
        finally:
            await client.close()

    asyncio.run(burst())
    text = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    assert 'nv_inference_request_success{model="batched",version="1"} 16' in text
    assert 'nv_inference_count{model="batched",version="1"} 16' in text
    assert 'nv_inference_request_failure{model="batched",reason="REJECTED",version="1"} 0' in text


def test_max_queue_size_rejects_with_503(served):
    async def overflow() -> list:
        client = aiohttpclient.InferenceServerClient(served.http_url, conn_limit=8)
        try:
            a = np.ones((1, 4), np.float32)
            inputs = add_sub_inputs(a, a, module=aiohttpclient)
            return await asyncio.gather(*[client.infer("limited", inputs) for _ in range(3)],
                                        return_exceptions=True)
        finally:
            await client.close()

    results = asyncio.run(overflow())
    errors = [r for r in results if isinstance(r, InferenceServerException)]
    assert errors and all(e.status() == "503" and "Exceeds maximum queue size" in e.message() for e in errors)
    assert any(not isinstance(r, Exception) for r in results)


def test_raw_binary_request_for_a_one_input_model(served):
    x = np.arange(6, dtype=np.float32)
    status, body, headers = raw(served, "POST", "/v2/models/onnx_only/infer", x.tobytes(),
                                {"Inference-Header-Content-Length": "0"})
    assert status == 200
    header_length = int(headers["inference-header-content-length"])
    header = json.loads(body[:header_length])
    assert header["outputs"][0]["shape"] == [1, 6]
    assert np.array_equal(np.frombuffer(body[header_length:], np.float32), x * 2)


def test_pure_json_request_with_nested_data_and_one_output(served):
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", json.dumps({
        "id": "json-only",
        "inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [[1, 2, 3, 4]]},
                   {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}],
        "outputs": [{"name": "OUTPUT1"}]}).encode())
    assert status == 200
    assert json.loads(body) == {"id": "json-only", "model_name": "add_sub", "model_version": "1", "outputs": [
        {"name": "OUTPUT1", "datatype": "FP32", "shape": [1, 4], "data": [0.0, 1.0, 2.0, 3.0]}]}


def test_file_overrides_are_loaded_not_ignored(client):
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("unloadable", config=json.dumps({"backend": "onnxruntime"}),
                          files={"file:1/model.onnx": b"\0"})
    assert caught.value.status() == "400" and "load failed for model 'unloadable'" in caught.value.message()
    assert client.is_model_ready("unloadable")  # the versions that were serving go on


def test_chunked_body_and_keep_alive(served):
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 16}},
                                    {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 16}}]}).encode()
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    host, port = served.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for _ in range(3):  # one connection, several requests, each body sent in chunks
            conn.request("POST", "/v2/models/add_sub/infer", body=iter([header, x.tobytes(), x.tobytes()]),
                         headers={"Inference-Header-Content-Length": str(len(header))}, encode_chunked=True)
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200
            outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
            assert outputs == {"OUTPUT0": (x.ravel() * 2).tolist(), "OUTPUT1": [0.0] * 4}
    finally:
        conn.close()


def test_a_body_over_the_limit_is_refused(served, client):
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", b"x" * ((1 << 20) + 1),
                          {"Inference-Header-Content-Length": "0"})
    assert status == 400 and json.loads(body)["error"] == (  # Triton's status and text, over either transport
        "Request body size of 1048577 bytes exceeds the maximum allowed value of 1048576 bytes. Use "
        "--http-max-input-size to increase the limit")
    # a body that decompresses to more than the limit: 400 over either transport
    status, body, _ = raw(served, "POST", "/v2/models/add_sub/infer", gzip.compress(b" " * ((1 << 20) + 1)),
                          {"Content-Encoding": "gzip"})
    assert status == 400 and json.loads(body)["error"] == (
        "Request body exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size to increase "
        "the limit")
    assert client.is_server_live()


def test_a_taken_port_is_an_os_error(served):
    from tritonctl.serve.http import start_front_end
    from tritonctl.serve.http.handlers import HttpHandlers

    host, port = served.http_url.split(":")
    with pytest.raises(OSError):
        asyncio.run(start_front_end(HttpHandlers(served.runtime.server), host, int(port),
                                    served.runtime.options.http_transport))


def test_transport_choice_is_checked(served, monkeypatch):
    from tritonctl.serve.http import start_front_end
    from tritonctl.serve.http.handlers import HttpHandlers

    app = HttpHandlers(served.runtime.server)
    with pytest.raises(ValueError, match="unknown HTTP transport 'h3'"):
        asyncio.run(start_front_end(app, "127.0.0.1", 0, "h3"))
    monkeypatch.setattr(native, "_native", None)  # as on a machine where it was not built
    with pytest.raises(RuntimeError, match="native HTTP transport is not built"):
        asyncio.run(start_front_end(app, "127.0.0.1", 0, "native"))
