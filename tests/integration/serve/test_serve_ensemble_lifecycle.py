"""Ensembles against Triton 2.51's observed answers: the sequence fields every ensemble response
carries, and a step model unloaded and loaded again under a loaded ensemble (explicit mode)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

from helpers.serve_models import write_python_identity

# Y = identity(identity(A)), no batching
CHAIN = """
platform: "ensemble"
max_batch_size: 0
input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "identity" model_version: -1 input_map { key: "INPUT0" value: "A" } output_map { key: "OUTPUT0" value: "M" } },
  { model_name: "identity" model_version: -1 input_map { key: "INPUT0" value: "M" } output_map { key: "OUTPUT0" value: "Y" } }
] }
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("ensemble_lifecycle") / "repo"
    write_python_identity(repo)
    (repo / "chain" / "1").mkdir(parents=True)
    (repo / "chain" / "config.pbtxt").write_text(CHAIN)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["chain"], **transports)
    with BackgroundServer(options) as server:
        yield server


def _a(module):
    tensor = module.InferInput("A", [1], "FP32")
    tensor.set_data_from_numpy(np.array([2.0], np.float32))
    return [tensor]


def test_an_ensemble_response_carries_the_requests_sequence_fields(served):
    """Triton 2.51 answers {"sequence_id": 0, "sequence_start": false, "sequence_end": false} for a
    plain request, the request's own values otherwise (a string id stays a string); a Python
    model's response carries none."""
    http = httpclient.InferenceServerClient(served.http_url)
    assert http.infer("chain", _a(httpclient)).get_response()["parameters"] == \
        {"sequence_id": 0, "sequence_start": False, "sequence_end": False}
    given = http.infer("chain", _a(httpclient), sequence_id="abc", sequence_start=True, sequence_end=True)
    assert given.get_response()["parameters"] == {"sequence_id": "abc", "sequence_start": True, "sequence_end": True}
    step = httpclient.InferInput("INPUT0", [1], "FP32")
    step.set_data_from_numpy(np.array([2.0], np.float32))
    assert "parameters" not in http.infer("identity", [step]).get_response()
    grpc = grpcclient.InferenceServerClient(served.grpc_url)
    parameters = grpc.infer("chain", _a(grpcclient), sequence_id=7, sequence_end=True).get_response().parameters
    assert {key: value.WhichOneof("parameter_choice") for key, value in parameters.items()} == \
        {"sequence_id": "int64_param", "sequence_start": "bool_param", "sequence_end": "bool_param"}
    assert (parameters["sequence_id"].int64_param, parameters["sequence_start"].bool_param,
            parameters["sequence_end"].bool_param) == (7, False, True)


def test_unloading_a_step_unloads_the_ensemble_and_loading_it_loads_the_step(served):
    """As Triton 2.51: the ensemble loaded alone loads its step; unloading the step leaves both
    UNAVAILABLE "unloaded" (the ensemble answers NOT_FOUND under its own name); loading the
    ensemble again loads the step again."""
    http = httpclient.InferenceServerClient(served.http_url)
    assert http.is_model_ready("identity")
    http.unload_model("identity")
    index = {m["name"]: (m.get("state"), m.get("reason")) for m in http.get_model_repository_index()}
    assert index == {"identity": ("UNAVAILABLE", "unloaded"), "chain": ("UNAVAILABLE", "unloaded")}
    for module in (httpclient, grpcclient):
        client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
        with pytest.raises(InferenceServerException) as raised:
            client.infer("chain", _a(module))
        assert raised.value.message() == "Request for unknown model: 'chain' has no available versions"
        assert raised.value.status() in ("404", "StatusCode.NOT_FOUND")
    http.load_model("chain")
    assert http.is_model_ready("identity") and http.is_model_ready("chain")
    assert http.infer("chain", _a(httpclient)).as_numpy("Y").tolist() == [2.0]
