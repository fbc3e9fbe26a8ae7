"""The model loading API of Python models (``pb_utils.load_model``, ``unload_model``,
``is_model_ready``), as Triton's Python backend has it: a model that loads, reloads with another
config and unloads another one, in explicit model control mode; the server's refusals reach it as
TritonModelException. In stub processes and in the server's process."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

CONTROLLER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            op, name, extra = json.loads(pb_utils.get_input_tensor_by_name(request, "ORDER").as_numpy()[0])
            try:
                if op == "load":
                    result = pb_utils.load_model(name, config=extra)
                elif op == "load_files":  # extra: [config, {"file:...": text}]
                    config, files = json.loads(extra)
                    result = pb_utils.load_model(name, config, {k: v.encode() for k, v in files.items()})
                elif op == "unload":
                    result = pb_utils.unload_model(name)
                else:
                    result = pb_utils.is_model_ready(name, extra)
                answer = {"result": result}
            except pb_utils.TritonModelException as exc:
                answer = {"refused": str(exc)}
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("ANSWER", np.array([json.dumps(answer)],
                                                                                              dtype=object))]))
        return responses
'''
STRING_IO = '''
max_batch_size: 0
input [ { name: "ORDER" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "ANSWER" data_type: TYPE_STRING dims: [ 1 ] } ]
'''
ADD_ONE = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN")
                                                            .as_numpy() + 1)]) for r in requests]
'''
FP32_IO = '''
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
'''


@pytest.fixture(params=["process", "thread"])
def served(request, tmp_path: Path, transports):
    repo = tmp_path / "repo"
    write_python_model(repo, "controller", STRING_IO, CONTROLLER)
    write_python_model(repo, "target", FP32_IO, ADD_ONE)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["controller"], python_isolation=request.param, **transports)
    with BackgroundServer(options) as server:
        yield server


def order(client, op: str, name: str, extra: str = "") -> dict:
    tensor = httpclient.InferInput("ORDER", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([json.dumps([op, name, extra])], dtype=object))
    return json.loads(client.infer("controller", [tensor]).as_numpy("ANSWER")[0])


def test_a_model_loads_reloads_and_unloads_another(served):
    client = httpclient.InferenceServerClient(served.http_url)
    assert order(client, "ready", "target") == {"result": False}
    assert order(client, "load", "target") == {"result": None}
    assert order(client, "ready", "target") == {"result": True} and client.is_model_ready("target")
    tensor = httpclient.InferInput("IN", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.array([[1, 2]], np.float32))
    assert client.infer("target", [tensor]).as_numpy("OUT").tolist() == [[2, 3]]
    config = client.get_model_config("target")
    config["max_batch_size"] = 2
    assert order(client, "load", "target", json.dumps(config)) == {"result": None}
    assert client.get_model_config("target")["max_batch_size"] == 2
    assert order(client, "unload", "target") == {"result": None}
    assert order(client, "ready", "target") == {"result": False} and not client.is_model_ready("target")


def test_a_model_loads_another_from_files_it_sends(served):
    client = httpclient.InferenceServerClient(served.http_url)
    config = {"backend": "python", "max_batch_size": 4, "input": [{"name": "IN", "data_type": "TYPE_FP32",
              "dims": [2]}], "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}]}
    files = {"file:1/model.py": ADD_ONE.replace("+ 1)", "+ 10)")}
    assert order(client, "load_files", "made", json.dumps([json.dumps(config), files])) == {"result": None}
    tensor = httpclient.InferInput("IN", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.array([[1, 2]], np.float32))
    assert client.infer("made", [tensor]).as_numpy("OUT").tolist() == [[11, 12]]
    refused = order(client, "load_files", "made", json.dumps(["", files]))["refused"]
    assert refused.startswith("failed to load 'made', failed to poll from model repository: Load parameter 'config' "
                              "must be specified for model file override")


def test_what_the_server_refuses_reaches_the_model(served):
    client = httpclient.InferenceServerClient(served.http_url)
    assert "failed to load 'nowhere'" in order(client, "load", "nowhere")["refused"]
    assert "failed to load 'target', failed to poll from model repository: the 'config' override is not a "\
           "valid ModelConfig JSON" in \
        order(client, "load", "target", "{not json")["refused"]
    assert "version" in order(client, "ready", "target", "x")["refused"]  # a version that cannot be one


def test_outside_explicit_mode_loading_is_refused(tmp_path, transports):
    repo = tmp_path / "repo"
    write_python_model(repo, "controller", STRING_IO, CONTROLLER)
    write_python_model(repo, "target", FP32_IO, ADD_ONE)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert order(client, "ready", "target") == {"result": True}
        refused = order(client, "unload", "target")["refused"]
        with grpc.insecure_channel(server.grpc_url) as channel:  # the mode is checked before the name
            with pytest.raises(grpc.RpcError) as nameless:
                service_pb2_grpc.GRPCInferenceServiceStub(channel).RepositoryModelLoad(
                    service_pb2.RepositoryModelLoadRequest(model_name=""))
    assert refused == "explicit model load / unload is not allowed if polling is enabled"
    assert nameless.value.code() == grpc.StatusCode.UNAVAILABLE and nameless.value.details() == refused


# As Triton's qa/python_models/bls_model_loading: the loading API works in initialize (BLS does not).
STARTER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = {"before": pb_utils.is_model_ready("target")}
        pb_utils.load_model("target")
        self.seen["after"] = pb_utils.is_model_ready("target")
        request = pb_utils.InferenceRequest(model_name="target", requested_output_names=["OUT"],
                                            inputs=[pb_utils.Tensor("IN", np.zeros((1, 2), np.float32))])
        try:
            request.exec()
        except pb_utils.TritonModelException as exc:
            self.seen["bls"] = str(exc)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("ANSWER", np.array([json.dumps(self.seen)], object))])
                for _ in requests]
'''


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_initialize_loads_another_model_but_sends_it_no_request(tmp_path, isolation):
    repo = tmp_path / "repo"
    write_python_model(repo, "starter", STRING_IO, STARTER)
    write_python_model(repo, "target", FP32_IO, ADD_ONE)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["starter"], python_isolation=isolation)
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_model_ready("target")
        tensor = httpclient.InferInput("ORDER", [1], "BYTES")
        tensor.set_data_from_numpy(np.array(["what did initialize see?"], dtype=object))
        seen = json.loads(client.infer("starter", [tensor]).as_numpy("ANSWER")[0])
    assert seen["before"] is False and seen["after"] is True
    assert seen["bls"].startswith("BLS is only supported during the 'execute' function.")
