"""Response parameters of Python models (``InferenceResponse(..., parameters=...)``), the cases of
Triton's qa/L0_backend_python/parameters: they reach the client over gRPC and HTTP, a decoupled
model's responses carry them beside ``triton_final_response``, a BLS caller reads its callee's,
and what cannot be a parameter is refused with Triton's words. In stub processes and in the
server's process."""

from __future__ import annotations

import json
import queue
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

ECHO = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "PARAMETERS").as_numpy()[0].decode()
            params = json.loads(text)
            if isinstance(params, dict):  # digit keys become int keys, to see them refused
                params = {int(k) if k.isdigit() else k: v for k, v in params.items()}
            try:
                response = pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", np.array([text], dtype=object))],
                                                      parameters=params)
                if json.loads(response.parameters() or "{}") != params:
                    raise Exception("the parameters read back differ")
            except Exception as exc:
                response = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc),
                                                                                 pb_utils.TritonError.INVALID_ARG))
            responses.append(response)
        return responses
'''
STREAMER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for params in json.loads(pb_utils.get_input_tensor_by_name(request, "PARAMETERS").as_numpy()[0]):
                out = pb_utils.Tensor("OUTPUT", np.array([json.dumps(params)], dtype=object))
                sender.send(pb_utils.InferenceResponse([out], parameters=params))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
CALLER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "PARAMETERS")
            answer = pb_utils.InferenceRequest(model_name="echo", inputs=[tensor], requested_output_names=["OUTPUT"],
                                               trace=request.trace()).exec()  # as Triton's examples pass it
            seen = json.loads(answer.parameters() or "{}") == json.loads(tensor.as_numpy()[0])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", np.array([str(seen)],
                                                                                              dtype=object))]))
        return responses
'''
IO = '''
max_batch_size: 0
input [ { name: "PARAMETERS" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_STRING dims: [ 1 ] } ]
'''


@pytest.fixture(scope="module", params=["process", "thread"])
def served(request, tmp_path_factory, transports):
    repo: Path = tmp_path_factory.mktemp("response_parameters") / "repo"
    for name, code, extra in (("echo", ECHO, ""), ("caller", CALLER, ""),
                              ("streamer", STREAMER, "model_transaction_policy { decoupled: true }")):
        write_python_model(repo, name, IO + extra + "\n", code)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, python_isolation=request.param,
                           **transports)
    with BackgroundServer(options) as server:
        yield server


def _inputs(module, params) -> list:
    tensor = module.InferInput("PARAMETERS", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([json.dumps(params)], dtype=object))
    return [tensor]


def _grpc_parameters(result) -> dict:
    return {key: getattr(value, value.WhichOneof("parameter_choice"))
            for key, value in result.get_response().parameters.items()}


SET = [{}, {"many_elements": False}, {"bool": True, "str": "Hello World!", "int": 1024},
       {"a": "1", "b": "2", "c": 3, "d": False, "e": 5, "f": ""}]


@pytest.mark.parametrize("params", SET, ids=lambda p: f"{len(p)}-parameters")
def test_response_parameters_reach_the_client(served, params):
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        result = client.infer("echo", _inputs(grpcclient, params))
    assert _grpc_parameters(result) == params
    assert result.as_numpy("OUTPUT")[0].decode() == json.dumps(params)
    over_http = httpclient.InferenceServerClient(served.http_url).infer("echo", _inputs(httpclient, params))
    assert (over_http.get_response().get("parameters") or {}) == params


@pytest.mark.parametrize("params, text", [
    ([], ", got <class 'list'>"),
    ({"1": "int key"}, "Expect parameters keys to have type str, found type <class 'int'>"),
    ({"int": 2, "float": 0.5}, "Expect parameters values to have type bool/int/str, found type <class 'float'>"),
    ({"bool": True, "null": None}, "Expect parameters values to have type bool/int/str, found type <class 'NoneType'>"),
    ({"str": "", "list": ["variable"]},
     "Expect parameters values to have type bool/int/str, found type <class 'list'>"),
])
def test_what_cannot_be_a_parameter_is_refused(served, params, text):
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        with pytest.raises(InferenceServerException) as raised:
            client.infer("echo", _inputs(grpcclient, params))
    assert "[StatusCode.INVALID_ARGUMENT] " in str(raised.value) and text in str(raised.value)


def test_a_decoupled_models_responses_carry_their_parameters(served):
    params = [{"bool": False, "int": 2048}, {"str": "Hello World!"}]
    answers: queue.SimpleQueue = queue.SimpleQueue()
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer("streamer", _inputs(grpcclient, params))
        client.stop_stream()
    for expected in params:
        result, error = answers.get(timeout=10)
        assert error is None and _grpc_parameters(result) == {**expected, "triton_final_response": False}


def test_a_bls_caller_reads_its_callees_parameters(served):
    params = {"bool": False, "int": 2048, "str": "Hello World!"}
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        assert client.infer("caller", _inputs(grpcclient, params)).as_numpy("OUTPUT")[0] == b"True"
