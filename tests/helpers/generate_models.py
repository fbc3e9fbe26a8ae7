"""Models for the generate extension's tests (written for both servers: the bundled one and the
real Triton, whose Python backend takes them as they are).

- ``mock_llm`` (decoupled) and ``mock_llm_nd`` (not): inputs PROMPT (BYTES [1, 1]), STREAM (BOOL
  [1, 1]) and an optional input_ids (INT32 [1, -1]); output TEXT. Request parameters steer them:
  REPETITION (responses, default 1), DELAY (seconds before each), FAIL_LAST (the final flag
  carries an error response, "An Error Occurred"). The decoupled one answers STREAM false with one
  response; the other answers STREAM true with an error, and repeats PROMPT REPETITION times along
  its second dimension. A decoupled request that sees itself cancelled stops sending and, where
  CANCELLED_FILE is a parameter, writes "cancelled" there.
- ``types``: one optional input per datatype and shape kind (F32 [-1], F16 [-1], I8 [-1],
  U64 [-1], B BOOL [2, -1], S BYTES [-1, 2], FIX INT32 [2, 3], TWO INT32 [-1, -1], BF BF16 [-1]);
  its one output OUT is a JSON text of what it received: each input's shape, numpy dtype and
  values, and the request's parameters."""

from __future__ import annotations

from pathlib import Path

from helpers.serve_models import write_python_model

MOCK_LLM_CONFIG = """\
max_batch_size: 0
{policy}
input [
  {{ name: "PROMPT" data_type: TYPE_STRING dims: [ 1, 1 ] }},
  {{ name: "STREAM" data_type: TYPE_BOOL dims: [ 1, 1 ] }},
  {{ name: "input_ids" data_type: TYPE_INT32 dims: [ 1, -1 ] optional: true }}
]
output [ {{ name: "TEXT" data_type: TYPE_STRING dims: [ 1, -1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

MOCK_LLM_PY = """\
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = config.get("model_transaction_policy", {}).get("decoupled", False)

    def execute(self, requests):
        if self.decoupled:
            for request in requests:
                self.stream(request)
            return None
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()
            if pb_utils.get_input_tensor_by_name(request, "STREAM").as_numpy().flatten()[0]:
                error = pb_utils.TritonError("STREAM only supported in decoupled mode")
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                text = np.repeat(prompt, params.get("REPETITION", 1), axis=1)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", text)]))
        return responses

    def stream(self, request):
        params = json.loads(request.parameters())
        sender = request.get_response_sender()
        prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()
        response = pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", prompt)])
        if not pb_utils.get_input_tensor_by_name(request, "STREAM").as_numpy().flatten()[0]:
            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        for _ in range(params.get("REPETITION", 1)):
            if params.get("DELAY") is not None:
                time.sleep(params["DELAY"])
            if sender.is_cancelled():
                if "CANCELLED_FILE" in params:
                    with open(params["CANCELLED_FILE"], "w") as out:
                        out.write("cancelled")
                break
            sender.send(response)
        last = None
        if params.get("FAIL_LAST"):
            last = pb_utils.InferenceResponse(error=pb_utils.TritonError("An Error Occurred"))
        sender.send(last, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

TYPES_CONFIG = """\
max_batch_size: 0
input [
  { name: "F32" data_type: TYPE_FP32 dims: [ -1 ] optional: true },
  { name: "F16" data_type: TYPE_FP16 dims: [ -1 ] optional: true },
  { name: "I8" data_type: TYPE_INT8 dims: [ -1 ] optional: true },
  { name: "U64" data_type: TYPE_UINT64 dims: [ -1 ] optional: true },
  { name: "B" data_type: TYPE_BOOL dims: [ 2, -1 ] optional: true },
  { name: "S" data_type: TYPE_STRING dims: [ -1, 2 ] optional: true },
  { name: "FIX" data_type: TYPE_INT32 dims: [ 2, 3 ] optional: true },
  { name: "TWO" data_type: TYPE_INT32 dims: [ -1, -1 ] optional: true },
  { name: "BF" data_type: TYPE_BF16 dims: [ -1 ] optional: true }
]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ -1 ] } ]
"""

TYPES_PY = """\
import json

import numpy as np
import triton_python_backend_utils as pb_utils

NAMES = ["F32", "F16", "I8", "U64", "B", "S", "FIX", "TWO", "BF"]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seen = {"params": json.loads(request.parameters())}
            for name in NAMES:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    array = tensor.as_numpy()
                    values = [item.decode() for item in array.flatten()] if array.dtype == object else array.tolist()
                    seen[name] = [list(array.shape), str(array.dtype), values]
            text = np.array([json.dumps(seen, sort_keys=True).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return responses
"""


def write_mock_llm(repo: Path, name: str = "mock_llm", decoupled: bool = True) -> Path:
    policy = "model_transaction_policy { decoupled: true }" if decoupled else ""
    return write_python_model(repo, name, MOCK_LLM_CONFIG.format(policy=policy), MOCK_LLM_PY)


def generate_repository(repo: Path) -> Path:
    """mock_llm, mock_llm_nd and types in ``repo``."""
    write_mock_llm(repo)
    write_mock_llm(repo, "mock_llm_nd", decoupled=False)
    write_python_model(repo, "types", TYPES_CONFIG, TYPES_PY)
    return repo
