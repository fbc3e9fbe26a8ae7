"""Requests outside the happy path answered over gRPC as Triton 2.51 answers them, on both
transports: typed tensor contents (the narrow integer types, contents of another type, two content
fields), messages that do not parse (unary, Health/Check, in a stream), methods no service has,
and a stream's new requests once the server is stopping. Every expected value is what the real
Triton 2.51 answered to the same request, over the same models (tritonclient's example model
``simple`` and its INT8 and BYTES variants, as Python stand-ins)."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from helpers.serve_models import GATED_PY, write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1; BYTES as the decimal text of the numbers.
ADD_SUB = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            if a.dtype == object:
                text = np.vectorize(lambda v: str(v).encode(), otypes=[object])
                a, b = a.astype(np.int64), b.astype(np.int64)
                total, difference = text(a + b), text(a - b)
            else:
                total, difference = a + b, a - b
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", total),
                                                         pb_utils.Tensor("OUTPUT1", difference)]))
        return responses
'''

ADD_SUB_CONFIG = """max_batch_size: 8
input [ {{ name: "INPUT0" data_type: {t} dims: [ 16 ] }}, {{ name: "INPUT1" data_type: {t} dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: {t} dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: {t} dims: [ 16 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

GATED_CONFIG = """max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

UNPARSABLE = ("INTERNAL", "Unable to parse request")


@pytest.fixture(scope="module")
def served(transports, tmp_path_factory):
    repo = tmp_path_factory.mktemp("grpc-triton-answers") / "repo"
    for name, datatype in (("simple", "TYPE_INT32"), ("simple_int8", "TYPE_INT8"), ("simple_string", "TYPE_STRING")):
        write_python_model(repo, name, ADD_SUB_CONFIG.format(t=datatype), ADD_SUB)
    options = ServeOptions(repo, http_port=None, grpc_port=0, metrics_port=None, exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        yield server


def typed(model: str, datatype: str, fill, wrong_input0_only: bool = False) -> service_pb2.ModelInferRequest:
    """A request whose two inputs are sent in typed contents, filled by ``fill(contents)`` (INPUT1
    with sixteen ones instead where ``wrong_input0_only``)."""
    request = service_pb2.ModelInferRequest(model_name=model)
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype=datatype, shape=[1, 16])
        if name == "INPUT1" and wrong_input0_only:
            if datatype == "BYTES":
                tensor.contents.bytes_contents.extend([b"1"] * 16)
            else:
                tensor.contents.int_contents.extend([1] * 16)
        else:
            fill(tensor.contents)
    return request


def explicit(name: str, of: str, expected: str, model: str = "simple") -> str:
    return (f"unexpected explicit tensor data for input tensor '{name}' for model '{model}' of type '{of}', "
            f"expected datatype '{expected}'")


# (request, Triton 2.51's gRPC code and details)
TYPED_REFUSALS = {
    "fp32-contents-for-int32": (typed("simple", "INT32", lambda c: c.fp32_contents.extend([1.0] * 16)),
                                ("INVALID_ARGUMENT", explicit("INPUT0", "FP32", "INT32"))),
    "bool-contents-before-int": (typed("simple", "INT32", lambda c: (c.bool_contents.extend([True] * 16),
                                                                      c.int_contents.extend([1] * 16))),
                                 ("INVALID_ARGUMENT", explicit("INPUT0", "BOOL", "INT32"))),
    "two-content-fields": (typed("simple", "INT32", lambda c: (c.int_contents.extend([1] * 16),
                                                                c.int64_contents.extend([1] * 16))),
                           ("INVALID_ARGUMENT", "unexpected explicit tensor data for input tensor 'INPUT0' for model "
                                                "'simple', binary data was already supplied.")),
    "uint-contents-for-int8": (typed("simple_int8", "INT8", lambda c: c.uint_contents.extend([1] * 16)),
                               ("INVALID_ARGUMENT", explicit("INPUT0", "UINT32", "INT8", "simple_int8"))),
    "int-contents-for-bytes": (typed("simple_string", "BYTES", lambda c: c.int_contents.extend([1] * 16)),
                               ("INVALID_ARGUMENT", explicit("INPUT0", "INT32", "BYTES", "simple_string"))),
    "bytes-contents-for-int32": (typed("simple", "INT32", lambda c: c.bytes_contents.extend([b"1234"] * 16)),
                                 ("INVALID_ARGUMENT", explicit("INPUT0", "BYTES", "INT32"))),
    "fp32-contents-for-fp16": (typed("simple", "FP16", lambda c: c.fp32_contents.extend([1.0] * 16)),
                               ("INVALID_ARGUMENT", explicit("INPUT0", "FP32", "FP16"))),
    "unknown-datatype": (typed("simple", "FOO", lambda c: c.int_contents.extend([1] * 16)),
                         ("INVALID_ARGUMENT", explicit("INPUT0", "INT32", "<invalid>"))),
    "empty-contents": (typed("simple", "INT32", lambda c: c.SetInParent(), wrong_input0_only=True),
                       ("INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' "
                                            "for model 'simple'. Expected 64, got 0")),
    "fifteen-strings": (typed("simple_string", "BYTES", lambda c: c.bytes_contents.extend([b"1"] * 15),
                              wrong_input0_only=True),
                        ("INVALID_ARGUMENT", "[request id: <id_unknown>] expected 16 string elements for inference "
                                             "input 'INPUT0' for model 'simple_string', got 15")),
}


def infer(served, request):
    with grpc.insecure_channel(served.grpc_url) as channel:
        return service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=10)


@pytest.mark.parametrize("case", TYPED_REFUSALS)
def test_typed_contents_refused_as_triton_refuses_them(served, case):
    request, expected = TYPED_REFUSALS[case]
    with pytest.raises(grpc.RpcError) as caught:
        infer(served, request)
    assert (caught.value.code().name, caught.value.details()) == expected


def test_int_contents_of_int8_keep_each_values_low_byte(served):
    # Triton takes the low byte of each int32: 300 -> 44 and -200 -> 56 (sums 88 and 112)
    reply = infer(served, typed("simple_int8", "INT8", lambda c: c.int_contents.extend([300, -200] * 8)))
    assert np.frombuffer(reply.raw_output_contents[0], np.int8).tolist() == [88, 112] * 8


def call(served, path: str, body: bytes):
    with grpc.insecure_channel(served.grpc_url) as channel:
        try:
            return channel.unary_unary(path)(body, timeout=10)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()


@pytest.mark.parametrize("path, body, expected", [
    ("/inference.GRPCInferenceService/ModelInfer", b"\xff\xff\xff", UNPARSABLE),
    ("/inference.GRPCInferenceService/ModelConfig", b"\x0a\x02\xc3\x28", UNPARSABLE),  # a name that is not UTF-8
    ("/grpc.health.v1.Health/Check", b"\xff\xff", UNPARSABLE),
    ("/grpc.health.v1.Health/Check", b"\x0a\x03abc", b"\x08\x01"),  # any service name: SERVING
    ("/inference.GRPCInferenceService/NoSuchMethod", b"", ("UNIMPLEMENTED", "")),
    ("/grpc.health.v1.Health/Watch", b"", ("UNIMPLEMENTED", "")),
    ("/other.Service/Call", b"", ("UNIMPLEMENTED", "")),
])
def test_messages_and_methods_outside_the_service(served, path, body, expected):
    assert call(served, path, body) == expected


def test_a_unary_call_without_its_message(served):
    if served.runtime.options.grpc_transport != "native":
        pytest.skip("grpc.aio leaves a unary call that sends no message waiting for its deadline")
    with grpc.insecure_channel(served.grpc_url) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            list(channel.stream_stream("/inference.GRPCInferenceService/ServerLive")(iter([]), timeout=10))
    assert (caught.value.code().name, caught.value.details()) == UNPARSABLE


def simple_request(request_id: str) -> bytes:
    request = typed("simple", "INT32", lambda c: c.int_contents.extend(range(16)))
    request.id = request_id
    return request.SerializeToString()


def test_a_stream_message_that_does_not_parse_ends_the_reading_as_a_half_close(served):
    # Triton answers the requests read before it and ends the stream OK; what follows is not read
    with grpc.insecure_channel(served.grpc_url) as channel:
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        replies = [service_pb2.ModelStreamInferResponse.FromString(m)
                   for m in stream(iter([simple_request("a"), b"\xff\xff", simple_request("b")]), timeout=10)]
    assert [(r.error_message, r.infer_response.id) for r in replies] == [("", "a")]
    assert grpcclient.InferenceServerClient(served.grpc_url).is_server_live()


def test_a_streams_new_requests_are_refused_once_the_server_stops(tmp_path, transports):
    started, release = tmp_path / "started", tmp_path / "release"
    write_python_model(tmp_path / "repo", "gated", GATED_CONFIG, GATED_PY.format(started=str(started),
                                                                                release=str(release)))
    options = ServeOptions(tmp_path / "repo", http_port=None, grpc_port=0, metrics_port=None, exit_timeout_secs=10,
                           **transports)
    server = BackgroundServer(options).start()
    stopping = threading.Thread(target=server.stop)
    received: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: received.put(error if error is not None else result))
        tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.ones(1, np.float32))
        client.async_stream_infer("gated", [tensor], request_id="before")
        deadline = time.monotonic() + 20
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        stopping.start()
        while not server.runtime.server.stopping and time.monotonic() < deadline:
            time.sleep(0.01)
        client.async_stream_infer("gated", [tensor], request_id="after")
        release.touch()  # the refusal leaves after the answer to the request before it, as on Triton
        answered, refused = received.get(timeout=10), received.get(timeout=10)
    finally:
        release.touch()
        client.close()
        if stopping.ident is None:  # not stopped yet
            stopping.start()
        stopping.join(30)
    assert isinstance(refused, InferenceServerException)
    assert refused.message() == "Request for unknown model: 'gated' has no available versions"
    assert answered.get_response().id == "before" and answered.as_numpy("OUTPUT0").tolist() == [7.0]
