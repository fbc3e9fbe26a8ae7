"""Triton's L0_backend_python/response_sender cases: a Python model answers through
``request.get_response_sender()``, decoupled or not, before and after execute() returns, and
(for an ordinary model) exactly one response per request, as Triton's stub allows it. Texts
quoted from Triton's Python backend: "Non-decoupled model cannot send complete final before
sending a response", "using the decoupled mode and the execute function must return None"."""

from __future__ import annotations

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# The five instructions of Triton's response_sender model; responses carry INDEX: 0 when
# returned from execute, 1000+ sent before it returns, 2000+ sent after (by a thread or a task).
MODEL = '''
import asyncio
import threading
import time
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils

USE_ASYNC = {use_async}

def total(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().sum()

def response(batch_size, index):
    return pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", np.full((batch_size, 1), index, np.uint16))])

def send(plans, offset, go=None):
    """``go``: a file the test writes once it has the returned response, so that these sends
    surely come after the request was answered."""
    while go is not None and not go.exists():
        time.sleep(0.01)
    try:
        send_now(plans, offset)
    except pb_utils.TritonModelException as exc:
        pb_utils.Logger.log_warn(f"after return: {{exc}}")

def send_now(plans, offset):
    for plan in plans:
        for i in range(plan["count"]):
            plan["sender"].send(response(plan["batch_size"], offset + i))
        if plan["final"]:
            plan["sender"].send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()
        self.go = Path(args["model_repository"]) / "go"

    def plan(self, requests):
        before, after, returned = [], [], []
        for request in requests:
            batch_size = pb_utils.get_input_tensor_by_name(request, "RETURN_A_RESPONSE").as_numpy().shape[0]
            counts = (int(total(request, "NUMBER_OF_RESPONSE_BEFORE_RETURN")),
                      int(total(request, "NUMBER_OF_RESPONSE_AFTER_RETURN")))
            finals = (bool(total(request, "SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN")),
                      bool(total(request, "SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN")))
            sender = request.get_response_sender() if any(counts) or any(finals) else None
            before.append({{"count": counts[0], "final": finals[0], "sender": sender, "batch_size": batch_size}})
            after.append({{"count": counts[1], "final": finals[1], "sender": sender, "batch_size": batch_size}})
            returned.append(response(batch_size, 0) if total(request, "RETURN_A_RESPONSE") else None)
        send_now(before, 1000)
        both = any(r is not None and a["count"] for r, a in zip(returned, after))
        return after, (None if all(r is None for r in returned) else returned), (self.go if both else None)

    if USE_ASYNC:
        async def execute(self, requests):
            after, returned, go = self.plan(requests)
            async def later():
                await asyncio.to_thread(send, after, 2000, go)
            task = asyncio.create_task(later())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return returned
    else:
        def execute(self, requests):
            after, returned, go = self.plan(requests)
            threading.Thread(target=send, args=(after, 2000, go), daemon=True).start()
            return returned
'''

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [
  {{ name: "NUMBER_OF_RESPONSE_BEFORE_RETURN" data_type: TYPE_UINT8 dims: [ 1 ] }},
  {{ name: "SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN" data_type: TYPE_BOOL dims: [ 1 ] }},
  {{ name: "RETURN_A_RESPONSE" data_type: TYPE_BOOL dims: [ 1 ] }},
  {{ name: "NUMBER_OF_RESPONSE_AFTER_RETURN" data_type: TYPE_UINT8 dims: [ 1 ] }},
  {{ name: "SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN" data_type: TYPE_BOOL dims: [ 1 ] }}
]
output [ {{ name: "INDEX" data_type: TYPE_UINT16 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU }} ]
model_transaction_policy {{ decoupled: {decoupled} }}
"""

# (before, final before, return one, after, final after), as Triton's test names them
ZERO_PRE = (0, True, False, 0, False)
ZERO_POST = (0, False, False, 0, True)
ONE_PRE = (1, True, False, 0, False)
ONE_POST = (0, False, False, 1, True)
TWO_PRE = (2, True, False, 0, False)
TWO_POST = (0, False, False, 2, True)
PRE_AND_POST = (1, False, False, 3, True)
ON_RETURN = (0, False, True, 0, False)
ONE_PRE_AND_ON_RETURN = (1, True, True, 0, False)
ONE_ON_AND_POST_RETURN = (0, False, True, 1, True)


# How an ordinary model's response sender answers misuse (texts measured on Triton 2.51), logged.
ORDINARY_MISUSE = '''
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
            response = pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", np.array([[7]], np.uint16))])
            final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            notes = [attempt(lambda: sender.send(flags=final)), attempt(lambda: sender.send(response, flags=final)),
                     attempt(lambda: sender.send(response)), attempt(lambda: sender.send(flags=final))]
            pb_utils.Logger.log_warn("misuse notes: " + " | ".join(notes))
        return None
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("response_sender") / "repo"
    (repo / "ordinary_misuse" / "1").mkdir(parents=True)
    (repo / "ordinary_misuse" / "1" / "model.py").write_text(ORDINARY_MISUSE)
    (repo / "ordinary_misuse" / "config.pbtxt").write_text(CONFIG.format(name="ordinary_misuse", decoupled="false"))
    for name, decoupled, use_async in (("response_sender", "false", False), ("response_sender_async", "false", True),
                                       ("response_sender_decoupled", "true", False),
                                       ("response_sender_decoupled_async", "true", True)):
        for suffix, batching in (("", ""), ("_batching", "dynamic_batching { max_queue_delay_microseconds: 100000 }")):
            (repo / (name + suffix) / "1").mkdir(parents=True)
            (repo / (name + suffix) / "1" / "model.py").write_text(MODEL.format(use_async=use_async))
            (repo / (name + suffix) / "config.pbtxt").write_text(
                CONFIG.format(name=name + suffix, decoupled=decoupled) + batching)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def inputs(module, plan) -> list:
    names = ("NUMBER_OF_RESPONSE_BEFORE_RETURN", "SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN", "RETURN_A_RESPONSE",
             "NUMBER_OF_RESPONSE_AFTER_RETURN", "SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN")
    tensors = []
    for name, value in zip(names, plan):
        array = np.array([[value]], bool if isinstance(value, bool) else np.uint8)
        tensor = module.InferInput(name, [1, 1], "BOOL" if isinstance(value, bool) else "UINT8")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


def streamed(served, model: str, plan, decoupled: bool) -> list:
    """Every message of one streamed request, as Triton's test reads them: INDEX, or the error text.
    A decoupled model's request ends at its (empty) final response; an ordinary model's after one."""
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put((result, error)))
    messages = []
    try:
        client.async_stream_infer(model, inputs(grpcclient, plan), enable_empty_final_response=decoupled)
        while True:
            result, error = received.get(timeout=20)
            if error is not None:
                messages.append(error.message())  # an error ends the request in these cases
                break
            response = result.get_response()
            final = response.parameters.get("triton_final_response")
            if response.outputs:
                messages.append(int(result.as_numpy("INDEX").sum()))
            if not decoupled or (final is not None and final.bool_param):
                break
    finally:
        client.stop_stream()
    return messages


@pytest.mark.parametrize("plan,expected", [
    (ZERO_PRE, []), (ZERO_POST, []), (ONE_PRE, [1000]), (ONE_POST, [2000]), (TWO_PRE, [1000, 1001]),
    (TWO_POST, [2000, 2001]), (PRE_AND_POST, [1000, 2000, 2001, 2002])])
@pytest.mark.parametrize("model", ["response_sender_decoupled", "response_sender_decoupled_async"])
def test_a_decoupled_model_sends_before_and_after_execute_returns(served, model, plan, expected):
    assert streamed(served, model, plan, decoupled=True) == expected


@pytest.mark.parametrize("plan,expected", [
    (ON_RETURN, [0]), (ONE_PRE, [1000]), (ONE_POST, [2000]),
    (TWO_PRE, [1000]),  # the second send raises in execute; the stream keeps the first response only
    (ONE_PRE_AND_ON_RETURN, [1000])])  # the returned response is ignored: the request was answered
@pytest.mark.parametrize("model", ["response_sender", "response_sender_async"])
def test_an_ordinary_model_answers_once_through_its_response_sender(served, model, plan, expected):
    assert streamed(served, model, plan, decoupled=False) == expected


def test_a_returned_response_closes_the_response_sender(served, caplog):
    assert streamed(served, "response_sender", ONE_ON_AND_POST_RETURN, decoupled=False) == [0]
    (served.runtime.options.repository / "response_sender" / "go").write_text("")
    deadline = time.monotonic() + 10  # logged by the model's thread
    while "after return" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "after return: Unable to send response. Response sender has been closed." in caplog.text
    (served.runtime.options.repository / "response_sender" / "go").unlink()


@pytest.mark.parametrize("model", ["response_sender", "response_sender_async"])
def test_an_ordinary_model_cannot_send_the_final_flag_first(served, model):
    [message] = streamed(served, model, ZERO_PRE, decoupled=False)
    assert "Unable to send response. Non-decoupled model cannot send complete final before sending a response." \
        in message


def test_a_decoupled_model_that_returns_a_response_fails_the_request(served):
    [message] = streamed(served, "response_sender_decoupled", ON_RETURN, decoupled=True)
    assert "using the decoupled mode and the execute function must return None" in message


@pytest.mark.parametrize("plan,expected", [(ON_RETURN, 0), (ONE_PRE, 1000), (ONE_POST, 2000)])
def test_an_ordinary_model_answers_http_and_unary_grpc_through_its_response_sender(served, plan, expected):
    http = httpclient.InferenceServerClient(served.http_url).infer("response_sender", inputs(httpclient, plan))
    grpc = grpcclient.InferenceServerClient(served.grpc_url).infer("response_sender_async", inputs(grpcclient, plan))
    assert http.as_numpy("INDEX").tolist() == grpc.as_numpy("INDEX").tolist() == [[expected]]


def streamed_together(served, model: str, plans: list, decoupled: bool) -> list:
    """Every INDEX of requests sent together on one stream (so that the model may get them in
    one batch), as Triton's _infer_parallel sends them; each request ends as in ``streamed``."""
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put((result, error)))
    indexes, ended = [], 0
    try:
        for plan in plans:
            client.async_stream_infer(model, inputs(grpcclient, plan), enable_empty_final_response=decoupled)
        while ended < len(plans):
            result, error = received.get(timeout=20)
            assert error is None, error.message()
            response = result.get_response()
            final = response.parameters.get("triton_final_response")
            if response.outputs:
                indexes.append(int(result.as_numpy("INDEX").sum()))
            ended += not decoupled or (final is not None and final.bool_param)
    finally:
        client.stop_stream()
    return sorted(indexes)


@pytest.mark.parametrize("model", ["response_sender_decoupled_batching", "response_sender_decoupled_async_batching"])
def test_decoupled_requests_each_responding_differently(served, model):
    plans = [ZERO_PRE, ZERO_POST, ONE_PRE, ONE_POST, TWO_PRE, TWO_POST, PRE_AND_POST]
    # Triton's test_decoupled_multiple_requests: 4 responses before return, 6 after
    assert streamed_together(served, model, plans, decoupled=True) == \
        [1000, 1000, 1000, 1001, 2000, 2000, 2000, 2001, 2001, 2002]


@pytest.mark.parametrize("model", ["response_sender_batching", "response_sender_async_batching"])
def test_ordinary_requests_each_responding_differently(served, model):
    # Triton's test_non_decoupled_multiple_requests: one returned, one before return, one after
    assert streamed_together(served, model, [ON_RETURN, ONE_PRE, ONE_POST], decoupled=False) == [0, 1000, 2000]


def test_an_ordinary_models_response_sender_refuses_misuse_with_tritons_texts(served, caplog):
    assert streamed(served, "ordinary_misuse", ZERO_PRE, decoupled=False) == [7]
    deadline = time.monotonic() + 10  # logged by the model just after its response
    while "misuse notes" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("misuse notes: Unable to send response. Non-decoupled model cannot send complete final before sending a "
            "response. | ok | Unable to send response. Non-decoupled model cannot send more than one response. | "
            "Unable to send response. Response sender has been closed.") in caplog.text
