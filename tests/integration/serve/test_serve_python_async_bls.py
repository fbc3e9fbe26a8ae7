"""Async decoupled Python models run their executions at once, also when each awaits a BLS call
to another decoupled model (Triton's qa/L0_backend_python/async_execute concurrency cases): an
``async_exec(decoupled=True)`` is done once its first response is here, so iterating it does not
hold the model's event loop. In stub processes and in the server's process."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

SLEEPER = '''
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        waits = [float(pb_utils.get_input_tensor_by_name(r, "WAIT").as_numpy()[0][0]) for r in requests]
        await asyncio.gather(*(asyncio.sleep(w) for w in waits))
        for request in requests:
            request.get_response_sender().send(pb_utils.InferenceResponse([pb_utils.Tensor(
                "OUT", np.zeros((1, 1), np.float32))]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
CALLER = '''
import asyncio
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def _one(self, request):
        wait = pb_utils.get_input_tensor_by_name(request, "WAIT")
        responses = await pb_utils.InferenceRequest(model_name="sleeper", requested_output_names=["OUT"],
                                                    inputs=[pb_utils.Tensor("WAIT", wait.as_numpy())]
                                                    ).async_exec(decoupled=True)
        sender = request.get_response_sender()
        for response in responses:
            sender.send(pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(response, "OUT")]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    async def execute(self, requests):
        await asyncio.gather(*(self._one(r) for r in requests))
        return None
'''
CONFIG = '''
max_batch_size: 8
input [ { name: "WAIT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
'''
WAIT_S = 1.5


@pytest.mark.parametrize("isolation", ["process", "thread"])
@pytest.mark.parametrize("model", ["sleeper", "caller"])
def test_four_waiting_requests_take_the_time_of_one(tmp_path, isolation, model):
    write_python_model(tmp_path, "sleeper", CONFIG, SLEEPER)
    write_python_model(tmp_path, "caller", CONFIG, CALLER)
    options = ServeOptions(tmp_path, http_port=0, grpc_port=0, metrics_port=0, python_isolation=isolation)
    with BackgroundServer(options) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        results: list = []
        all_in = threading.Event()

        def callback(result, error):
            results.append(error or result)
            if len(results) == 4:
                all_in.set()

        client.start_stream(callback)
        tensor = grpcclient.InferInput("WAIT", [1, 1], "FP32")
        tensor.set_data_from_numpy(np.full((1, 1), WAIT_S, np.float32))
        start = time.monotonic()
        for _ in range(4):
            client.async_stream_infer(model, [tensor])
        assert all_in.wait(30)
        elapsed = time.monotonic() - start
        client.stop_stream()
    assert all(not isinstance(r, Exception) for r in results), results
    assert elapsed < 1.9 * WAIT_S, f"4 requests of {WAIT_S} s each took {elapsed:.1f} s: they ran one after another"
