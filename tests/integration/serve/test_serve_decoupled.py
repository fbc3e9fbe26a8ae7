"""Decoupled Python models (model_transaction_policy { decoupled: true }) sending 0..N responses
per request, over the real tritonclient's gRPC streaming (callback API and asyncio), and refused
by HTTP and unary gRPC with Triton's texts."""

from __future__ import annotations

import asyncio
import json
import queue
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcclient_aio
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

DECOUPLED_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }}, {{ name: "IDX" data_type: TYPE_INT32 dims: [ 1 ] }},
          {{ name: "NOTES" data_type: TYPE_STRING dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
model_transaction_policy {{ decoupled: {decoupled} }}
"""

# One response per element of IN (an error for a negative one), then the final flag alone.
REPEAT = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for i, value in enumerate(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()):
                if value < 0:
                    error = pb_utils.TritonError(f"negative value {value}", pb_utils.TritonError.INVALID_ARG)
                    sender.send(pb_utils.InferenceResponse(error=error))
                    continue
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32)),
                                                        pb_utils.Tensor("IDX", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

# Triton's "square" example: IN[0] responses of IN[0], sent by a thread after execute returned.
SQUARE = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            threading.Thread(target=self.respond, args=(request.get_response_sender(), count)).start()
        return None

    def respond(self, sender, count):
        for i in range(count):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([count], np.int32)),
                                                    pb_utils.Tensor("IDX", np.array([i], np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

# The last response carries the final flag itself.
FINAL_WITH_LAST = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            for i, value in enumerate(values):
                flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if i == len(values) - 1 else 0
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))]),
                            flags=flags)
        return None
'''

ASYNC_REPEAT = '''
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for value in pb_utils.get_input_tensor_by_name(request, "IN").as_numpy():
                await asyncio.sleep(0.01)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

RAISING = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            seven = pb_utils.Tensor("OUT", np.array([7], np.int32))
            request.get_response_sender().send(pb_utils.InferenceResponse([seven]))
        raise ValueError("broke after one response")
'''

# How the response sender answers misuse, reported in one response.
MISUSE = '''
import numpy as np
import triton_python_backend_utils as pb_utils

def attempt(action):
    try:
        action()
        return "ok"
    except pb_utils.TritonModelException as exc:
        return str(exc)

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            response = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))])
            notes = [attempt(lambda: sender.send()), attempt(lambda: sender.send(response, flags=2)),
                     str(request.get_response_sender() is sender), str(sender.is_cancelled())]
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("NOTES", np.array(notes, dtype=object))]),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            pb_utils.Logger.log_warn("after final: " + attempt(lambda: sender.send(response)))
        return None
'''

# An ordinary (not decoupled) model may answer through the response sender too, and return None.
ORDINARY_SENDER = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[:1]
            request.get_response_sender().send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value + 1)]),
                                               flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

# Streams until the client cancels, then notes how it ended in a file beside its config.
UNTIL_CANCELLED = '''
import threading
import time
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.note = Path(args["model_repository"]) / "ended.txt"

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.stream, args=(request.get_response_sender(),)).start()
        return None

    def stream(self, sender):
        deadline = time.monotonic() + 20
        while not sender.is_cancelled() and time.monotonic() < deadline:
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))]))
            time.sleep(0.01)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        written = self.note.with_suffix(".tmp")  # renamed into place: the test never reads it half written
        written.write_text("cancelled" if sender.is_cancelled() else "timed out")
        written.replace(self.note)
'''

# An ordinary model that sums every response of "repeat", read with exec(decoupled=True).
BLS_SUM = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            call = pb_utils.InferenceRequest(model_name="repeat", requested_output_names=["OUT"],
                                             inputs=[pb_utils.get_input_tensor_by_name(request, "IN")])
            seen = []
            for response in call.exec(decoupled=True):
                if response.has_error():
                    seen.append(response.error().message())
                elif response.output_tensors():
                    seen.append(int(pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0]))
                else:
                    seen.append("empty final")
            out = np.array([json.dumps(seen)], dtype=object)
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", out)]))
        return answers
'''
BLS_SUM_CONFIG = """
name: "bls_sum"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("decoupled") / "repo"
    models = {"repeat": REPEAT, "square": SQUARE, "final_with_last": FINAL_WITH_LAST, "async_repeat": ASYNC_REPEAT,
              "raising": RAISING, "until_cancelled": UNTIL_CANCELLED}
    for name, source in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(source)
        (repo / name / "config.pbtxt").write_text(DECOUPLED_CONFIG.format(name=name, decoupled="true"))
    (repo / "misuse" / "1").mkdir(parents=True)
    (repo / "misuse" / "1" / "model.py").write_text(MISUSE)
    (repo / "misuse" / "config.pbtxt").write_text(DECOUPLED_CONFIG.format(name="misuse", decoupled="true"))
    (repo / "ordinary_sender" / "1").mkdir(parents=True)
    (repo / "ordinary_sender" / "1" / "model.py").write_text(ORDINARY_SENDER)
    (repo / "ordinary_sender" / "config.pbtxt").write_text(DECOUPLED_CONFIG.format(name="ordinary_sender",
                                                                                  decoupled="false"))
    (repo / "bls_sum" / "1").mkdir(parents=True)
    (repo / "bls_sum" / "1" / "model.py").write_text(BLS_SUM)
    (repo / "bls_sum" / "config.pbtxt").write_text(BLS_SUM_CONFIG)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def values(module, data) -> list:
    array = np.array(data, np.int32)
    tensor = module.InferInput("IN", list(array.shape), "INT32")
    tensor.set_data_from_numpy(array)
    return [tensor]


def describe(result, error) -> dict:
    """A stream message as data: its error, or its outputs, id and triton_final_response."""
    if error is not None:
        return {"error": error.message()}
    response = result.get_response()
    final = response.parameters.get("triton_final_response")
    return {"outputs": {o.name: _plain(result.as_numpy(o.name).tolist()) for o in response.outputs}, "id": response.id,
            "version": response.model_version, "final": None if final is None else final.bool_param}


def _plain(values: list) -> list:
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def stream(served, model: str, data, count: int, empty_final: bool = False) -> list[dict]:
    """``count`` messages of one streamed request, with the callback API."""
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(describe(result, error)))
    try:
        client.async_stream_infer(model, values(grpcclient, data), request_id="r1",
                                  enable_empty_final_response=empty_final)
        return [received.get(timeout=10) for _ in range(count)]
    finally:
        client.stop_stream()
        assert received.empty(), f"more messages than expected: {list(received.queue)}"


def test_a_decoupled_model_streams_one_response_per_value(served):
    messages = stream(served, "repeat", [4, 5, 6], 3)
    assert [m["outputs"] for m in messages] == [{"OUT": [4], "IDX": [0]}, {"OUT": [5], "IDX": [1]},
                                                {"OUT": [6], "IDX": [2]}]
    assert {(m["id"], m["version"], m["final"]) for m in messages} == {("r1", "1", False)}


def test_the_final_flag_alone_is_a_message_only_when_the_client_asks_for_it(served):
    messages = stream(served, "repeat", [4, 5], 3, empty_final=True)
    assert [m["final"] for m in messages] == [False, False, True]
    assert messages[-1] == {"outputs": {}, "id": "r1", "version": "", "final": True}  # as Triton sends it
    assert stream(served, "repeat", [], 1, empty_final=True) == [messages[-1]]  # zero responses, then the flag
    # a final flag sent with the last response ends the request without an empty message
    assert [(m["outputs"], m["final"]) for m in stream(served, "final_with_last", [7, 8], 2, empty_final=True)] == \
        [({"OUT": [7]}, False), ({"OUT": [8]}, True)]


def test_an_error_mid_stream_is_one_message_and_the_responses_go_on(served):
    messages = stream(served, "repeat", [4, -1, 6], 4, empty_final=True)
    assert messages[0]["outputs"] == {"OUT": [4], "IDX": [0]}
    assert messages[1] == {"error": "negative value -1"}
    assert messages[2]["outputs"] == {"OUT": [6], "IDX": [2]}
    assert messages[3]["final"] is True


def test_responses_sent_from_a_thread_after_execute_returned(served):
    messages = stream(served, "square", [3], 4, empty_final=True)
    assert [m["outputs"] for m in messages[:3]] == [{"OUT": [3], "IDX": [i]} for i in range(3)]
    assert messages[3]["final"] is True


def test_an_execute_that_raises_fails_the_request_and_the_stream_stays_usable(served):
    client = httpclient.InferenceServerClient(served.http_url)

    def counts() -> tuple[int, int]:
        stats = client.get_inference_statistics("raising")["model_stats"][0]["inference_stats"]
        return stats["success"]["count"], stats["fail"]["count"]

    before = counts()
    messages = stream(served, "raising", [1], 2)
    assert messages[0]["outputs"] == {"OUT": [7]}
    assert messages[1]["error"].startswith("Failed to process the request(s) for model 'raising_0_0', message: "
                                           "ValueError: broke after one response\n\nAt:\n")
    success, fail = counts()
    assert (success - before[0], fail - before[1]) == (0, 1)  # a raise fails the request, as in Triton
    assert [m["outputs"]["OUT"] for m in stream(served, "repeat", [9], 1)] == [[9]]


def test_asyncio_stream_infer_with_an_async_execute_model(served):
    async def run() -> list:
        client = grpcclient_aio.InferenceServerClient(served.grpc_url)

        async def requests():
            for index, data in enumerate(([1, 2, 3], [10])):
                yield {"model_name": "async_repeat", "inputs": values(grpcclient_aio, data), "request_id": str(index)}

        seen = []
        try:  # the server ends the stream once the requests are sent and every one has had its final flag
            async for result, error in client.stream_infer(requests()):
                assert error is None, error
                response = result.get_response()
                seen.append((response.id, result.as_numpy("OUT").tolist(),
                             response.parameters["triton_final_response"].bool_param))
        finally:
            await client.close()
        return seen

    seen = asyncio.run(asyncio.wait_for(run(), 20))
    by_request = {rid: [(out, final) for r, out, final in seen if r == rid] for rid in ("0", "1")}
    assert by_request == {"0": [([1], False), ([2], False), ([3], False)], "1": [([10], False)]}


def test_http_and_unary_grpc_refuse_a_decoupled_model_with_tritons_text(served):
    with pytest.raises(InferenceServerException) as raised:
        httpclient.InferenceServerClient(served.http_url).infer("repeat", values(httpclient, [1]))
    assert raised.value.status() == "501"
    assert raised.value.message() == "HTTP end point doesn't support models with decoupled transaction policy"
    with pytest.raises(InferenceServerException) as raised:
        grpcclient.InferenceServerClient(served.grpc_url).infer("repeat", values(grpcclient, [1]))
    assert raised.value.status() == "StatusCode.UNIMPLEMENTED"
    assert raised.value.message() == "ModelInfer RPC doesn't support models with decoupled transaction policy"


def test_reserved_triton_parameters_are_refused_with_tritons_text(served):
    # tritonclient refuses these keys itself, so the request is built by hand
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(served.grpc_url))

    def request(key: str, kind: str, value) -> service_pb2.ModelInferRequest:
        message = service_pb2.ModelInferRequest(model_name="repeat")
        message.inputs.add(name="IN", datatype="INT32", shape=[1])
        message.raw_input_contents.append(np.array([1], np.int32).tobytes())
        setattr(message.parameters[key], kind, value)
        return message

    replies = list(stub.ModelStreamInfer(iter([request("triton_other", "int64_param", 1),
                                               request("triton_enable_empty_final_response", "int64_param", 1)]),
                                         timeout=10))
    assert [r.error_message for r in replies] == [
        "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting "
        "with 'triton_' are allowed: triton_enable_empty_final_response",
        "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param."]


def test_bls_reads_every_response_of_a_decoupled_model(served):
    client = httpclient.InferenceServerClient(served.http_url)

    def counts() -> tuple[int, int]:
        stats = client.get_inference_statistics("repeat")["model_stats"][0]["inference_stats"]
        return stats["success"]["count"], stats["fail"]["count"]

    before = counts()
    seen = json.loads(client.infer("bls_sum", values(httpclient, [3, -2, 5])).as_numpy("REPORT")[0])
    assert seen == [3, "negative value -2", 5, "empty final"]
    # Counted at the final flag, a success: as in Triton 2.51, the model's own error response
    # does not fail the request (only an execute() that raises does)
    success, fail = counts()
    assert (success - before[0], fail - before[1]) == (1, 0)


def test_the_response_sender_refuses_misuse_with_tritons_texts(served, caplog):
    messages = stream(served, "misuse", [1], 1)
    assert messages[0]["outputs"]["NOTES"] == [
        "Inference Response object must be provided when the response flags is set to zero.",
        "Unable to send response. Unsupported flag provided.", "True", "False"]
    deadline = time.monotonic() + 10  # logged by the model just after its final response
    while "after final" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "after final: Unable to send response. Response sender has been closed." in caplog.text


def test_an_ordinary_model_may_answer_through_its_response_sender(served):
    result = httpclient.InferenceServerClient(served.http_url).infer("ordinary_sender", values(httpclient, [41, 0]))
    assert result.as_numpy("OUT").tolist() == [42]


def test_a_client_that_cancels_its_stream_cancels_the_request_for_the_model(served):
    note = served.runtime.options.repository / "until_cancelled" / "ended.txt"
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(describe(result, error)))
    client.async_stream_infer("until_cancelled", values(grpcclient, [1]))
    assert [received.get(timeout=10)["outputs"] for _ in range(2)] == [{"OUT": [1]}] * 2
    client.stop_stream(cancel_requests=True)
    deadline = time.monotonic() + 10
    while not note.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert note.read_text() == "cancelled"


def test_an_error_mid_stream_names_its_request_and_is_not_final(served):
    request = service_pb2.ModelInferRequest(model_name="repeat", model_version="1", id="r7")
    request.inputs.add(name="IN", datatype="INT32", shape=[2])
    request.raw_input_contents.append(np.array([-1, 5], np.int32).tobytes())
    with grpc.insecure_channel(served.grpc_url) as channel:
        replies = list(service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(iter([request]),
                                                                                          timeout=10))
    assert [r.error_message for r in replies] == ["negative value -1", ""]
    failed = replies[0].infer_response
    assert (failed.model_name, failed.model_version, failed.id, list(failed.outputs)) == ("repeat", "1", "r7", [])
    assert failed.parameters["triton_final_response"].bool_param is False
