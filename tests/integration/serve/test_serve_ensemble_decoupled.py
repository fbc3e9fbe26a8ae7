"""Ensembles with decoupled steps, after Triton's qa/L0_decoupled (repeat_square, nested_square,
simple_repeat, sequence_repeat, fan_repeat): such an ensemble is itself decoupled, each response
of a decoupled step runs the steps after it once, and the ensemble streams one response per
completed set of outputs, then the final flag. Driven with the real tritonclient's gRPC stream,
HTTP generate_stream, HTTP and unary gRPC (refused) and a BLS call with exec(decoupled=True);
``test_answers_match_triton`` sends the same requests to the real Triton 2.51 too, where the
anchor (../shared/anchors) is set up."""

from __future__ import annotations

import json
import queue
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.triton_anchor import TritonServer, unavailable_reason
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

ANCHOR_UNAVAILABLE = unavailable_reason()

# Triton's repeat example: one response per element of IN, each after its DELAY (ms), sent by a
# thread; execute returns after WAIT (ms). A negative element is answered with an error response.
REPEAT = '''
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0]
            if values.shape != delays.shape:
                raise pb_utils.TritonModelException(
                    f"expected IN and DELAY shape to match, got {list(values.shape)} and {list(delays.shape)}")
            sender = request.get_response_sender()
            threading.Thread(target=self.respond, args=(sender, values, delays)).start()
            time.sleep(wait / 1000)
        return None

    def respond(self, sender, values, delays):
        for index, (value, delay) in enumerate(zip(values, delays)):
            time.sleep(delay / 1000)
            if value < 0:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"negative value {value}")))
                continue
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32)),
                                                    pb_utils.Tensor("IDX", np.array([index], np.uint32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''
REPEAT_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
        { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

# Triton's square example: IN responses of IN, sent before execute returns.
SQUARE = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            for _ in range(int(value[0])):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value.astype(np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
SQUARE_CONFIG = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

IDENTITY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            request, "INPUT0").as_numpy())]) for request in requests]
'''
IDENTITY_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

# The QA's libtorch_nobatch_int32_int32_int32: OUTPUT__0 = INPUT__0 - INPUT__1, OUTPUT__1 = the sum.
ADD_SUB = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a, b = (pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in ("INPUT__0", "INPUT__1"))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT__0", a - b),
                                                         pb_utils.Tensor("OUTPUT__1", a + b)]))
        return responses
'''
ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INPUT__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

# Calls the ensemble named by its input MODEL with exec(decoupled=True) and reports every response.
BLS_COLLECT = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            model = pb_utils.get_input_tensor_by_name(request, "MODEL").as_numpy()[0].decode()
            inputs = [pb_utils.Tensor("IN", values), pb_utils.Tensor("DELAY", np.zeros(values.shape, np.uint32)),
                      pb_utils.Tensor("WAIT", np.zeros([1], np.uint32))]
            call = pb_utils.InferenceRequest(model_name=model, requested_output_names=["OUT"], inputs=inputs)
            seen = []
            for response in call.exec(decoupled=True):
                if response.has_error():
                    seen.append(response.error().message())
                elif response.output_tensors():
                    seen.append(int(pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0]))
                else:
                    seen.append("final")
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT",
                                                                       np.array([json.dumps(seen)], dtype=object))]))
        return answers
'''
BLS_COLLECT_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "MODEL" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

ENSEMBLE_IO = """
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
        { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] } ]
"""


def step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    maps = [f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items()]
    maps += [f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items()]
    return f'{{ model_name: "{model}" model_version: -1 {" ".join(maps)} }}'


def ensemble(steps: list[str], outputs: str = '{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }') -> str:
    return (f'platform: "ensemble"\nmax_batch_size: 0\n{ENSEMBLE_IO}output [ {outputs} ]\n'
            f'ensemble_scheduling {{ step [ {", ".join(steps)} ] }}\n')


REPEAT_STEP = {"IN": "IN", "DELAY": "DELAY", "WAIT": "WAIT"}
ENSEMBLES = {
    "simple_repeat": ensemble([step("repeat_int32", REPEAT_STEP, {"OUT": "OUT", "IDX": "IDX"})],
                              '{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, '
                              '{ name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }'),
    "repeat_square": ensemble([step("repeat_int32", REPEAT_STEP, {"OUT": "repeat_out"}),
                               step("square_int32", {"IN": "repeat_out"}, {"OUT": "OUT"})]),
    "nested_square": ensemble([step("simple_repeat", REPEAT_STEP, {"OUT": "repeat_out"}),
                               step("square_int32", {"IN": "repeat_out"}, {"OUT": "OUT"})]),
    "sequence_repeat": ensemble([step("repeat_int32", REPEAT_STEP, {"OUT": "repeat_out"}),
                                 step("identity_int32", {"INPUT0": "repeat_out"}, {"OUTPUT0": "OUT"})]),
    "fan_repeat": ensemble([step("repeat_int32", REPEAT_STEP, {"OUT": "repeat_out"}),
                            step("identity_int32", {"INPUT0": "repeat_out"}, {"OUTPUT0": "identity_out"}),
                            step("add_sub_int32", {"INPUT__0": "repeat_out", "INPUT__1": "identity_out"},
                                 {"OUTPUT__1": "OUT"})]),
}


def write_repository(repo: Path) -> Path:
    """The models and ensembles above, in ``repo``."""
    models = {"repeat_int32": (REPEAT_CONFIG, REPEAT), "square_int32": (SQUARE_CONFIG, SQUARE),
              "identity_int32": (IDENTITY_CONFIG, IDENTITY), "add_sub_int32": (ADD_SUB_CONFIG, ADD_SUB),
              "bls_collect": (BLS_COLLECT_CONFIG, BLS_COLLECT)}
    models.update({name: (config, None) for name, config in ENSEMBLES.items()})
    for name, (config, source) in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(f'name: "{name}"\n{config}')
        if source is not None:
            (repo / name / "1" / "model.py").write_text(source)
    return repo


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = write_repository(tmp_path_factory.mktemp("ensemble_decoupled") / "repo")
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def repeat_inputs(values: list[int], delays: list[int] | None = None, module=grpcclient) -> list:
    """IN, DELAY (ms, 10 per value unless given) and WAIT (0 ms) for the repeat step."""
    arrays = {"IN": np.array(values, np.int32), "DELAY": np.array(delays or [10] * len(values), np.uint32),
              "WAIT": np.array([0], np.uint32)}
    return [module.InferInput(name, list(array.shape), "INT32" if name == "IN" else "UINT32").set_data_from_numpy(array)
            for name, array in arrays.items()]


def describe(result, error) -> dict:
    """A stream message as data: its error (which ends an ensemble request), or its outputs and
    triton_final_response."""
    if error is not None:
        return {"error": error.message(), "final": True}
    response = result.get_response()
    return {"outputs": {o.name: result.as_numpy(o.name).tolist() for o in response.outputs},
            "final": response.parameters["triton_final_response"].bool_param}


def stream(url: str, model: str, values: list[int], delays: list[int] | None = None) -> list[dict]:
    """Every message of one streamed request (the final flag alone included), up to its final one."""
    client = grpcclient.InferenceServerClient(url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(describe(result, error)))
    try:
        client.async_stream_infer(model, repeat_inputs(values, delays), request_id="r1",
                                  enable_empty_final_response=True)
        messages = [received.get(timeout=10)]
        while not messages[-1]["final"]:
            messages.append(received.get(timeout=10))
        return messages
    finally:
        client.stop_stream()
        assert received.empty(), f"messages after the final one: {list(received.queue)}"


def outs(messages: list[dict]) -> list[int]:
    return [m["outputs"]["OUT"][0] for m in messages if m.get("outputs")]


def squares(values: list[int]) -> list[int]:
    """What repeat_square answers for IN = values: each value, value times (the QA's _nested_validate)."""
    return [value for value in values for _ in range(value)]


def ensemble_stats(url: str, model: str) -> dict:
    stats = httpclient.InferenceServerClient(url).get_inference_statistics(model)["model_stats"][0]
    return {"success": stats["inference_stats"]["success"]["count"],
            "fail": stats["inference_stats"]["fail"]["count"], "executions": stats["execution_count"]}


def test_each_response_of_a_decoupled_step_runs_the_next_step_once(served):
    messages = stream(served.grpc_url, "repeat_square", [2, 3])
    assert outs(messages) == squares([2, 3])
    # square_int32 sends its final flag on its own: so does the ensemble, after the last response
    assert [m["final"] for m in messages] == [False] * 5 + [True] and messages[-1]["outputs"] == {}
    assert outs(stream(served.grpc_url, "nested_square", [1, 2])) == squares([1, 2])  # an ensemble as the step


def test_the_qa_repeat_ensembles_answer_as_in_tritons_decoupled_test(served):
    simple = stream(served.grpc_url, "simple_repeat", [4, 5, 6])
    assert [m["outputs"] for m in simple[:3]] == [{"OUT": [4 + j], "IDX": [j]} for j in range(3)]
    assert outs(stream(served.grpc_url, "sequence_repeat", [4, 5])) == [4, 5]
    assert outs(stream(served.grpc_url, "fan_repeat", [4, 5])) == [8, 10]  # repeat_out + identity_out


def test_no_response_from_a_decoupled_step_is_the_final_flag_alone(served):
    assert stream(served.grpc_url, "repeat_square", []) == [{"outputs": {}, "final": True}]
    assert stream(served.grpc_url, "nested_square", []) == [{"outputs": {}, "final": True}]
    assert outs(stream(served.grpc_url, "repeat_square", [0, 2])) == [2, 2]  # no square of 0


def test_a_steps_error_ends_the_request_under_the_ensembles_prefix(served):
    before = ensemble_stats(served.http_url, "repeat_square")
    messages = stream(served.grpc_url, "repeat_square", [2, -1, 3], delays=[10, 100, 10])
    assert outs(messages) == [2, 2]  # nothing after the error, though repeat_int32 goes on
    assert messages[-1] == {"error": "in ensemble 'repeat_square', negative value -1", "final": True}
    # Triton counts one failure where a step still ran when the error was answered, else two
    assert ensemble_stats(served.http_url, "repeat_square")["fail"] == before["fail"] + 1
    (raised,) = stream(served.grpc_url, "repeat_square", [1], delays=[1, 1])
    assert raised["error"].startswith(
        "in ensemble 'repeat_square', Failed to process the request(s) for model 'repeat_int32_0_0', message: "
        "TritonModelException: expected IN and DELAY shape to match, got [1] and [2]\n\nAt:\n")
    assert ensemble_stats(served.http_url, "repeat_square")["fail"] == before["fail"] + 3
    assert ensemble_stats(served.http_url, "repeat_square")["success"] == before["success"]
    nested_before = ensemble_stats(served.http_url, "nested_square")
    assert stream(served.grpc_url, "nested_square", [-1]) == [
        {"error": "in ensemble 'nested_square', in ensemble 'simple_repeat', negative value -1", "final": True}]
    # simple_repeat's request is never released (repeat_int32 still ran): nor is nested_square's
    assert ensemble_stats(served.http_url, "nested_square")["fail"] == nested_before["fail"] + 1


def test_a_request_counts_as_one_execution_whatever_its_responses(served):
    before = ensemble_stats(served.http_url, "repeat_square")
    stream(served.grpc_url, "repeat_square", [1, 2])
    stream(served.grpc_url, "repeat_square", [])
    after = ensemble_stats(served.http_url, "repeat_square")
    assert {key: after[key] - before[key] for key in after} == {"success": 2, "fail": 0, "executions": 2}


def test_the_ensemble_is_decoupled_and_refuses_unary_calls(served):
    client = httpclient.InferenceServerClient(served.http_url)
    for name in ("repeat_square", "nested_square", "simple_repeat"):
        assert client.get_model_config(name)["model_transaction_policy"] == {"decoupled": True}
    assert client.get_model_metadata("repeat_square")["platform"] == "ensemble"
    with pytest.raises(InferenceServerException) as raised:
        client.infer("repeat_square", repeat_inputs([1], module=httpclient))
    assert (raised.value.status(), raised.value.message()) == (
        "501", "HTTP end point doesn't support models with decoupled transaction policy")
    with pytest.raises(InferenceServerException) as raised:
        grpcclient.InferenceServerClient(served.grpc_url).infer("repeat_square", repeat_inputs([1]))
    assert (raised.value.status(), raised.value.message()) == (
        "StatusCode.UNIMPLEMENTED", "ModelInfer RPC doesn't support models with decoupled transaction policy")


def generate(url: str, endpoint: str) -> tuple[int, str]:
    """POST repeat_square's inputs for IN = [2, 3] as JSON to generate or generate_stream."""
    body = json.dumps({"IN": [2, 3], "DELAY": [0, 0], "WAIT": [0]}).encode()
    request = urllib.request.Request(f"http://{url}/v2/models/repeat_square/{endpoint}", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, reply.read().decode()


def test_http_generate_stream_sends_each_response(served):
    status, text = generate(served.http_url, "generate_stream")
    events = [json.loads(line[len("data: "):]) for line in text.split("\n\n") if line]
    assert status == 200 and [event["OUT"] for event in events] == squares([2, 3])
    assert generate(served.http_url, "generate") == (200, json.dumps({
        "error": "generate expects model to produce exactly 1 response, use generate stream for model that "
                 "generates various number of responses"}, separators=(",", ":")))


def bls_collect(url: str, model: str, values: list[int]) -> list:
    array = np.array(values, np.int32)
    inputs = [httpclient.InferInput("IN", list(array.shape), "INT32").set_data_from_numpy(array),
              httpclient.InferInput("MODEL", [1], "BYTES").set_data_from_numpy(np.array([model.encode()], object))]
    return json.loads(httpclient.InferenceServerClient(url).infer("bls_collect", inputs).as_numpy("REPORT")[0])


def test_bls_exec_decoupled_reads_every_response_of_the_ensemble(served):
    assert bls_collect(served.http_url, "repeat_square", [2, 3]) == squares([2, 3]) + ["final"]
    assert bls_collect(served.http_url, "nested_square", [1, 2]) == squares([1, 2]) + ["final"]
    assert bls_collect(served.http_url, "repeat_square", []) == ["final"]


def test_a_cancelled_stream_stops_the_steps_still_to_come(served):
    square_before = httpclient.InferenceServerClient(served.http_url).get_inference_statistics(
        "square_int32")["model_stats"][0]["inference_count"]
    before = ensemble_stats(served.http_url, "repeat_square")
    client = grpcclient.InferenceServerClient(served.grpc_url)
    received: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: received.put(describe(result, error)))
    client.async_stream_infer("repeat_square", repeat_inputs([1, 1, 1], delays=[0, 400, 400]), request_id="r1")
    assert outs([received.get(timeout=10)]) == [1]
    client.stop_stream(cancel_requests=True)
    deadline = time.monotonic() + 5
    while ensemble_stats(served.http_url, "repeat_square")["fail"] == before["fail"] and time.monotonic() < deadline:
        time.sleep(0.05)
    square_after = httpclient.InferenceServerClient(served.http_url).get_inference_statistics(
        "square_int32")["model_stats"][0]["inference_count"]
    assert square_after - square_before == 1  # the second response of repeat_int32 found the request cancelled
    assert ensemble_stats(served.http_url, "repeat_square")["fail"] == before["fail"] + 1


def answers(http_url: str, grpc_url: str) -> dict:
    """What a server answers to the cases above whose outcome does not depend on timing (a
    non-decoupled last step may finish before or after repeat_int32's final flag)."""
    client = httpclient.InferenceServerClient(http_url)
    found: dict = {f"config {name}": client.get_model_config(name)["model_transaction_policy"]
                   for name in ("repeat_square", "nested_square", "simple_repeat")}
    cases = {"squares": ("repeat_square", [2, 3], None), "nested": ("nested_square", [1, 2], None),
             "simple": ("simple_repeat", [4, 5], None), "none": ("repeat_square", [], None),
             "zero square": ("repeat_square", [0, 2], None), "error": ("repeat_square", [2, -1, 3], [10, 100, 10]),
             "raise": ("repeat_square", [1], [1, 1]), "nested error": ("nested_square", [-1], None)}
    for case, (model, values, delays) in cases.items():
        found[case] = stream(grpc_url, model, values, delays)
    for model in ("repeat_square", "nested_square"):
        found[f"bls {model}"] = bls_collect(http_url, model, [1, 2])
    with pytest.raises(InferenceServerException) as raised:
        grpcclient.InferenceServerClient(grpc_url).infer("repeat_square", repeat_inputs([1]))
    found["unary"] = (raised.value.status(), raised.value.message())
    found["generate_stream"], found["generate"] = generate(http_url, "generate_stream"), generate(http_url, "generate")
    time.sleep(0.5)  # Triton counts a request once its last step request is released
    for model in ("repeat_square", "nested_square", "simple_repeat"):
        found[f"statistics {model}"] = ensemble_stats(http_url, model)
    return found


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.skipif(ANCHOR_UNAVAILABLE is not None, reason=ANCHOR_UNAVAILABLE or "")
def test_answers_match_triton(tmp_path_factory):
    """Triton 2.51 and serve on the same repository: the same responses in the same order, final
    flags, error texts, refusal, BLS reports and ensemble statistics."""
    repo = write_repository(tmp_path_factory.mktemp("ensemble_decoupled_anchor") / "repo")
    triton = TritonServer(repo, tmp_path_factory.mktemp("triton-logs"), args=("--load-model=*",))
    triton.start()
    try:
        tritons = answers(f"127.0.0.1:{triton.http_port}", f"127.0.0.1:{triton.grpc_port}")
    finally:  # the failed requests Triton never releases would hold up a graceful stop
        triton.stop(graceful=False)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0)) as served:
        assert answers(served.http_url, served.grpc_url) == tritons
