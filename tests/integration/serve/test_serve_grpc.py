"""The gRPC service through the real tritonclient.grpc, sync and asyncio, over both transports:
the C++ one (where it is built) and grpc.aio."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aiogrpcclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import serving_repository
from tritonctl.serve.grpc import native
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory):
    repo = serving_repository(tmp_path_factory.mktemp("grpc") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server


@pytest.fixture(scope="module")
def client(served):
    c = grpcclient.InferenceServerClient(served.grpc_url)
    yield c
    c.close()


def add_sub_inputs(a: np.ndarray, b: np.ndarray, datatype: str = "FP32", module=grpcclient):
    inputs = [module.InferInput("INPUT0", list(a.shape), datatype), module.InferInput("INPUT1", list(b.shape), datatype)]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


def test_health_metadata_and_config(client, served):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("add_sub") and not client.is_model_ready("missing")
    assert "binary_tensor_data" in client.get_server_metadata().extensions
    meta = client.get_model_metadata("add_sub", as_json=True)
    assert meta["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": ["-1", "4"]}
    config = client.get_model_config("add_sub").config
    assert config.max_batch_size == 8 and config.dynamic_batching.max_queue_delay_microseconds == 2000
    with grpc.insecure_channel(served.grpc_url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        assert check(b"", timeout=5) == b"\x08\x01"  # HealthCheckResponse{status: SERVING}


def test_infer_float_int_and_bytes(client):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    result = client.infer("add_sub", add_sub_inputs(a, a), request_id="g-1")
    assert np.array_equal(result.as_numpy("OUTPUT0"), a * 2) and np.array_equal(result.as_numpy("OUTPUT1"), a * 0)
    assert result.get_response().id == "g-1"
    i = np.arange(4, dtype=np.int32).reshape(1, 4)
    result = client.infer("add_sub_int", add_sub_inputs(i, i, "INT32"),
                          outputs=[grpcclient.InferRequestedOutput("OUTPUT0")])
    assert np.array_equal(result.as_numpy("OUTPUT0"), i * 2) and result.as_numpy("OUTPUT1") is None
    text = np.array([[b"a", b"\xc3\xa9t\xc3\xa9"]], dtype=object)
    tensor = grpcclient.InferInput("TEXT", [1, 2], "BYTES")
    tensor.set_data_from_numpy(text)
    assert client.infer("echo_bytes", [tensor]).as_numpy("TEXT_OUT").tolist() == text.tolist()


def test_errors_carry_grpc_status_codes(client):
    a = np.ones((1, 4), np.float32)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("missing", add_sub_inputs(a, a))
    assert caught.value.status() == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", add_sub_inputs(np.ones((1, 5), np.float32), np.ones((1, 5), np.float32)))
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "unexpected shape for input 'INPUT0' for model 'add_sub'" in caught.value.message()
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", add_sub_inputs(a, a)[:1])
    assert "expected 2 inputs but got 1 inputs" in caught.value.message()


def test_repository_and_statistics(client):
    names = {m.name for m in client.get_model_repository_index().models}
    assert {"add_sub", "echo_bytes", "onnx_only"} <= names
    client.unload_model("unloadable")
    assert not client.is_model_ready("unloadable")
    client.load_model("unloadable")
    assert client.is_model_ready("unloadable")
    a = np.ones((1, 4), np.float32)
    client.infer("unloadable", add_sub_inputs(a, a))
    stats = client.get_inference_statistics("unloadable", as_json=True)["model_stats"][0]
    assert stats["name"] == "unloadable" and stats["inference_stats"]["success"]["count"] == "1"


def test_repository_calls_that_name_a_repository_are_unimplemented(served, client):
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(served.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for call, message in ((stub.RepositoryIndex, service_pb2.RepositoryIndexRequest(repository_name="other")),
                              (stub.RepositoryModelLoad, service_pb2.RepositoryModelLoadRequest(
                                  repository_name="other", model_name="unloadable")),
                              (stub.RepositoryModelUnload, service_pb2.RepositoryModelUnloadRequest(
                                  repository_name="other", model_name="unloadable"))):
            with pytest.raises(grpc.RpcError) as caught:
                call(message, timeout=10)
            assert (caught.value.code(), caught.value.details()) == (
                grpc.StatusCode.UNIMPLEMENTED, "'repository_name' specification is not supported")
    assert client.is_model_ready("unloadable")


def test_stream_infer_answers_each_request(client):
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        a = np.ones((1, 4), np.float32)
        client.async_stream_infer("add_sub", add_sub_inputs(a, a), request_id="s1")
        client.async_stream_infer("missing", add_sub_inputs(a, a), request_id="s2")
        client.async_stream_infer("add_sub", add_sub_inputs(a * 3, a), request_id="s3")
        got = [results.get(timeout=10) for _ in range(3)]
    finally:
        client.stop_stream()
    assert np.array_equal(got[0][0].as_numpy("OUTPUT0"), a * 2)
    assert got[1][0] is None and "unknown model: 'missing'" in got[1][1].message()
    assert np.array_equal(got[2][0].as_numpy("OUTPUT0"), a * 4)


def test_asyncio_client_concurrent_requests(served):
    async def run() -> None:
        client = aiogrpcclient.InferenceServerClient(served.grpc_url)
        try:
            assert await client.is_server_ready()
            values = [np.full((1, 4), i, np.float32) for i in range(12)]
            results = await asyncio.gather(*[client.infer("add_sub", add_sub_inputs(v, v, module=aiogrpcclient))
                                             for v in values])
            for value, result in zip(values, results):
                assert np.array_equal(result.as_numpy("OUTPUT0"), value * 2)
        finally:
            await client.close()

    asyncio.run(run())


def test_fp16_over_grpc_and_http_binary(client, served):
    import tritonclient.http as httpclient

    a = np.array([[0.5, 1.5, -2.0, 4.0]], np.float16)
    result = client.infer("add_sub_fp16", add_sub_inputs(a, a, "FP16"))
    assert result.as_numpy("OUTPUT0").dtype == np.float16 and np.array_equal(result.as_numpy("OUTPUT0"), a + a)
    http = httpclient.InferenceServerClient(served.http_url)
    try:
        inputs = [httpclient.InferInput(n, [1, 4], "FP16") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        assert np.array_equal(http.infer("add_sub_fp16", inputs).as_numpy("OUTPUT1"), a - a)
    finally:
        http.close()


def test_typed_input_contents_are_accepted(served):
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    request = service_pb2.ModelInferRequest(model_name="add_sub_int")
    for name, values in (("INPUT0", [1, 2, 3, 4]), ("INPUT1", [10, 20, 30, 40])):
        tensor = request.inputs.add(name=name, datatype="INT32", shape=[1, 4])
        tensor.contents.int_contents.extend(values)
    with grpc.insecure_channel(served.grpc_url) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=10)
    outputs = {o.name: np.frombuffer(raw, np.int32) for o, raw in zip(response.outputs, response.raw_output_contents)}
    assert outputs["OUTPUT0"].tolist() == [11, 22, 33, 44] and outputs["OUTPUT1"].tolist() == [-9, -18, -27, -36]


def test_protocol_faults_get_grpc_statuses(served):
    # Triton 2.51's answers (more in test_serve_grpc_triton_answers.py)
    with grpc.insecure_channel(served.grpc_url) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary("/inference.GRPCInferenceService/NoSuchMethod")(b"", timeout=5)
        assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.UNIMPLEMENTED, "")
        for method in ("ModelInfer", "ModelMetadata"):
            with pytest.raises(grpc.RpcError) as caught:
                channel.unary_unary(f"/inference.GRPCInferenceService/{method}")(b"\xff\xff\xff", timeout=5)
            assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.INTERNAL,
                                                                     "Unable to parse request")
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        assert list(stream(iter([]), timeout=5)) == []  # a stream that sends nothing ends cleanly


def test_messages_larger_than_grpc_default_limit(client):
    big = np.array([[b"x" * (6 << 20), b"y"]], dtype=object)  # 6 MiB: over gRPC's 4 MiB default
    tensor = grpcclient.InferInput("TEXT", [1, 2], "BYTES")
    tensor.set_data_from_numpy(big)
    assert client.infer("echo_bytes", [tensor]).as_numpy("TEXT_OUT").tolist() == big.tolist()


def test_a_taken_port_is_an_os_error(served):
    from tritonctl.serve.grpc import start_front_end

    with pytest.raises(OSError, match="cannot bind the gRPC port"):
        asyncio.run(start_front_end(served.runtime.server, served.grpc_url, served.runtime.options.grpc_transport))


def test_transport_choice_is_checked(served, monkeypatch):
    from tritonctl.serve.grpc import start_front_end

    with pytest.raises(ValueError, match="unknown gRPC transport 'h3'"):
        asyncio.run(start_front_end(served.runtime.server, "127.0.0.1:0", "h3"))
    monkeypatch.setattr(native, "_native", None)  # as on a machine where it was not built
    with pytest.raises(RuntimeError, match="native gRPC transport is not built"):
        asyncio.run(start_front_end(served.runtime.server, "127.0.0.1:0", "native"))


def test_a_lone_infer_is_answered_while_the_event_loop_is_busy(served, client):
    # the C++ transport hands a ModelInfer that nothing else waits beside straight to the model
    # queue from gRPC's thread; the next ones, sent while it is unanswered, go through the loop
    if served.runtime.options.grpc_transport != "native":
        pytest.skip("grpc.aio serves every call on the event loop")
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    busy = threading.Event()
    served.runtime._loop.call_soon_threadsafe(lambda: (busy.set(), time.sleep(2)))
    assert busy.wait(5)
    start = time.monotonic()
    result = client.infer("add_sub", add_sub_inputs(a, a))
    assert time.monotonic() - start < 1.5 and np.array_equal(result.as_numpy("OUTPUT0"), a * 2)
    with grpcclient.InferenceServerClient(served.grpc_url) as other:  # queued behind the lone one
        outcomes: queue.Queue = queue.Queue()
        for client_ in (client, other):
            client_.async_infer("add_sub", add_sub_inputs(a, a + 1), lambda result, error: outcomes.put((result, error)))
        for _ in range(2):
            result, error = outcomes.get(timeout=10)
            assert error is None and np.array_equal(result.as_numpy("OUTPUT1"), -np.ones((1, 4), np.float32))
