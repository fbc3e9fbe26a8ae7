"""Triton's Python backend in process: model.py loading, initialize / execute / finalize, the
pb_utils module, and how a model's failures reach the client."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers.serve_models import loaded_server
from tritonctl.serve.core.errors import ServeError, Status
from tritonctl.serve.core.types import InferRequest, InferTensor, RequestedOutput

CONFIG = """
backend: "python"
max_batch_size: {mbs}
input [ {{ name: "{inp}" data_type: {dtype} dims: [ {dims} ] }} ]
output [
  {{ name: "OUT" data_type: {dtype} dims: [ {dims} ] }},
  {{ name: "EXTRA" data_type: {dtype} dims: [ {dims} ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{extra}
"""

ECHO = """
import json
from pathlib import Path
import triton_python_backend_utils as pb_utils
from helper import twice

class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        config = json.loads(args["model_config"])
        self.dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUT")["data_type"])
        self.batches = []

    def execute(self, requests):
        self.batches.append(len(requests))
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            outputs = [pb_utils.Tensor("OUT", twice(x).astype(self.dtype)), pb_utils.Tensor("EXTRA", x)]
            if "INFO" in request.requested_output_names():
                outputs = []
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

    def finalize(self):
        Path(self.args["model_repository"], "finalized.json").write_text(
            json.dumps({"args": {k: v for k, v in self.args.items() if k != "model_config"},
                        "batches": self.batches}))
"""

FAILING = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = request.get_input_tensor_by_name("X").as_numpy()
            if x.flat[0] < 0:
                raise ValueError("negative input")
            if x.flat[0] == 0:
                error = pb_utils.TritonError("zero is not allowed", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
"""

TEXT = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            words = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            upper = np.array([w.decode().upper().encode() for w in words.reshape(-1)], dtype=object)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", upper.reshape(words.shape))]))
        return out
"""


def write_model(repo: Path, name: str, source: str, mbs: int = 8, dtype: str = "TYPE_FP32", dims: str = "2",
                extra: str = "", files: dict[str, str] | None = None, inp: str = "X") -> Path:
    version = repo / name / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(textwrap.dedent(source))
    for filename, text in (files or {}).items():
        (version / filename).write_text(text)
    (repo / name / "config.pbtxt").write_text(CONFIG.format(mbs=mbs, dtype=dtype, dims=dims, extra=extra, inp=inp))
    return repo / name


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    helper = {"helper.py": "def twice(x):\n    return x * 2\n"}
    write_model(repo, "echo", ECHO, files=helper, extra="dynamic_batching { max_queue_delay_microseconds: 200000 "
                                                         "preferred_batch_size: [ 4 ] }")
    write_model(repo, "failing", FAILING, mbs=0)
    write_model(repo, "text", TEXT, dtype="TYPE_STRING")
    write_model(repo, "bad_import", "import not_a_module_anywhere\n\n\nclass TritonPythonModel:\n    pass\n")
    write_model(repo, "bad_init", "class TritonPythonModel:\n    def initialize(self, args):\n"
                                  "        raise RuntimeError('no weights')\n")
    write_model(repo, "no_class", "X = 1\n")
    return repo


@pytest.fixture
def server(repo):
    with loaded_server(repo) as server:
        yield server


def submit(server, model: str, x: np.ndarray, datatype: str = "FP32", outputs: list[str] | None = None):
    done = threading.Event()
    box = {}

    def complete(response, error):
        box.update(response=response, error=error)
        done.set()

    requested = None if outputs is None else [RequestedOutput(n) for n in outputs]
    server.submit(InferRequest(model, {"X": InferTensor("X", datatype, x)}, requested_outputs=requested,
                               complete=complete, id="r1"))
    return done, box


def infer(server, model: str, x: np.ndarray, datatype: str = "FP32", outputs: list[str] | None = None):
    done, box = submit(server, model, x, datatype, outputs)
    assert done.wait(5)
    if box["error"] is not None:
        raise box["error"]
    return {t.name: (t.datatype, t.data) for t in box["response"].outputs}


def test_load_failures_name_the_cause_and_the_other_models_serve(server):
    index = {row["name"]: row for row in server.manager.index()}
    assert {n: r["state"] for n, r in index.items()} == {
        "echo": "READY", "failing": "READY", "text": "READY", "bad_import": "UNAVAILABLE",
        "bad_init": "UNAVAILABLE", "no_class": "UNAVAILABLE"}
    assert "ModuleNotFoundError: No module named 'not_a_module_anywhere' (at model.py:1" \
        in index["bad_import"]["reason"]
    assert "failed to initialize python model 'bad_init' instance 'bad_init_0_0': RuntimeError: no weights " \
           "(at model.py:3 in initialize)" in index["bad_init"]["reason"]
    assert index["no_class"]["reason"].startswith("PY01 ")  # `tritonctl validate`'s own check
    assert "triton_python_backend_utils" not in sys.modules  # only there while a model loads


def test_initialize_args_execute_batches_and_finalize(server, repo):
    x = np.array([[1.0, 2.0]], np.float32)
    out = infer(server, "echo", x, outputs=["OUT"])
    assert list(out) == ["OUT"] and out["OUT"][0] == "FP32" and np.array_equal(out["OUT"][1], x * 2)
    both = infer(server, "echo", x)
    assert list(both) == ["OUT", "EXTRA"]
    assert infer(server, "echo", x, outputs=["EXTRA"])["EXTRA"][1].tolist() == x.tolist()
    # four requests queued together reach execute() as one batch of four separate requests
    pending = [submit(server, "echo", np.full((1, 2), i, np.float32)) for i in range(4)]
    for i, (done, box) in enumerate(pending):
        assert done.wait(5) and box["error"] is None
        assert box["response"].outputs[0].data.tolist() == [[2.0 * i, 2.0 * i]]
    server.manager.unload("echo")
    record = json.loads((repo / "echo" / "finalized.json").read_text())
    assert record["args"] == {"model_instance_kind": "CPU", "model_instance_name": "echo_0_0",
                              "model_instance_device_id": "0", "model_repository": str(repo / "echo"),
                              "model_version": "1", "model_name": "echo"}
    assert record["batches"][-1] == 4


def test_model_errors_map_to_tritons_status_and_the_model_keeps_serving(server):
    with pytest.raises(ServeError) as raised:
        infer(server, "failing", np.array([-1.0, 1.0], np.float32))
    assert raised.value.status is Status.INTERNAL
    model_file = server.manager.get("failing").model_dir / "1" / "model.py"
    assert raised.value.message == ("Failed to process the request(s) for model 'failing_0_0', message: "
                                    f"ValueError: negative input\n\nAt:\n  {model_file}(10): execute\n")
    with pytest.raises(ServeError) as raised:
        infer(server, "failing", np.array([0.0, 1.0], np.float32))
    assert raised.value.status is Status.INVALID_ARG and raised.value.message == "zero is not allowed"
    out = infer(server, "failing", np.array([3.0, 1.0], np.float32))
    assert out["OUT"][1].tolist() == [3.0, 1.0]
    stats = server.statistics("failing")["model_stats"][0]["inference_stats"]
    assert stats["fail"]["count"] == 1 and stats["success"]["count"] == 2  # an error response counts as a success


def test_bytes_tensors_in_and_out(server):
    words = np.array([[b"ab", b"cd"]], dtype=object)
    datatype, data = infer(server, "text", words, "BYTES")["OUT"]
    assert datatype == "BYTES" and data.tolist() == [[b"AB", b"CD"]]
