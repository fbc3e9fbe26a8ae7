"""Model warmup (``model_warmup``): each instance runs every sample before its version serves, in
Triton's order and with Triton's data, counted in the statistics as Triton counts them; a sample
that fails fails the load in Triton's words. ``test_statistics_and_refusals_match_triton`` loads
the same repository into the real Triton 2.51 where the anchor (../shared/anchors) is set up."""

from __future__ import annotations

import json
import struct
from http.client import HTTPException
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.sequence_models import write_accumulator
from helpers.serve_models import write_add_sub, write_python_model
from helpers.triton_anchor import TritonServer, unavailable_reason
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

ANCHOR_UNAVAILABLE = unavailable_reason()

# Each request: a line with the instance, the execution's request count, IN's shape and values and S.
RECORDING_PY = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.instance = args["model_instance_name"]
        self.log = json.loads(args["model_config"])["parameters"]["log"]["string_value"]

    def execute(self, requests):
        responses = []
        with open(self.log, "a") as log:
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                s = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
                log.write(json.dumps([self.instance, len(requests), list(x.shape), x.ravel().tolist(),
                                      [v.decode() for v in s.ravel()]]) + "\\n")
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
'''

SAMPLES = """
model_warmup [
  { name: "zeros" batch_size: 3 count: 2
    inputs { key: "IN" value { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } }
    inputs { key: "S" value { data_type: TYPE_STRING dims: [ 2 ] zero_data: true } } },
  { name: "random" batch_size: 1
    inputs { key: "IN" value { data_type: TYPE_FP32 dims: [ 3 ] random_data: true } }
    inputs { key: "S" value { data_type: TYPE_STRING dims: [ 2 ] random_data: true } } },
  { name: "file" batch_size: 2
    inputs { key: "IN" value { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "in.bin" } }
    inputs { key: "S" value { data_type: TYPE_STRING dims: [ 2 ] input_data_file: "s.bin" } } },
  { name: "skipped" batch_size: 0
    inputs { key: "IN" value { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } }
    inputs { key: "S" value { data_type: TYPE_STRING dims: [ 2 ] zero_data: true } } }
]
"""

RAISING_PY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        raise pb_utils.TritonModelException("boom in execute")
'''

# Decoupled: two responses and the final flag for each request; an error response when IN < 0.
DECOUPLED_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            if (x < 0).any():
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative warmup")))
            else:
                for _ in range(2):
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


SILENT_PY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


def _io(extra: str = "") -> str:
    return ('input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] }' + extra + ' ]\n'
            'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]\n')


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("warmup")
    repo = root / "repo"
    log = root / "recorded.jsonl"
    model = write_python_model(
        repo, "recorded", "max_batch_size: 8\n" + _io(', { name: "S" data_type: TYPE_STRING dims: [ 2 ] }')
        + "dynamic_batching { }\ninstance_group [ { kind: KIND_CPU count: 2 } ]\n"
        + f'parameters [ {{ key: "log" value {{ string_value: "{log}" }} }} ]\n' + SAMPLES, RECORDING_PY)
    (model / "warmup").mkdir()
    np.arange(3, dtype="<f4").tofile(model / "warmup" / "in.bin")
    (model / "warmup" / "s.bin").write_bytes(struct.pack("<I", 2) + b"hi" + struct.pack("<I", 3) + b"abc")
    one_sample = ('model_warmup [ { name: "w1" batch_size: 1 inputs { key: "IN" value { data_type: TYPE_FP32 '
                  'dims: [ 3 ] %s } } } ]\n')
    write_python_model(repo, "raising", "max_batch_size: 0\n" + _io() + one_sample % "zero_data: true", RAISING_PY)
    decoupled = "max_batch_size: 0\n" + _io() + "model_transaction_policy { decoupled: true }\n"
    write_python_model(repo, "decoupled", decoupled + one_sample % "zero_data: true", DECOUPLED_PY)
    # L0_warmup's decoupled model: no response, the final flag alone
    write_python_model(repo, "decoupled_silent", decoupled + one_sample % "zero_data: true", SILENT_PY)
    bad_file = write_python_model(repo, "decoupled_error", decoupled + one_sample % 'input_data_file: "minus.bin"',
                                  DECOUPLED_PY)
    (bad_file / "warmup").mkdir()
    np.full(3, -1, dtype="<f4").tofile(bad_file / "warmup" / "minus.bin")
    short = write_python_model(repo, "short_strings", "max_batch_size: 0\n" + _io(
        ', { name: "S" data_type: TYPE_STRING dims: [ 2 ] }') + 'model_warmup [ { name: "w1" batch_size: 1 '
        'inputs { key: "IN" value { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } '
        'inputs { key: "S" value { data_type: TYPE_STRING dims: [ 2 ] input_data_file: "one.bin" } } } ]\n',
        RECORDING_PY.replace('json.loads(args["model_config"])["parameters"]["log"]["string_value"]', '"/dev/null"'))
    (short / "warmup").mkdir()
    (short / "warmup" / "one.bin").write_bytes(struct.pack("<I", 2) + b"hi")
    # L0_warmup's sequence case: the sample gives the sequence batcher's control inputs too
    accumulator = write_accumulator(repo, "sequence", max_batch_size=8)
    sample = 'model_warmup [ { name: "sequence sample" batch_size: 8 '
    for key, data_type in (("INPUT", "TYPE_INT32"), ("START", "TYPE_INT32"), ("END", "TYPE_BOOL"),
                           ("READY", "TYPE_FP32"), ("CORRID", "TYPE_UINT64")):
        sample += f'inputs {{ key: "{key}" value {{ data_type: {data_type} dims: [ 1 ] zero_data: true }} }} '
    with (accumulator / "config.pbtxt").open("a") as config:
        config.write(sample + "} ]\n")
    write_add_sub(repo, "onnx_add_sub", extra='model_warmup [ { name: "ones" batch_size: 4 count: 3 '
                  'inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } '
                  'inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]')
    return repo


def _recorded(repo: Path) -> list:
    return [json.loads(line) for line in (repo.parent / "recorded.jsonl").read_text().splitlines()]


def _stats(client, model: str) -> tuple:
    stats = client.get_inference_statistics(model)["model_stats"][0]
    return (stats["inference_count"], stats["execution_count"], stats["inference_stats"]["success"]["count"],
            stats["inference_stats"]["fail"]["count"],
            sorted((b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]))


# What each model's warmup does to its statistics, and each load's answer (None: it loads).
EXPECTED_STATS = {"recorded": (18, 8, 18, 0, [(1, 2), (2, 2), (3, 4)]), "sequence": (8, 1, 8, 0, [(8, 1)])}
EXPECTED_LOADS = {
    "raising": "load failed for model 'raising': version 1 is at UNAVAILABLE state: Invalid argument: failed to run "
               "warmup sample 'w1': Failed to process the request(s) for model 'raising_0', message: "
               "TritonModelException: boom in execute",
    "decoupled": None,
    "decoupled_silent": None,
    "decoupled_error": "load failed for model 'decoupled_error': version 1 is at UNAVAILABLE state: Invalid argument: "
                       "failed to run warmup sample 'w1': negative warmup; ",
    # a BYTES file is checked as a request's BYTES input is
    "short_strings": "load failed for model 'short_strings': version 1 is at UNAVAILABLE state: Invalid argument: "
                     "[request id: <id_unknown>] expected 2 string elements for inference input 'S' for model "
                     "'short_strings', got 1",
}


def _loads(client, models=tuple(EXPECTED_LOADS)) -> dict:
    answers = {}
    for model in models:
        try:
            client.load_model(model)
            answers[model] = None
        except InferenceServerException as exc:
            answers[model] = exc.message()
    return answers


def _triton_loads(triton: TritonServer, models) -> dict:
    """``_loads`` on the real Triton, each load on a server that is up: Triton 2.51 at times stops
    with a segmentation fault after a load whose warmup failed, and the load that found it gone
    runs again, once, on a fresh server."""
    answers = {}
    for model in models:
        for attempt in range(2):
            client = httpclient.InferenceServerClient(f"127.0.0.1:{triton.http_port}")
            try:
                answers.update(_loads(client, [model]))
                break
            except (HTTPException, ConnectionError):  # the connection closed: the server has gone
                if attempt:
                    raise
                triton.restart()
            finally:
                client.close()
    return answers


def _load_answers_match(answers: dict) -> None:
    for model, answer in answers.items():
        expected = EXPECTED_LOADS[model]
        if expected is None:
            assert answer is None, answer
        else:
            assert answer.startswith(expected), answer


@pytest.fixture(scope="module")
def served(repo, transports):
    (repo.parent / "recorded.jsonl").unlink(missing_ok=True)
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
                           exit_timeout_secs=5, **transports)
    with BackgroundServer(options) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        client.load_model("recorded")
        yield server, client
        client.close()


def test_a_sequence_models_sample_carries_its_control_inputs(served):
    _, client = served
    client.load_model("sequence")
    assert _stats(client, "sequence") == EXPECTED_STATS["sequence"]


def test_each_instance_runs_every_sample_in_order_before_the_model_serves(served, repo):
    _, client = served
    runs = _recorded(repo)
    for instance in ("recorded_0_0", "recorded_0_1"):
        mine = [run[1:] for run in runs if run[0] == instance]
        zeros = [3, [1, 3], [0.0, 0.0, 0.0], ["", ""]]
        assert mine[:6] == [zeros] * 6  # batch_size 3, count 2: two executions of three requests
        assert mine[6][:2] == [1, [1, 3]] and mine[6][3] == ["", ""]  # random numbers; BYTES get empty strings
        assert mine[7:] == [[2, [1, 3], [0.0, 1.0, 2.0], ["hi", "abc"]]] * 2  # from warmup/in.bin and s.bin
    assert _stats(client, "recorded") == EXPECTED_STATS["recorded"]


def test_a_failing_sample_fails_the_load_in_tritons_words(served):
    _, client = served
    _load_answers_match(_loads(client))
    assert not client.is_model_ready("raising") and client.is_model_ready("decoupled")
    with grpcclient.InferenceServerClient(served[0].grpc_url) as grpc:
        assert grpc.get_inference_statistics("decoupled").model_stats[0].execution_count == 1


def test_an_onnx_model_is_warmed_up_before_it_serves(served):
    server, client = served
    client.load_model("onnx_add_sub")
    assert _stats(client, "onnx_add_sub")[:2] == (12, 3)  # 3 executions of 4 requests
    inputs = [httpclient.InferInput(name, [1, 4], "FP32") for name in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    assert client.infer("onnx_add_sub", inputs).as_numpy("OUTPUT0").tolist() == [[2.0] * 4]


def test_an_instance_added_by_an_update_is_warmed_up_alone(served):
    _, client = served
    config = client.get_model_config("onnx_add_sub")
    before = _stats(client, "onnx_add_sub")[1]
    config["instance_group"][0]["count"] = 2
    client.load_model("onnx_add_sub", config=json.dumps(config))
    assert _stats(client, "onnx_add_sub")[1] == before + 3


@pytest.mark.skipif(ANCHOR_UNAVAILABLE is not None, reason=str(ANCHOR_UNAVAILABLE))
def test_statistics_and_refusals_match_triton(repo, tmp_path):
    (repo.parent / "recorded.jsonl").unlink(missing_ok=True)
    with TritonServer(repo, tmp_path) as triton:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{triton.http_port}")
        stats = {}
        for model in EXPECTED_STATS:
            client.load_model(model)
            stats[model] = _stats(client, model)
        client.close()
        # Triton 2.51 at times stops with a segmentation fault once a warmup sample's execute()
        # raised ("raising"; 1 run in about 6 here, during its own load): that load is left out of
        # its run. It has also gone once after another of these loads had been answered.
        answers = _triton_loads(triton, [model for model in EXPECTED_LOADS if model != "raising"])
    assert stats == EXPECTED_STATS
    _load_answers_match(answers)
