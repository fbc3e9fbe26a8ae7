"""The rate limiter (``--rate-limit execution_count``), after Triton's qa/L0_rate_limiter and the
rate-limiter cases of qa/L0_model_update: instances run only while they hold the resources their
instance group asks for, instances of priority 2 get half the turns of priority 1, loads that ask
for more than there is fail in Triton's words. Python models (each instance in its own stub
process) log when each execution starts and ends, so overlaps are read, not timed.
``test_refusals_and_turns_match_triton`` does the same against the real Triton 2.51 where the
anchor (../shared/anchors) is set up."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.sequence_models import write_accumulator
from helpers.serve_models import write_python_model
from helpers.triton_anchor import TritonServer, unavailable_reason
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

ANCHOR_UNAVAILABLE = unavailable_reason()

# Each execution: its start and end time appended to the file named by the "log" parameter, after
# a sleep of "delay_ms"; INPUT0 answered as OUTPUT0.
TIMED_PY = '''
import json
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.log = parameters["log"]["string_value"]
        self.delay = int(parameters["delay_ms"]["string_value"]) / 1000

    def execute(self, requests):
        start = time.time()
        time.sleep(self.delay)
        with open(self.log, "a") as log:
            log.write(f"{start} {time.time()}\\n")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
                    request, "INPUT0").as_numpy())]) for request in requests]
'''

FIRST = 'rate_limiter { resources [ { name: "resource1" count: 4 } ] }'
SECOND = ('rate_limiter { resources [ { name: "resource1" count: 2 }, { name: "resource2" global: true count: 2 } ] '
          'priority: 2 }')
# name -> the rate_limiter of each of its instance groups (one instance each)
MODELS = {
    "first": [FIRST],
    "second": [SECOND],
    "both_groups": [FIRST, SECOND],  # two instances of one model, as L0_rate_limiter's single-model cases
    "too_big": ['rate_limiter { resources [ { name: "resource1" count: 5 } ] }'],
    "per_device": [SECOND.replace("global: true ", "")],  # resource2 per device, where "second" has it global
    "unnamed": ['rate_limiter { resources [ { name: "resource3" count: 1 } ] }'],
    "batched": [FIRST],  # with dynamic_batching (below)
}
LIMITED = ["resource1:4", "resource2:2"]  # one of first and second at a time
PLENTY = ["resource1:6", "resource2:2"]  # both at once
DELAY_MS = 40


def _model_config(groups: list[str], log: Path) -> str:
    instance_groups = ", ".join(f"{{ kind: KIND_CPU count: 1 {limiter} }}" for limiter in groups)
    return f"""
max_batch_size: 4
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {instance_groups} ]
parameters [ {{ key: "log" value {{ string_value: "{log}" }} }}, {{ key: "delay_ms" value {{ string_value: "{DELAY_MS}" }} }} ]
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rate_limiter")
    (root / "logs").mkdir()
    for name, groups in MODELS.items():
        batching = "dynamic_batching { }\n" if name == "batched" else ""
        write_python_model(root / "repo", name, _model_config(groups, root / "logs" / name) + batching, TIMED_PY)
    return root / "repo"


def _runs(repo: Path, model: str) -> list[tuple[float, float]]:
    """The (start, end) of each execution of ``model`` so far; the log starts empty."""
    log = repo.parent / "logs" / model
    lines = log.read_text().split() if log.exists() else []
    return [(float(a), float(b)) for a, b in zip(lines[::2], lines[1::2])]


def _clear_runs(repo: Path) -> None:
    for log in (repo.parent / "logs").iterdir():
        log.unlink()


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b)


def _self_overlap(runs: list[tuple[float, float]]) -> bool:
    ordered = sorted(runs)
    return any(later[0] < earlier[1] for earlier, later in zip(ordered, ordered[1:]))


def _load(url: str, models: list[str], seconds: float, in_flight: int = 4) -> float:
    """Keep ``in_flight`` requests outstanding on each of ``models`` for ``seconds`` (gRPC), then
    wait for every answer; every answer must echo its input. Returns when (``time.time()``) the
    sending stopped: the runs after it drain what is in flight, no longer all models at once."""
    stopped_at = time.time() + seconds
    stop = time.monotonic() + seconds
    failures: list[str] = []

    def drive(model: str) -> None:
        client = grpcclient.InferenceServerClient(url)
        slots = threading.Semaphore(in_flight)

        def answered(result, error):
            if error is not None:
                failures.append(f"{model}: {error}")
            slots.release()

        while time.monotonic() < stop:
            slots.acquire()
            data = np.random.rand(1, 1).astype(np.float32)
            tensor = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
            tensor.set_data_from_numpy(data)
            client.async_infer(model, [tensor], callback=answered)
        for _ in range(in_flight):
            slots.acquire()
        client.close()

    drivers = [threading.Thread(target=drive, args=(model,)) for model in models]
    for driver in drivers:
        driver.start()
    for driver in drivers:
        driver.join()
    assert not failures
    return stopped_at


def _serve(repo: Path, resources: list[str], **options) -> BackgroundServer:
    """The server under the rate limiter with ``resources``; ``options`` more ServeOptions."""
    return BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=None, control_mode="explicit",
                                         exit_timeout_secs=10, rate_limit=True, rate_limit_resources=resources,
                                         **options))


# Loads in this order with LIMITED resources, and what each answers (None: it loads).
LOADS = [
    ("too_big", 'Resource count for "resource1" is limited to 4 which will prevent scheduling of one or more model '
                "instances, the minimum required count is 5"),
    ("unnamed", 'Resource count for "resource3" is limited to 0 which will prevent scheduling of one or more model '
                "instances, the minimum required count is 1"),
    ("per_device", None),
    ("second", 'Resource "resource2" is present as both global and device-specific resource in the model '
               "configuration."),
]


def _load_answers(client) -> list[str | None]:
    answers = []
    for model, _ in LOADS:
        try:
            client.load_model(model)
            answers.append(None)
        except InferenceServerException as exc:
            answers.append(exc.message())
    return answers


def test_loads_asking_for_more_than_there_is_fail_in_tritons_words(repo, transports):
    with _serve(repo, LIMITED, **transports) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        answers = _load_answers(client)
        for (model, expected), answer in zip(LOADS, answers):
            if expected is None:
                assert answer is None, answer
            else:
                assert answer == (f"load failed for model '{model}': version 1 is at UNAVAILABLE state: "
                                  f"Invalid argument: {expected}")
        # the refused models are not ready; once the per-device user of resource2 is gone, the global one loads
        assert not client.is_model_ready("too_big") and client.is_model_ready("per_device")
        client.unload_model("per_device")
        client.load_model("second")
        assert client.is_model_ready("second")
        client.close()


def _turns(repo: Path, resources: list[str]) -> tuple[list, list]:
    """first and second loaded under ``resources``, both kept busy for a while: their runs that
    started while both had requests waiting."""
    _clear_runs(repo)
    with _serve(repo, resources) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for model in ("first", "second"):
            client.load_model(model)
        stopped_at = _load(server.grpc_url, ["first", "second"], seconds=1.5)
        client.close()
    return _busy_runs(repo, "first", stopped_at), _busy_runs(repo, "second", stopped_at)


def _busy_runs(repo: Path, model: str, stopped_at: float) -> list[tuple[float, float]]:
    return [run for run in _runs(repo, model) if run[0] < stopped_at]


def test_one_model_at_a_time_and_priority_1_gets_twice_the_turns(repo):
    first, second = _turns(repo, LIMITED)
    assert not _overlap(first, second)
    # both had requests waiting all along: priority 1 ran twice for each run of priority 2
    assert 1.6 <= len(first) / len(second) <= 2.5, (len(first), len(second))


def test_with_plenty_of_resources_both_models_run_at_once(repo):
    first, second = _turns(repo, PLENTY)
    assert _overlap(first, second)
    assert 0.7 <= len(first) / len(second) <= 1.4, (len(first), len(second))


@pytest.mark.parametrize("resources, at_once", [([], False), (PLENTY, True)])
def test_the_instances_of_one_model_take_turns_when_resources_are_short(repo, resources, at_once):
    """L0_rate_limiter's single-model cases: one model, an instance of each group; by default
    (the most any instance asks for: resource1 4) one runs at a time."""
    _clear_runs(repo)
    with _serve(repo, resources) as server:
        httpclient.InferenceServerClient(server.http_url).load_model("both_groups")
        _load(server.grpc_url, ["both_groups"], seconds=1.0, in_flight=8)
    assert _self_overlap(_runs(repo, "both_groups")) is at_once


def test_a_batch_waiting_for_its_resources_takes_what_queues_meanwhile(repo):
    """L0_rate_limiter's dynamic-batching case: a model whose instance waits for resources held by
    another model takes its batch once it has them, with every request queued meanwhile (Triton's
    payload grows while it waits), not the first request alone."""
    with _serve(repo, []) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for model in ("batched", "second"):
            client.load_model(model)
        busy = threading.Thread(target=_load, args=(server.grpc_url, ["second"], 2.0, 2))
        busy.start()  # "second" runs back to back: "batched" always waits for it
        time.sleep(0.3)
        answered: list = []
        with grpcclient.InferenceServerClient(server.grpc_url) as sender:
            for _ in range(5):  # bursts of 4 requests
                for _ in range(4):
                    tensor = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
                    tensor.set_data_from_numpy(np.ones((1, 1), np.float32))
                    sender.async_infer("batched", [tensor], callback=lambda result, error: answered.append(error))
                time.sleep(0.25)
        busy.join()
        stats = client.get_inference_statistics("batched")["model_stats"][0]
        client.close()
    assert answered == [None] * 20
    executions = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}
    assert executions == {4: 5}, executions


def test_sequences_run_under_the_rate_limiter(tmp_path, transports):
    """L0_rate_limiter's sequence case: an accumulator whose two instances cannot run together
    (one asks for all of resource1) answers two interleaved sequences of 1..9 with their totals."""
    model = write_accumulator(tmp_path / "repo", "acc", max_batch_size=1)
    config = (model / "config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(config.replace(
        "instance_group [ { kind: KIND_CPU count: 1 } ]",
        'instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: "resource1" count: 4 } ] } },'
        ' { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: "resource1" count: 2 } ] priority: 2 } } ]'))
    with _serve(tmp_path / "repo", [], **transports) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        client.load_model("acc")
        totals: dict[int, list[int]] = {7: [], 8: []}

        def sequence(sequence_id: int) -> None:
            with grpcclient.InferenceServerClient(server.grpc_url) as sender:
                for value in range(1, 10):
                    tensor = grpcclient.InferInput("INPUT", [1, 1], "INT32")
                    tensor.set_data_from_numpy(np.array([[value]], np.int32))
                    result = sender.infer("acc", [tensor], sequence_id=sequence_id, sequence_start=value == 1,
                                          sequence_end=value == 9)
                    totals[sequence_id].append(int(result.as_numpy("OUTPUT")[0][0]))

        threads = [threading.Thread(target=sequence, args=(sid,)) for sid in totals]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        client.close()
    running = [sum(range(1, n + 1)) for n in range(1, 10)]
    assert totals == {7: running, 8: running}


def _updated(client, model: str, resource1: int) -> None:
    config = {"name": model, "backend": "python", "max_batch_size": 4,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "parameters": {"log": {"string_value": "/dev/null"}, "delay_ms": {"string_value": "0"}},
              "instance_group": [{"kind": "KIND_CPU", "count": 1,
                                  "rate_limiter": {"resources": [{"name": "R1", "count": resource1}]}}]}
    client.load_model(model, config=json.dumps(config))


def _infer(client, model: str) -> None:
    tensor = httpclient.InferInput("INPUT0", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 1), np.float32))
    assert client.infer(model, [tensor]).as_numpy("OUTPUT0").tolist() == [[1.0]]


def test_instance_updates_follow_the_resources(repo, caplog):
    """L0_model_update's rate-limiter cases: a reload that asks for less lowers the default count
    (logged as Triton logs it at --log-verbose 1); with --rate-limit-resource R1:10, a reload that
    asks for 32 fails and the version serves on, one that asks for 10 loads."""
    caplog.set_level(logging.DEBUG, logger="tritonctl.serve")
    with _serve(repo, [], log_verbose=1) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        _updated(client, "first", 4)
        _updated(client, "first", 3)
        _updated(client, "first", 8)  # more than before: the new default lets it run
        _infer(client, "first")
        client.close()
    assert "Resource: R1\\t Count: 3" in caplog.text
    with _serve(repo, ["R1:10"]) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        _updated(client, "first", 2)
        with pytest.raises(InferenceServerException, match='Resource count for "R1" is limited to 10 which will '
                                                           "prevent scheduling"):
            _updated(client, "first", 32)
        _infer(client, "first")
        _updated(client, "first", 10)
        _infer(client, "first")
        client.close()


@pytest.mark.parametrize("args, message", [
    (["--rate-limit=sometimes"], "invalid argument for --rate-limit"),
    (["--rate-limit-resource=R1"], "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
                                   "'<resource_name>:<count>'. Got R1"),
    (["--rate-limit-resource=R1:2:0:1"], "Got R1:2:0:1"),
    (["--rate-limit-resource=R1:two"], "Invalid option value. Got two"),
])
def test_option_errors_in_tritonservers_words(tmp_path, args, message):
    process = subprocess.run([sys.executable, "-m", "tritonctl", "serve", str(tmp_path), *args],
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 2 and message in process.stderr


@pytest.mark.skipif(ANCHOR_UNAVAILABLE is not None, reason=str(ANCHOR_UNAVAILABLE))
def test_refusals_and_turns_match_triton(repo, tmp_path):
    args = ("--rate-limit=execution_count", *(f"--rate-limit-resource={r}" for r in LIMITED))
    _clear_runs(repo)
    with TritonServer(repo, tmp_path, args=args) as triton:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{triton.http_port}")
        answers = [None if a is None else a.rstrip(";\n") for a in _load_answers(client)]
        client.unload_model("per_device")
        for model in ("first", "second"):
            client.load_model(model)
        stopped_at = _load(f"127.0.0.1:{triton.grpc_port}", ["first", "second"], seconds=1.5)
        client.close()
    first, second = _busy_runs(repo, "first", stopped_at), _busy_runs(repo, "second", stopped_at)
    assert answers == [None if expected is None else
                       f"load failed for model '{model}': version 1 is at UNAVAILABLE state: Invalid argument: "
                       f"{expected}" for model, expected in LOADS]
    assert not _overlap(first, second) and 1.6 <= len(first) / len(second) <= 2.5


@pytest.mark.gpu
@pytest.mark.parametrize("resources, at_once", [([], False), (["R:2:0"], True)])
def test_gpu_instances_share_their_devices_resources(tmp_path, resources, at_once):
    """Two KIND_GPU instances on GPU 0 asking for the per-device resource R: by default (the most any
    instance asks for, 1 on each device) they take turns; with R:2 on device 0 both run at once."""
    from tritonctl.repo_schema.gpus import local_gpus

    if local_gpus().count == 0:
        pytest.skip("needs a GPU that the driver shows (nvidia-smi)")
    (tmp_path / "logs").mkdir()
    config = _model_config([], tmp_path / "logs" / "on_gpu").replace(
        "instance_group [  ]", 'instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0 ] '
                               'rate_limiter { resources [ { name: "R" count: 1 } ] } } ]')
    write_python_model(tmp_path / "repo", "on_gpu", config, TIMED_PY)
    with _serve(tmp_path / "repo", resources) as server:
        httpclient.InferenceServerClient(server.http_url).load_model("on_gpu")
        _load(server.grpc_url, ["on_gpu"], seconds=1.0, in_flight=8)
    assert _self_overlap(_runs(tmp_path / "repo", "on_gpu")) is at_once
