"""Sequence batching end to end: a real server, the real tritonclient over HTTP and gRPC, a
Python accumulator (controls START/END/READY/CORRID) and an ONNX model with implicit state."""

from __future__ import annotations

import itertools
import json
import queue
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.sequence_models import write_accumulator, write_state_model
from helpers.serve_models import write_add_sub
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

OLDEST = "oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 2000 }"
STATE_BLOCK = ('state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]')
ids = itertools.count(1000)


@pytest.fixture(scope="module")
def served(tmp_path_factory, transports):
    repo = tmp_path_factory.mktemp("sequence") / "repo"
    write_accumulator(repo, "acc_direct")
    write_accumulator(repo, "acc_oldest", strategy=OLDEST, corrid_type="TYPE_STRING")
    write_accumulator(repo, "acc_stats")
    write_accumulator(repo, "acc_refused")
    write_accumulator(repo, "acc_idle", max_batch_size=1, idle_us=300_000)
    stateful = write_accumulator(repo, "acc_state")
    config = stateful / "config.pbtxt"
    config.write_text(config.read_text().replace("direct { }", "direct { }\n  " + STATE_BLOCK))
    write_state_model(repo, "state_direct")
    write_state_model(repo, "state_oldest", strategy="oldest { }", start_value=100)
    write_add_sub(repo, "plain")
    with BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, **transports)) as server:
        yield server


def client_for(served, module):
    return module.InferenceServerClient(served.http_url if module is httpclient else served.grpc_url)


def value_input(module, value: int, batch: int = 1):
    tensor = module.InferInput("INPUT", [batch, 1], "INT32")
    tensor.set_data_from_numpy(np.full((batch, 1), value, np.int32))
    return tensor


def step(client, module, model: str, sequence_id, value: int, start: bool = False, end: bool = False):
    result = client.infer(model, [value_input(module, value)], sequence_id=sequence_id, sequence_start=start,
                          sequence_end=end)
    return int(result.as_numpy("OUTPUT")[0, 0]), result


PROTOCOLS = pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])


@PROTOCOLS
@pytest.mark.parametrize("model, base", [("acc_direct", 0), ("acc_oldest", 0), ("state_direct", 0),
                                         ("state_oldest", 100)])
def test_interleaved_sequences_give_running_sums(served, module, model, base):
    client = client_for(served, module)
    sequences = {next(ids): [1, 2, 3], next(ids): [10, 20, 30], next(ids): [100, 200, 300]}
    if model == "acc_oldest":  # its CORRID control is TYPE_STRING: string ids
        sequences = {f"session-{cid}": values for cid, values in sequences.items()}
    totals = dict.fromkeys(sequences, base)
    for index in range(3):
        for cid, values in sequences.items():
            got, result = step(client, module, model, cid, values[index], start=index == 0, end=index == 2)
            totals[cid] += values[index]
            assert got == totals[cid]
            if model.startswith("acc"):  # the model saw request.flags(): START = 1, END = 2
                assert int(result.as_numpy("FLAGS")[0, 0]) == {0: 1, 1: 0, 2: 2}[index]
            else:  # the model saw the id as its CORRID input, and its state is readable as an output
                assert int(result.as_numpy("CORRID_OUT")[0, 0]) == cid
                assert int(result.as_numpy("STATE_OUT")[0, 0]) == totals[cid]


def test_concurrent_sequences_share_slots_and_wait_in_the_backlog(served):
    """Six sequences at once on four slots: two wait for a slot, every sum is right."""
    results: dict[int, list[int]] = {}

    def run(cid: int) -> None:
        client = httpclient.InferenceServerClient(served.http_url)
        results[cid] = [step(client, httpclient, "acc_direct", cid, cid % 100 + i, start=i == 0, end=i == 4)[0]
                        for i in range(5)]

    threads = [threading.Thread(target=run, args=(next(ids),)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 6
    for cid, sums in results.items():
        assert sums == list(itertools.accumulate(cid % 100 + i for i in range(5)))


def test_grpc_stream_keeps_the_sequence_in_order(served):
    client = grpcclient.InferenceServerClient(served.grpc_url)
    answers: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    cid = next(ids)
    try:
        for i, value in enumerate([5, 6, 7, 8]):
            client.async_stream_infer("state_direct", [value_input(grpcclient, value)], sequence_id=cid,
                                      sequence_start=i == 0, sequence_end=i == 3)
        got = []
        for _ in range(4):
            result, error = answers.get(timeout=10)
            assert error is None
            got.append(int(result.as_numpy("OUTPUT")[0, 0]))
    finally:
        client.stop_stream()
    assert got == [5, 11, 18, 26]


@PROTOCOLS
def test_errors_use_tritons_texts(served, module):
    client = client_for(served, module)
    invalid = "400" if module is httpclient else "StatusCode.INVALID_ARGUMENT"
    cases = [
        (dict(sequence_id=424242), "inference request for sequence 424242 to model 'acc_direct' must specify the "
                                   "START flag on the first request of the sequence"),
        (dict(), "inference request to model 'acc_direct' must specify a non-zero or non-empty correlation ID"),
        # Triton 2.51 ran this one with the string's bytes in CORRID; later releases refuse it so.
        (dict(sequence_id="text", sequence_start=True), "sequence batching control 'CORRID' data-type is 'BYTES', "
                                                         "but model 'acc_direct' expects 'UINT64'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(InferenceServerException) as caught:
            client.infer("acc_direct", [value_input(module, 1)], **kwargs)
        assert caught.value.status() == invalid and caught.value.message().startswith(message)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("acc_direct", [value_input(module, 1, batch=2)], sequence_id=next(ids), sequence_start=True)
    assert caught.value.message() == ("inference request to model 'acc_direct' must specify batch-size 1 due to "
                                      "requirements of sequence batcher")


def post(served, model: str, parameters: dict) -> tuple[int, str]:
    body = json.dumps({"inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [1]}],
                       "parameters": parameters}).encode()
    request = urllib.request.Request(f"http://{served.http_url}/v2/models/{model}/infer", body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]


def test_http_parameters_of_the_wrong_type(served):
    assert post(served, "acc_direct", {"sequence_id": True, "sequence_start": True}) == \
        (400, "Unable to parse 'sequence_id': attempt to access JSON non-string as string")
    assert post(served, "acc_direct", {"sequence_id": -4, "sequence_start": True}) == \
        (400, "Unable to parse 'sequence_id': attempt to access JSON non-string as string")
    assert post(served, "acc_direct", {"sequence_id": 9, "sequence_start": 1}) == \
        (400, "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean")
    status, body = post(served, "acc_direct", {"sequence_id": next(ids), "sequence_start": True,
                                               "sequence_end": True})
    assert status == 200 and json.loads(body)["outputs"][0]["data"] == [1]


@PROTOCOLS
def test_integer_id_on_a_string_correlation_control_is_refused(served, module):
    """Triton 2.51 failed every request of a batching model with a TYPE_STRING CORRID ("unexpected
    number of string elements 2 for inference input 'CORRID', expecting 1"); later releases refuse
    an integer id there with this text, and run string ids."""
    client = client_for(served, module)
    with pytest.raises(InferenceServerException) as caught:
        step(client, module, "acc_oldest", next(ids), 4, start=True)
    assert caught.value.message() == ("sequence batching control 'CORRID' data-type is 'UINT64', but model "
                                      "'acc_oldest' expects 'BYTES'")
    cid = f"text-{next(ids)}"
    assert step(client, module, "acc_oldest", cid, 4, start=True)[0] == 4
    assert step(client, module, "acc_oldest", cid, 5, end=True)[0] == 9


def test_idle_sequence_frees_its_slot(served):
    """acc_idle has one slot and max_sequence_idle_microseconds 300000."""
    client = httpclient.InferenceServerClient(served.http_url)
    idle, waiting = next(ids), next(ids)
    assert step(client, httpclient, "acc_idle", idle, 1, start=True)[0] == 1
    # The second sequence waits in the backlog until the first one has been idle long enough.
    assert step(client, httpclient, "acc_idle", waiting, 2, start=True)[0] == 2
    with pytest.raises(InferenceServerException) as caught:
        step(client, httpclient, "acc_idle", idle, 3)
    assert caught.value.message() == (f"inference request for sequence {idle} to model 'acc_idle' must specify the "
                                      "START flag on the first request of the sequence")
    assert step(client, httpclient, "acc_idle", waiting, 3, end=True)[0] == 5


def test_statistics_count_sequence_requests(served):
    """Two sequences in slots 0 and 1, one request at a time: slot 1's requests run with a filler
    in the idle slot 0, as in Triton, so they execute as batches of 2; the fillers are no
    inferences (Triton counts the batch sizes of successful requests)."""
    client = httpclient.InferenceServerClient(served.http_url)
    first, second = next(ids), next(ids)
    for index in range(3):
        for cid in (first, second):
            step(client, httpclient, "acc_stats", cid, 1, start=index == 0, end=index == 2)
    stats = client.get_inference_statistics("acc_stats")["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] == 6
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert stats["execution_count"] == 6
    assert stats["inference_count"] == 6
    assert {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]} == {1: 3, 2: 3}
    metrics = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    assert 'nv_inference_request_success{model="acc_stats",version="1"} 6' in metrics
    assert 'nv_inference_exec_count{model="acc_stats",version="1"} 6' in metrics
    assert 'nv_inference_count{model="acc_stats",version="1"} 6' in metrics


@PROTOCOLS
def test_refused_sequence_requests_are_not_counted_as_failures(served, module):
    client = client_for(served, module)
    cid = next(ids)
    refusals = [dict(sequence_id=cid), dict(sequence_id=0, start=True), dict(sequence_id=cid, start=True, batch=2)]
    for refusal in refusals:
        with pytest.raises(InferenceServerException):
            client.infer("acc_refused", [value_input(module, 1, refusal.get("batch", 1))],
                         sequence_id=refusal["sequence_id"], sequence_start=refusal.get("start", False))
    stats = httpclient.InferenceServerClient(served.http_url).get_inference_statistics("acc_refused")
    assert stats["model_stats"][0]["inference_stats"]["fail"]["count"] == 0
    metrics = urllib.request.urlopen(served.metrics_url, timeout=10).read().decode()
    assert 'nv_inference_request_failure{model="acc_refused",reason="REJECTED",version="1"} 0' in metrics


def test_python_model_with_implicit_state_is_refused(served):
    client = httpclient.InferenceServerClient(served.http_url)
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert index["acc_state"]["state"] == "UNAVAILABLE"
    assert "the python backend cannot use implicit state (sequence_batching.state)" in index["acc_state"]["reason"]
    assert index["acc_direct"]["state"] == "READY"


@PROTOCOLS
def test_sequence_id_on_a_model_without_sequence_batching_is_ignored(served, module):
    client = client_for(served, module)
    tensors = [module.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
    for tensor in tensors:
        tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    result = client.infer("plain", tensors, sequence_id=77, sequence_end=True)
    assert result.as_numpy("OUTPUT0").tolist() == [[2.0] * 4]
