"""BLS: Python models that run other models (an ONNX model, another Python model, themselves)
with pb_utils.InferenceRequest(...).exec() and async_exec(), served and called with the real
tritonclient."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

from helpers.serve_models import write_add_sub

PYTHON_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
input [ {inputs} ]
output [ {outputs} ]
instance_group [ {{ kind: KIND_CPU count: {count} }} ]
"""
FP32_PAIR_IN = ('{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, '
                '{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }')
FP32_PAIR_OUT = ('{ name: "SUM2" data_type: TYPE_FP32 dims: [ 4 ] }, '
                 '{ name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] }')
REPORT_IN = '{ name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }'
REPORT_OUT = '{ name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] }'

DOUBLER = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN")
                                                                .as_numpy() * 2)]) for r in requests]
'''

# SUM2 = 2 * (INPUT0 + INPUT1) and DIFF = INPUT0 - INPUT1: add_sub (ONNX), then doubler (Python);
# the doubler call runs in a thread the model starts, as models do for parallel calls.
BLS_SYNC = '''
import threading
import triton_python_backend_utils as pb_utils

def run(model, inputs, outputs):
    response = pb_utils.InferenceRequest(model_name=model, inputs=inputs, requested_output_names=outputs).exec()
    if response.has_error():
        raise pb_utils.TritonModelException(response.error().message())
    return [pb_utils.get_output_tensor_by_name(response, name).as_numpy() for name in outputs]

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, n) for n in ("INPUT0", "INPUT1")]
            total, diff = run("add_sub", inputs, ["OUTPUT0", "OUTPUT1"])
            doubled = []
            worker = threading.Thread(target=lambda: doubled.extend(run("doubler", [pb_utils.Tensor("IN", total)],
                                                                         ["OUT"])))
            worker.start()
            worker.join()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM2", doubled[0]),
                                                         pb_utils.Tensor("DIFF", diff)]))
        return responses
'''

# The same with async_exec: both halves of the work in flight at once.
BLS_ASYNC = '''
import asyncio
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            a, b = (pb_utils.get_input_tensor_by_name(request, n).as_numpy() for n in ("INPUT0", "INPUT1"))
            add_sub = pb_utils.InferenceRequest(model_name="add_sub", requested_output_names=["OUTPUT1"],
                                                inputs=[pb_utils.Tensor("INPUT0", a), pb_utils.Tensor("INPUT1", b)])
            doubler = pb_utils.InferenceRequest(model_name="doubler", requested_output_names=["OUT"],
                                                inputs=[pb_utils.Tensor("IN", a + b)])
            diff, doubled = await asyncio.gather(add_sub.async_exec(), doubler.async_exec())
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM2", pb_utils.get_output_tensor_by_name(doubled, "OUT").as_numpy()),
                pb_utils.Tensor("DIFF", pb_utils.get_output_tensor_by_name(diff, "OUTPUT1").as_numpy())]))
        return responses
'''

# Calls that fail, each reported as (message, code) of the response's error.
BLS_ERRORS = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

def outcome(model, inputs, outputs=("OUT",), **options):
    request = pb_utils.InferenceRequest(model_name=model, inputs=inputs, requested_output_names=list(outputs),
                                        **options)
    response = request.exec()
    return [response.error().message(), int(response.error().code())] if response.has_error() else "ok"

class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()
        matrix = x.reshape(1, -1)  # doubler takes [-1, -1]
        report = {
            "unknown_model": outcome("no_such_model", [pb_utils.Tensor("IN", x)]),
            "unknown_version": outcome("doubler", [pb_utils.Tensor("IN", matrix)], model_version=7),
            "wrong_dtype": outcome("doubler", [pb_utils.Tensor("IN", matrix.astype(np.int32))]),
            "unknown_output": outcome("doubler", [pb_utils.Tensor("IN", matrix)], ["NOPE"]),
            "raises": outcome("raising", [pb_utils.Tensor("IN", x)]),
            "not_found_code": outcome("refusing", [pb_utils.Tensor("IN", x)]),
            "too_few_inputs": outcome("add_sub", [pb_utils.Tensor("INPUT0", matrix.astype(np.float64))]),
            "too_many_inputs": outcome("add_sub", [pb_utils.Tensor(n, matrix) for n in ("INPUT0", "INPUT1", "X")]),
            "unknown_input": outcome("add_sub", [pb_utils.Tensor(n, matrix) for n in ("INPUT0", "X")]),
        }
        return [pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([json.dumps(report)], dtype=object))])
                for _ in requests]
'''

RAISING = '''
class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("raising refuses")
'''

REFUSING = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("nothing here", pb_utils.TritonError.NOT_FOUND))
                for _ in requests]
'''

# With IN[0] > 0 the model calls itself with IN - 1 and reports what came back.
SELF_CALL = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            text = "leaf"
            if x[0] > 0:
                inner = pb_utils.InferenceRequest(model_name=self.name, requested_output_names=["REPORT"],
                                                  inputs=[pb_utils.Tensor("IN", x - 1)]).exec()
                text = inner.error().message() if inner.has_error() else \\
                    "inner: " + pb_utils.get_output_tensor_by_name(inner, "REPORT").as_numpy()[0].decode()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([text], dtype=object))]))
        return responses
'''

# Four BLS requests at once on "batched", whose dynamic batcher waits for a batch of 4.
BLS_FAN_OUT = '''
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        a = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy().reshape(1, 4)
        calls = [pb_utils.InferenceRequest(model_name="batched", requested_output_names=["OUTPUT0"],
                                           inputs=[pb_utils.Tensor("INPUT0", a * i), pb_utils.Tensor("INPUT1", a)])
                 for i in range(4)]
        answers = await asyncio.gather(*(call.async_exec() for call in calls))
        sums = [pb_utils.get_output_tensor_by_name(r, "OUTPUT0").as_numpy().tolist() for r in answers]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([repr(sums)], dtype=object))])
                for _ in requests]
'''


# A decoupled model sending IN[0] responses of OUT = IN, then the final flag alone (python_backend's
# examples/decoupled/square_model.py).
SQUARE = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            count = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            threading.Thread(target=self.respond, args=(request.get_response_sender(), count)).start()

    def respond(self, sender, count):
        for _ in range(int(count[0])):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", count.astype(np.float32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

# What Triton's qa/python_models/bls checks of a response iterator, a request's flags, a DLPack
# capsule of an output and BLS calls from the processes of a multiprocessing pool.
BLS_OBJECTS = '''
import json, sys
from multiprocessing import Pool
import numpy as np
import triton_python_backend_utils as pb_utils

def doubled(value):
    request = pb_utils.InferenceRequest(model_name="doubler", requested_output_names=["OUT"],
                                        inputs=[pb_utils.Tensor("IN", np.array([[value]], np.float32))])
    return float(pb_utils.get_output_tensor_by_name(request.exec(), "OUT").as_numpy()[0, 0])

def count(iterator):
    return sum(1 for _ in iterator)

class TritonPythonModel:
    def execute(self, requests):
        request = pb_utils.InferenceRequest(model_name="square", requested_output_names=["OUT"],
                                            inputs=[pb_utils.Tensor("IN", np.array([3], np.int32))])
        responses = request.exec(decoupled=True)
        first = len(next(responses).output_tensors())
        rest, again = count(responses), count(responses)
        try:
            next(responses)
            after_end = "no StopIteration"
        except StopIteration:
            after_end = "StopIteration"
        for taken, _ in enumerate(responses, 1):
            if taken == 2:
                break
        resumed = count(responses)
        request.set_flags(pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END)
        output = pb_utils.get_output_tensor_by_name(pb_utils.InferenceRequest(
            model_name="doubler", requested_output_names=["OUT"],
            inputs=[pb_utils.Tensor("IN", np.ones([1, 4], np.float32))]).exec(), "OUT")
        before = sys.getrefcount(output)
        capsule = output.to_dlpack()
        held = sys.getrefcount(output) - before
        capsule = None
        released = sys.getrefcount(output) - before
        with Pool(2) as pool:
            from_pool = pool.map(doubled, [1.0, 2.0, 3.0])
        report = {"first": first, "rest": rest, "again": again, "after_end": after_end, "resumed": resumed,
                  "flags": request.flags(), "held": held, "released": released, "from_pool": from_pool}
        return [pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([json.dumps(report)], dtype=object))])
                for _ in requests]
'''


def python_model(repo: Path, name: str, source: str, inputs: str, outputs: str, max_batch: int = 0,
                 count: int = 1, extra: str = "") -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(source)
    (repo / name / "config.pbtxt").write_text(PYTHON_CONFIG.format(name=name, max_batch=max_batch, inputs=inputs,
                                                                   outputs=outputs, count=count) + extra)


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("bls") / "repo"
    write_add_sub(repo, extra="dynamic_batching { }")
    write_add_sub(repo, "batched", extra="dynamic_batching { preferred_batch_size: [ 4 ] "
                                         "max_queue_delay_microseconds: 5000000 }")
    vector_in, vector_out = REPORT_IN, '{ name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }'
    python_model(repo, "doubler", DOUBLER, vector_in.replace("[ -1 ]", "[ -1, -1 ]"),
                 vector_out.replace("[ -1 ]", "[ -1, -1 ]"))
    python_model(repo, "raising", RAISING, vector_in, vector_out)
    python_model(repo, "refusing", REFUSING, vector_in, vector_out)
    python_model(repo, "bls_sync", BLS_SYNC, FP32_PAIR_IN, FP32_PAIR_OUT, max_batch=8)
    python_model(repo, "bls_async", BLS_ASYNC, FP32_PAIR_IN, FP32_PAIR_OUT, max_batch=8)
    python_model(repo, "bls_errors", BLS_ERRORS, REPORT_IN, REPORT_OUT)
    python_model(repo, "bls_fan_out", BLS_FAN_OUT, REPORT_IN, REPORT_OUT)
    python_model(repo, "self_call", SELF_CALL, REPORT_IN, REPORT_OUT)
    python_model(repo, "self_call_pair", SELF_CALL, REPORT_IN, REPORT_OUT, count=2)
    python_model(repo, "square", SQUARE, '{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', vector_out,
                 extra="model_transaction_policy { decoupled: true }\n")
    python_model(repo, "bls_objects", BLS_OBJECTS, REPORT_IN, REPORT_OUT)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def pair(module, a: np.ndarray, b: np.ndarray) -> list:
    tensors = [module.InferInput("INPUT0", list(a.shape), "FP32"), module.InferInput("INPUT1", list(b.shape), "FP32")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    return tensors


def report(served, model: str, values) -> str:
    client = httpclient.InferenceServerClient(served.http_url)
    x = np.array(values, np.float32)
    tensor = httpclient.InferInput("IN", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(model, [tensor]).as_numpy("REPORT")[0].decode()


def inference_count(served, model: str) -> int:
    stats = httpclient.InferenceServerClient(served.http_url).get_inference_statistics(model)
    return stats["model_stats"][0]["inference_count"]


@pytest.mark.parametrize("model", ["bls_sync", "bls_async"])
@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_bls_runs_the_onnx_model_and_another_python_model(served, model, module):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.full((3, 4), 0.5, np.float32)
    before = inference_count(served, "add_sub"), inference_count(served, "doubler")
    result = client.infer(model, pair(module, a, b))
    np.testing.assert_array_equal(result.as_numpy("SUM2"), 2 * (a + b))
    np.testing.assert_array_equal(result.as_numpy("DIFF"), a - b)
    # the BLS requests went through the targets' own schedulers: their statistics count them
    assert (inference_count(served, "add_sub"), inference_count(served, "doubler")) == (before[0] + 3, before[1] + 1)


def test_errors_of_the_target_come_back_in_the_response_as_triton_reports_them(served):
    outcomes = json.loads(report(served, "bls_errors", [1.0, 2.0]))
    prefix = "Model {} - Error when running inference: "
    assert outcomes["unknown_model"] == [prefix.format("no_such_model") + "Failed for execute the inference request. "
                                         "Model 'no_such_model' is not ready.", 1]
    assert outcomes["unknown_version"] == [prefix.format("doubler") + "Failed for execute the inference request. "
                                           "Model 'doubler' is not ready.", 1]
    assert outcomes["wrong_dtype"] == [prefix.format("doubler") + "[request id: <id_unknown>] inference input 'IN' "
                                       "data-type is 'INT32', but model 'doubler' expects 'FP32'", 1]
    assert outcomes["unknown_output"] == [prefix.format("doubler") + "unexpected inference output 'NOPE' for model "
                                          "'doubler'", 1]
    message, code = outcomes["raises"]
    assert message.startswith("Failed to process the request(s) for model 'raising_0_0', message: ValueError: "
                              "raising refuses\n\nAt:\n") and code == 1
    assert outcomes["not_found_code"] == ["nothing here", 2]  # the target's own code (TritonError.NOT_FOUND)
    # the count of inputs is checked first; an unknown name among the right count of inputs is
    # reported without the request id, as Triton does
    assert outcomes["too_few_inputs"] == [prefix.format("add_sub") + "[request id: <id_unknown>] expected 2 inputs "
                                          "but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing "
                                          "required input(s) ['INPUT1']. Please provide all required input(s).", 1]
    assert outcomes["too_many_inputs"] == [prefix.format("add_sub") + "[request id: <id_unknown>] expected 2 inputs "
                                           "but got 3 inputs for model 'add_sub'. Got input(s) ['INPUT0','INPUT1','X'], "
                                           "but missing required input(s) ]. Please provide all required input(s).", 1]
    assert outcomes["unknown_input"] == [prefix.format("add_sub") + "unexpected inference input 'X' for model "
                                         "'add_sub'", 1]


def test_response_iterators_flags_dlpack_and_forked_processes_behave_as_in_triton(served):
    outcome = json.loads(report(served, "bls_objects", [1.0]))
    # 3 responses and the empty final one: a new iteration after the last goes over all four again
    assert (outcome["first"], outcome["rest"], outcome["again"], outcome["after_end"]) == (1, 3, 4, "StopIteration")
    assert outcome["resumed"] == 2  # an iteration broken off is resumed where it stopped
    assert outcome["flags"] == 2  # set_flags(TRITONSERVER_REQUEST_FLAG_SEQUENCE_END)
    assert (outcome["held"], outcome["released"]) == (1, 0)  # the capsule holds the tensor until dropped
    assert outcome["from_pool"] == [2.0, 4.0, 6.0]


def test_bls_requests_are_batched_by_the_targets_dynamic_batcher(served):
    client = httpclient.InferenceServerClient(served.http_url)
    executions = client.get_inference_statistics("batched")["model_stats"][0]["execution_count"]
    sums = report(served, "bls_fan_out", [1.0, 2.0, 3.0, 4.0])
    assert sums == repr([[[(i + 1.0) * v for v in (1.0, 2.0, 3.0, 4.0)]] for i in range(4)])
    stats = client.get_inference_statistics("batched")["model_stats"][0]
    assert stats["execution_count"] == executions + 1  # the four requests ran as one batch of 4
    assert stats["batch_stats"][-1]["batch_size"] == 4


def test_a_model_calling_itself_with_its_only_instance_gets_an_error_instead_of_hanging(served):
    text = report(served, "self_call", [1.0])
    assert text == ("Model self_call - Error when running inference: the request would wait forever: every instance "
                    "of model 'self_call' is busy waiting for BLS requests that cannot run before this one is "
                    "answered (Triton blocks here for good). Give model 'self_call' more instances (instance_group "
                    "count) or avoid the circular call")
    assert report(served, "self_call", [0.0]) == "leaf"  # the instance is free again
    # with a second instance the inner request has somewhere to run; one level deeper, the two
    # instances wait for each other, and the innermost call is the one refused
    assert report(served, "self_call_pair", [1.0]) == "inner: leaf"
    assert report(served, "self_call_pair", [2.0]).startswith(
        "inner: Model self_call_pair - Error when running inference: the request would wait forever")
