"""A Python model's own readiness check, ``TritonPythonModel.is_ready()`` (Triton's
qa/L0_backend_python/model_readiness): the model is ready over both protocols when it returns
True (also from ``async def``), not ready when it returns False, raises or returns something else,
with Triton's log line "Model '<name>' version 1 is not ready: ..." for each check; its requests
are served either way. A check that takes longer than 5 s reports not ready, and a check asked
meanwhile waits for the one in flight. In stub processes and in the server's process."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

MODEL = '''
import asyncio
import json
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.answer = json.loads(args["model_config"])["parameters"]["ANSWER"]["string_value"]

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(
            r, "IN").as_numpy())]) for r in requests]

    def is_ready(self):
        if self.answer == "raise":
            raise RuntimeError("the cache is cold")
        if self.answer == "async":
            async def ready():
                await asyncio.sleep(0.01)
                return True
            return ready()
        if self.answer == "slow":
            time.sleep(6)
        return {"true": True, "slow": True, "false": False}.get(self.answer, "ready")
'''
CONFIG = '''
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
parameters { key: "ANSWER" value: { string_value: "%s" } }
'''
ANSWERS = {"true": None, "async": None, "false": "is_ready() returned False",
           "raise": "is_ready() raised RuntimeError: the cache is cold",
           "text": "is_ready() must return a bool, got str"}


@pytest.fixture(scope="module", params=["process", "thread"])
def served(request, tmp_path_factory, transports):
    repo: Path = tmp_path_factory.mktemp("readiness") / "repo"
    for answer in [*ANSWERS, "slow"]:
        write_python_model(repo, answer, CONFIG % answer, MODEL)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, python_isolation=request.param,
                           **transports)
    with BackgroundServer(options) as server:
        yield server


def _clients(server):
    return httpclient.InferenceServerClient(server.http_url), grpcclient.InferenceServerClient(server.grpc_url)


@pytest.mark.parametrize("answer", ANSWERS)
def test_the_models_is_ready_decides_and_requests_are_served(served, answer, caplog):
    data = np.array([1.5, 2.5], np.float32)
    with caplog.at_level(logging.ERROR, logger="tritonctl.serve"):
        for client, module in zip(_clients(served), (httpclient, grpcclient)):
            assert client.is_model_ready(answer) is (ANSWERS[answer] is None)
            tensor = module.InferInput("IN", [2], "FP32")
            tensor.set_data_from_numpy(data)
            np.testing.assert_array_equal(client.infer(answer, [tensor]).as_numpy("OUT"), data)
    line = f"Model '{answer}' version 1 is not ready: {ANSWERS[answer]}"
    assert caplog.text.count(line) == (0 if ANSWERS[answer] is None else 2)


def test_a_slow_check_is_not_ready_and_the_next_one_waits_for_it(served, transports):
    if transports["grpc_transport"] != "aio":
        pytest.skip("timed once per isolation: the check runs below either transport")
    http, grpc = _clients(served)
    started = time.monotonic()
    assert not http.is_model_ready("slow")  # is_ready() takes 6 s: not ready after 5
    assert 4.9 < time.monotonic() - started < 5.9
    assert grpc.is_model_ready("slow")  # the check in flight answers it: no second 6 s
    assert time.monotonic() - started < 7.5
