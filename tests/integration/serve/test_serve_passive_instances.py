"""Passive instance groups (``passive: true``, after Triton's qa/L0_passive_instance): their
instances are made and initialized but the scheduler gives them no work; a model whose every
instance is passive refuses requests at once instead of leaving them queued for ever."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# Answers the name of the instance that ran the request; each instance marks its initialize.
WHO_PY = '''
import json
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        marks = json.loads(args["model_config"])["parameters"]["marks"]["string_value"]
        (Path(marks) / self.name).touch()

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WHO", np.array([self.name.encode()], np.object_))])
                for _ in requests]
'''


def _config(marks, groups: str) -> str:
    return f"""
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "WHO" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {groups} ]
parameters [ {{ key: "marks" value {{ string_value: "{marks}" }} }} ]
"""


@pytest.fixture
def served(tmp_path, transports):
    marks = tmp_path / "marks"
    marks.mkdir()
    write_python_model(tmp_path / "repo", "mixed", _config(marks, '{ name: "active" kind: KIND_CPU count: 1 }, '
                                                                  '{ name: "standby" kind: KIND_CPU count: 2 passive: true }'),
                       WHO_PY)
    write_python_model(tmp_path / "repo", "all_passive",
                       _config(marks, '{ name: "idle" kind: KIND_CPU count: 1 passive: true }'), WHO_PY)
    options = ServeOptions(tmp_path / "repo", http_port=0, grpc_port=0, metrics_port=None, exit_timeout_secs=5,
                           control_mode="explicit", load_models=["*"], **transports)
    with BackgroundServer(options) as server:
        yield server, marks


def _who(module, url: str, model: str) -> str:
    tensor = module.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    with module.InferenceServerClient(url) as client:
        return client.infer(model, [tensor]).as_numpy("WHO")[0].decode()


def test_passive_instances_are_initialized_and_get_no_work(served):
    server, marks = served
    assert sorted(p.name for p in marks.iterdir()) == ["active_0", "idle_0", "standby_0", "standby_1"]
    answered = {_who(module, url, "mixed") for module, url in ((httpclient, server.http_url),
                                                                (grpcclient, server.grpc_url)) for _ in range(6)}
    assert answered == {"active_0"}


def test_a_model_whose_every_instance_is_passive_refuses_requests_at_once(served):
    server, _ = served
    with httpclient.InferenceServerClient(server.http_url) as client:
        assert client.is_model_ready("all_passive")  # loaded, as in Triton
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        with pytest.raises(InferenceServerException) as caught:
            _who(module, url, "all_passive")
        assert "takes no requests: every instance of it is passive" in caught.value.message()
        assert caught.value.status() in ("503", "StatusCode.UNAVAILABLE")


def test_an_update_that_makes_the_passive_group_active_sends_it_work(served):
    server, marks = served
    with httpclient.InferenceServerClient(server.http_url) as client:
        config = client.get_model_config("all_passive")
        config["instance_group"][0]["passive"] = False
        client.load_model("all_passive", config=json.dumps(config))
    assert _who(httpclient, server.http_url, "all_passive") == "idle_0"
