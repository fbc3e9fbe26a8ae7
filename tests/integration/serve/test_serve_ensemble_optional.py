"""Triton's L0_optional_input ensemble cases: ensembles whose steps have optional inputs the
request (or an earlier step) leaves out run, as Triton's ensemble scheduler runs them, and an
ensemble reports its own execution and batch statistics (one execution per request, with the
request's batch size, its compute times the sums of its steps')."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# Triton's optional_identity: OUTPUTi = INPUTi for the inputs the request carries, no other output.
OPTIONAL_IDENTITY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for index in ("0", "1"):
                tensor = pb_utils.get_input_tensor_by_name(request, "INPUT" + index)
                if tensor is not None:
                    outputs.append(pb_utils.Tensor("OUTPUT" + index, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''

IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] optional: true },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

IDENTITY = 'backend: "python"\nmax_batch_size: 4\n' + IO + "dynamic_batching { }\n"


def step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1{maps} }}'


def ensemble(name: str, *steps: str) -> str:
    return f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 4\n{IO}ensemble_scheduling {{ step [ ' \
           + ", ".join(steps) + " ] }\n"


BOTH = {"INPUT0": "INPUT0", "INPUT1": "INPUT1"}
ENSEMBLES = {
    # a wrapper over identity_2_float32
    "ensemble_identity_2_float32": ensemble("ensemble_identity_2_float32", step(
        "identity_2_float32", BOTH, {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"})),
    # the second step connects only INPUT1 (its INPUT0 is optional)
    "pipeline_identity_2_float32": ensemble("pipeline_identity_2_float32",
        step("identity_2_float32", BOTH, {"OUTPUT0": "internal_output"}),
        step("identity_2_float32", {"INPUT1": "internal_output"}, {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"})),
    # the first step produces only one of the tensors the second step's inputs are connected to
    "optional_connecting_tensor": ensemble("optional_connecting_tensor",
        step("optional_identity", BOTH, {"OUTPUT0": "internal_output0", "OUTPUT1": "internal_output1"}),
        step("optional_identity", {"INPUT0": "internal_output0", "INPUT1": "internal_output1"},
             {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"})),
    # two independent steps: a request for OUTPUT0 only runs the first (Triton prunes the other)
    "two_branches": ensemble("two_branches",
        step("branch_a", {"INPUT0": "INPUT0"}, {"OUTPUT0": "OUTPUT0"}),
        step("branch_b", {"INPUT1": "INPUT1"}, {"OUTPUT1": "OUTPUT1"})),
    # the statistics case, over a composing model of its own
    "stats_ensemble": ensemble("stats_ensemble", step(
        "stats_identity", BOTH, {"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"})),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("optional_input") / "repo"
    for name in ("identity_2_float32", "optional_identity", "stats_identity", "branch_a", "branch_b"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(OPTIONAL_IDENTITY)
        (repo / name / "config.pbtxt").write_text(f'name: "{name}"\n' + IDENTITY)
    for name, config in ENSEMBLES.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


DATA = {"INPUT0": np.ones((1, 1), np.float32), "INPUT1": np.zeros((1, 1), np.float32)}
OUTPUT_OF = {"INPUT0": "OUTPUT0", "INPUT1": "OUTPUT1"}


def infer(served, module, model: str, provided: tuple[str, ...], requested: tuple[str, ...] | None = None):
    client = module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)
    inputs = []
    for name in provided:
        tensor = module.InferInput(name, [1, 1], "FP32")
        tensor.set_data_from_numpy(DATA[name])
        inputs.append(tensor)
    names = [OUTPUT_OF[n] for n in provided] if requested is None else requested
    return client.infer(model, inputs, outputs=[module.InferRequestedOutput(n) for n in names])


MODULES = pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])


@MODULES
@pytest.mark.parametrize("provided", [("INPUT0", "INPUT1"), ("INPUT1",), ("INPUT0",)])
def test_an_ensemble_runs_with_optional_inputs_left_out(served, module, provided):
    result = infer(served, module, "ensemble_identity_2_float32", provided)
    for name in provided:
        assert np.array_equal(result.as_numpy(OUTPUT_OF[name]), DATA[name])


@MODULES
def test_a_step_may_leave_an_optional_input_unconnected(served, module):
    # OUTPUT1 = INPUT0 through internal_output; the second step's model makes no OUTPUT0 (it got no
    # INPUT0), and an ensemble output no step produced is left out of the response, as in Triton
    result = infer(served, module, "pipeline_identity_2_float32", ("INPUT0", "INPUT1"), ("OUTPUT0", "OUTPUT1"))
    assert np.array_equal(result.as_numpy("OUTPUT1"), DATA["INPUT0"])
    assert result.as_numpy("OUTPUT0") is None


@MODULES
def test_an_output_a_step_did_not_produce_feeds_an_optional_input_as_left_out(served, module):
    result = infer(served, module, "optional_connecting_tensor", ("INPUT0",))
    assert np.array_equal(result.as_numpy("OUTPUT0"), DATA["INPUT0"])


def test_an_ensemble_reports_one_execution_per_request_with_its_batch_size(served):
    for provided in (("INPUT0", "INPUT1"), ("INPUT1",), ("INPUT0",), ("INPUT1",)):
        infer(served, grpcclient, "stats_ensemble", provided)
    client = grpcclient.InferenceServerClient(served.grpc_url)
    ensemble = client.get_inference_statistics("stats_ensemble", "1", as_json=True)["model_stats"][0]
    composing = client.get_inference_statistics("stats_identity", "1", as_json=True)["model_stats"][0]
    assert ensemble["execution_count"] == ensemble["inference_count"] == "4"
    assert ensemble["inference_stats"]["success"]["count"] == "4"
    [batch] = ensemble["batch_stats"]
    assert batch["batch_size"] == "1" and batch["compute_infer"]["count"] == "4"
    # the ensemble's compute times are its steps' (here one step per request), summed
    assert ensemble["inference_stats"]["compute_infer"] == composing["inference_stats"]["compute_infer"]
    assert composing["inference_stats"]["success"]["count"] == "4"


def test_steps_no_requested_output_depends_on_do_not_run(served):
    result = infer(served, grpcclient, "two_branches", ("INPUT0", "INPUT1"), ("OUTPUT0",))
    assert np.array_equal(result.as_numpy("OUTPUT0"), DATA["INPUT0"]) and result.as_numpy("OUTPUT1") is None
    client = grpcclient.InferenceServerClient(served.grpc_url)
    counts = {name: client.get_inference_statistics(name, "1", as_json=True)["model_stats"][0].get("execution_count", "0")
              for name in ("branch_a", "branch_b")}
    assert counts == {"branch_a": "1", "branch_b": "0"}
