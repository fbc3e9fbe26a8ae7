"""Python-based backends, as Triton's qa/L0_backend_python/python_based_backends sets one up: a
backend directory holding ``add_sub/model.py``; models whose whole config is ``backend:
"add_sub"`` and whose version directories hold only what that model reads (``model.json``, found
through ``pb_utils.get_model_dir()``); its ``auto_complete_config`` fills in the inputs and
outputs; loaded and reloaded through the repository API. In stub processes and in the server's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tritonctl.serve.runtime import BackgroundServer, ServeOptions

BACKEND = '''
import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        names = {t["name"] for t in config.as_dict()["input"] + config.as_dict()["output"]}
        for name in ("INPUT0", "INPUT1"):
            if name not in names:
                config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        if "OUTPUT" not in names:
            config.add_output({"name": "OUTPUT", "data_type": "TYPE_FP32", "dims": [4]})
        return config

    def initialize(self, args):
        with open(os.path.join(pb_utils.get_model_dir(), "model.json")) as file:
            self.operation = json.load(file)["operation"]
        self.version = args["model_version"]

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out = a + b if self.operation == "add" else a - b
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out.astype("float32"))]))
        return responses
'''


def model(repo: Path, name: str, operation: str, versions=(1,)) -> None:
    (repo / name).mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text('backend: "add_sub"\n')
    for version in versions:
        (repo / name / str(version)).mkdir()
        (repo / name / str(version) / "model.json").write_text(json.dumps({"operation": operation}))


@pytest.fixture(params=["process", "thread"])
def server(request, tmp_path):
    backends = tmp_path / "backends"
    (backends / "add_sub").mkdir(parents=True)
    (backends / "add_sub" / "model.py").write_text(BACKEND)
    model(tmp_path / "repo", "add", "add", versions=(1, 2))
    model(tmp_path / "repo", "sub", "sub")
    (tmp_path / "repo" / "other").mkdir()
    (tmp_path / "repo" / "other" / "config.pbtxt").write_text('backend: "nowhere"\n')
    (tmp_path / "repo" / "other" / "1").mkdir()
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           python_isolation=request.param, backend_directory=backends)
    with BackgroundServer(options) as running:
        yield running


def infer(client, name: str, version: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = np.random.default_rng(1).random((2, 4), dtype=np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer(name, inputs, model_version=version, outputs=[grpcclient.InferRequestedOutput("OUTPUT")])
    return a, b, result.as_numpy("OUTPUT")


def test_models_of_a_python_based_backend_load_and_answer(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.load_model("add", config=json.dumps({"backend": "add_sub", "version_policy": {"latest": {"num_versions": 2}}}))
    client.load_model("sub")
    for version in ("1", "2"):
        assert client.is_model_ready("add", version)
        a, b, out = infer(client, "add", version)
        assert np.allclose(out, a + b)
    a, b, out = infer(client, "sub")
    assert np.allclose(out, a - b)
    config = client.get_model_config("sub", as_json=True)["config"]
    assert [t["name"] for t in config["input"]] == ["INPUT0", "INPUT1"]  # from the backend's auto_complete_config


def test_the_config_names_the_backends_model_py_as_runtime(server):
    """As Triton 2.51 answers (measured with L0_backend_python/python_based_backends' models): a
    model of a Python-based backend, loaded from its file or with a config override, has
    ``runtime: "model.py"``, the file Triton runs for it."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.load_model("add", config=json.dumps({"backend": "add_sub"}))
    client.load_model("sub")
    for name in ("add", "sub"):
        config = client.get_model_config(name, as_json=True)["config"]
        assert (config["backend"], config["runtime"]) == ("add_sub", "model.py")


def test_a_backend_that_is_nowhere_is_named_with_where_it_was_looked_for(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException) as refused:
        client.load_model("other")
    assert "unable to find backend library for backend 'nowhere'" in refused.value.message()
    assert "Python-based backends (" in refused.value.message() and "/<backend>/model.py" in refused.value.message()
