"""A Python model's ``auto_complete_config``: the server calls it at load and serves the config it
returns; pb_utils.ModelConfig refuses what Triton's refuses, in Triton's words."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers.serve_models import loaded_server
from tritonctl.serve.backends.pb_utils import ModelConfig
from tritonctl.serve.core.types import InferRequest, InferTensor

COMPLETING = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [3]})
        auto_complete_model_config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]})
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        {extra}
        return auto_complete_model_config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN")
                                                            .as_numpy() * 2)]) for r in requests]
"""


def write_model(repo: Path, name: str, source: str, config: str = "") -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(textwrap.dedent(source))
    (repo / name / "config.pbtxt").write_text('backend: "python"\n' + config)


@pytest.fixture
def server(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "completed", COMPLETING.replace("{extra}", ""))
    write_model(repo, "partly_written", COMPLETING.replace("{extra}", ""), 'output [ { name: "OUT" } ]\n')
    write_model(repo, "conflicting", COMPLETING.replace("{extra}", ""),
                'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 3 ] } ]\n')
    write_model(repo, "returns_nothing", COMPLETING.replace("return auto_complete_model_config", "return None")
                .replace("{extra}", ""))
    write_model(repo, "decoupled", COMPLETING.replace(
        "{extra}", 'auto_complete_model_config.set_model_transaction_policy({"decoupled": True})'))
    with loaded_server(repo) as server:
        yield server


def test_the_completed_config_is_served(server):
    config = server.model_config_json("completed")
    assert config["max_batch_size"] == 8 and "dynamic_batching" in config
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [("IN", "TYPE_FP32", [3])]
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["output"]] == [("OUT", "TYPE_FP32", [3])]
    done, box = threading.Event(), {}

    def complete(response, error):
        box.update(response=response, error=error)
        done.set()

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    server.submit(InferRequest("completed", {"IN": InferTensor("IN", "FP32", x)}, complete=complete))
    assert done.wait(5) and box["error"] is None
    assert box["response"].outputs[0].data.tolist() == (x * 2).tolist()
    assert server.model_config_json("decoupled")["model_transaction_policy"] == {"decoupled": True}


def test_a_failing_auto_complete_stops_only_its_model(server):
    index = {row["name"]: row for row in server.manager.index()}
    assert index["completed"]["state"] == "READY" and index["decoupled"]["state"] == "READY"
    # an output listed without data_type and dims is completed by auto_complete_config, as in Triton
    assert index["partly_written"]["state"] == "READY", index["partly_written"]
    assert index["conflicting"]["state"] == "UNAVAILABLE"
    assert ("unable to load model 'conflicting', configuration expects datatype TYPE_INT32 for input 'IN', model "
            "provides TYPE_FP32") in index["conflicting"]["reason"]
    assert index["returns_nothing"]["state"] == "UNAVAILABLE"
    assert ("auto_complete_config function in model 'returns_nothing' must return a valid pb.ModelConfig object"
            in index["returns_nothing"]["reason"])


def test_model_config_refuses_what_triton_refuses():
    config = ModelConfig('{"name": "m", "max_batch_size": 16, "input": [], "output": [], '
                          '"sequence_batching": {}}')
    with pytest.raises(ValueError, match="configuration specified max_batch_size 16, but in auto-complete-config "
                                         "function for model 'm' specified max_batch_size 4"):
        config.set_max_batch_size(4)
    with pytest.raises(ValueError, match="scheduling_choice as 'sequence_batching'"):
        config.set_dynamic_batching()
    with pytest.raises(ValueError, match="contains property other than 'name', 'data_type', 'dims' and 'optional'"):
        config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1], "format": "FORMAT_NCHW"})
    with pytest.raises(ValueError, match="output 'B' in auto-complete-config function for model 'm' is missing "
                                         "'dims' property"):
        config.add_output({"name": "B", "data_type": "TYPE_FP32"})
    with pytest.raises(ValueError, match="contains property other than 'decoupled'"):
        config.set_model_transaction_policy({"decoupled": True, "stream": True})


def test_model_config_completes_an_entry_of_the_same_name():
    config = ModelConfig('{"name": "m", "input": [{"name": "A", "data_type": "TYPE_INVALID", "dims": []}]}')
    config.add_input({"name": "A", "data_type": "TYPE_FP16", "dims": [2, 2]})
    config.add_input({"name": "B", "data_type": "TYPE_FP16", "dims": [1], "optional": True})
    assert config.as_dict()["input"] == [{"name": "A", "data_type": "TYPE_FP16", "dims": [2, 2]},
                                         {"name": "B", "data_type": "TYPE_FP16", "dims": [1], "optional": True}]
    with pytest.raises(ValueError, match="the model expects dims \\[3\\] but the model configuration specifies "
                                         "dims \\[2, 2\\]"):
        config.add_input({"name": "A", "data_type": "TYPE_FP16", "dims": [3]})
    config.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="trying to change decoupled property"):
        config.set_model_transaction_policy({"decoupled": True})
